package main

import (
	"fmt"
	"strings"
)

// fmtReward shows a reward to three decimals, or – when there is none.
func fmtReward(r *float64) string {
	if r == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *r)
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return s
}
