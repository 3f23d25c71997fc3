package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// cmdUsage prints the team's usage of the last days: inference requests, tokens and cost per
// day, grouped when asked, then environment time (sandboxes, hours and cost) per day.
func cmdUsage(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		days := fs.Int("days", 7, "how many days back, today included (at most 366)")
		by := fs.String("by", "", "group each day by api_key, byok, model, user or route")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			if *days < 1 || *days > 366 {
				return fmt.Errorf("--days %d: want 1 to 366", *days)
			}
			c, err := client()
			if err != nil {
				return err
			}
			u := newUsageQuery(*days, *by, time.Now().UTC())
			if *asJSON {
				return c.printUsageJSON(ctx, u, stdout)
			}
			if err := c.printInferenceUsage(ctx, u, stdout); err != nil {
				return err
			}
			return c.printEnvironmentUsage(ctx, u, stdout)
		}
	}
}

// usageQuery is what `proctor usage` asks: the days back from now, and the grouping of
// inference usage.
type usageQuery struct {
	days          int
	by            string
	start         time.Time // midnight (UTC) of the first day
	inferencePath string
	envPath       string
}

// newUsageQuery asks for the days days up to now, today included.
func newUsageQuery(days int, by string, now time.Time) usageQuery {
	start := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC).AddDate(0, 0, 1-days)
	q := url.Values{"bucket_width": {"1d"}, "start": {start.Format(time.RFC3339)}, "end": {now.Format(time.RFC3339Nano)}}
	if by != "" {
		q.Set("group_by", by)
	}
	return usageQuery{days: days, by: by, start: start, inferencePath: "/v2/usage/inference?" + q.Encode(),
		envPath: fmt.Sprintf("/v2/environments/usage?limit=1&days=%d", days)}
}

// printUsageJSON prints both answers as the API gives them, under the names of what they count.
func (c *apiClient) printUsageJSON(ctx context.Context, u usageQuery, stdout io.Writer) error {
	var both struct {
		Inference    json.RawMessage `json:"inference"`
		Environments json.RawMessage `json:"environments"`
	}
	if err := c.do(ctx, http.MethodGet, u.inferencePath, nil, &both.Inference); err != nil {
		return err
	}
	if err := c.do(ctx, http.MethodGet, u.envPath, nil, &both.Environments); err != nil {
		return err
	}
	return writeJSON(stdout, both)
}

// printInferenceUsage prints the inference calls and their cost, and a table of them per day
// (and group) when there were any.
func (c *apiClient) printInferenceUsage(ctx context.Context, u usageQuery, stdout io.Writer) error {
	var res struct {
		TotalRequests int               `json:"total_requests"`
		TotalCost     float64           `json:"total_cost"`
		Buckets       []inferenceBucket `json:"buckets"`
	}
	if err := c.do(ctx, http.MethodGet, u.inferencePath, nil, &res); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "inference since %s: %d calls, $%.4f\n", u.start.Format("2006-01-02"), res.TotalRequests, res.TotalCost)
	if res.TotalRequests == 0 {
		return nil
	}
	return inferenceTable(stdout, u.by, res.Buckets)
}

// printEnvironmentUsage prints the sandboxes run, their hours and cost, and a table of them per
// day when there were any.
func (c *apiClient) printEnvironmentUsage(ctx context.Context, u usageQuery, stdout io.Writer) error {
	var env struct {
		Summary struct {
			ActiveCount int     `json:"active_count"`
			TotalCost   float64 `json:"total_cost"`
			TotalCount  int     `json:"total_count"`
			TotalHours  float64 `json:"total_hours"`
		} `json:"summary"`
		Chart []struct {
			Date  string  `json:"date"`
			Cost  float64 `json:"cost"`
			Count int     `json:"count"`
			Hours float64 `json:"hours"`
		} `json:"chart"`
	}
	if err := c.do(ctx, http.MethodGet, u.envPath, nil, &env); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nenvironments in the last %d days: %d sandboxes (%d running), %.2f hours, $%.4f\n", u.days, env.Summary.TotalCount,
		env.Summary.ActiveCount, env.Summary.TotalHours, env.Summary.TotalCost)
	if len(env.Chart) == 0 {
		return nil
	}
	tw := newTable(stdout, "DAY", "SANDBOXES", "HOURS", "COST")
	for _, d := range env.Chart {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t$%.4f\n", d.Date, d.Count, d.Hours, d.Cost)
	}
	return tw.Flush()
}

// inferenceBucket is one day of inference usage, by group.
type inferenceBucket = struct {
	Start  time.Time `json:"start"`
	Groups []struct {
		Key              string  `json:"key"`
		Requests         int     `json:"requests"`
		Cost             float64 `json:"cost"`
		PromptTokens     int     `json:"prompt_tokens"`
		CompletionTokens int     `json:"completion_tokens"`
	} `json:"groups"`
}

func inferenceTable(stdout io.Writer, by string, buckets []inferenceBucket) error {
	columns := []string{"DAY", "CALLS", "PROMPT TOKENS", "COMPLETION TOKENS", "COST"}
	if by != "" {
		columns = slices.Insert(columns, 1, by)
	}
	tw := newTable(stdout, columns...)
	for _, b := range buckets {
		for _, g := range b.Groups {
			day := b.Start.Format("2006-01-02")
			if by != "" {
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
