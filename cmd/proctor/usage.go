package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"text/tabwriter"
	"time"
)

// cmdUsage prints the team's inference usage of the last days: requests, tokens and cost per
// day, grouped when asked.
func cmdUsage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("proctor usage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	days := fs.Int("days", 7, "how many days back, today included (at most 366)")
	by := fs.String("by", "", "group each day by api_key, byok, model, user or route")
	client := clientFlags(fs)
	if _, err := parseArgs(fs, args); err != nil {
		return err
	}
	if *days < 1 || *days > 366 {
		return fmt.Errorf("--days %d: want 1 to 366", *days)
	}
	c, err := client()
	if err != nil {
		return err
	}
	end := time.Now().UTC()
	start := time.Date(end.Year(), end.Month(), end.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-*days)
	q := url.Values{"bucket_width": {"1d"}, "start": {start.Format(time.RFC3339)}, "end": {end.Format(time.RFC3339Nano)}}
	if *by != "" {
		q.Set("group_by", *by)
	}
	var res struct {
		TotalRequests int     `json:"total_requests"`
		TotalCost     float64 `json:"total_cost"`
		Buckets       []struct {
			Start  time.Time `json:"start"`
			Groups []struct {
				Key              string  `json:"key"`
				Requests         int     `json:"requests"`
				Cost             float64 `json:"cost"`
				PromptTokens     int     `json:"prompt_tokens"`
				CompletionTokens int     `json:"completion_tokens"`
			} `json:"groups"`
		} `json:"buckets"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/usage/inference?"+q.Encode(), nil, &res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "inference since %s: %d calls, $%.4f\n", start.Format("2006-01-02"), res.TotalRequests, res.TotalCost)
	if res.TotalRequests == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if *by != "" {
		fmt.Fprintf(tw, "DAY\t%s\tCALLS\tPROMPT TOKENS\tCOMPLETION TOKENS\tCOST\n", *by)
	} else {
		fmt.Fprintln(tw, "DAY\tCALLS\tPROMPT TOKENS\tCOMPLETION TOKENS\tCOST")
	}
	for _, b := range res.Buckets {
		for _, g := range b.Groups {
			day := b.Start.Format("2006-01-02")
			if *by != "" {
				key := g.Key
				if key == "" {
					key = "-"
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t$%.4f\n", day, key, g.Requests, g.PromptTokens, g.CompletionTokens, g.Cost)
			} else {
				fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t$%.4f\n", day, g.Requests, g.PromptTokens, g.CompletionTokens, g.Cost)
			}
		}
	}
	return tw.Flush()
}
