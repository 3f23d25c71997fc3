package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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

// newTable is a table on w with its header written: columns aligned two spaces apart, as every
// table of the CLI is. Flush it after the last row.
func newTable(w io.Writer, columns ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(columns, "\t"))
	return tw
}
