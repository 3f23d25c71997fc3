package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// followRetryFor is how long follow keeps retrying an API that went away (a restarting server).
var followRetryFor = 2 * time.Minute

// follow polls a job until no attempt is live, drawing a progress bar (or, when stderr is not a
// terminal, a line whenever the counts change). An API that goes away (a restart) is retried
// with backoff for followRetryFor; the job runs on meanwhile.
func (c *apiClient) follow(ctx context.Context, jobID string, w io.Writer) (jobSummary, error) {
	tty := isTerminal(w)
	last := ""
	var lostSince time.Time
	backoff := 250 * time.Millisecond
	for {
		var s jobSummary
		if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+jobID+"/summary", nil, &s); err != nil {
			if !retryable(err) {
				return s, err
			}
			if lostSince.IsZero() {
				lostSince = time.Now()
				fmt.Fprintf(w, "\nlost the API (%v); retrying for %s — the job runs on; re-attach later with: proctor jobs watch %s\n", err, followRetryFor, jobID)
			} else if time.Since(lostSince) > followRetryFor {
				return s, fmt.Errorf("gave up after %s: %w (the job runs on; re-attach with: proctor jobs watch %s)", followRetryFor, err, jobID)
			}
			select {
			case <-ctx.Done():
				return s, ctx.Err()
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		if !lostSince.IsZero() {
			fmt.Fprintf(w, "the API is back after %s\n", time.Since(lostSince).Round(time.Second))
			lostSince, backoff, last = time.Time{}, 250*time.Millisecond, ""
		}
		line := progressLine(s)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else if line != last {
			fmt.Fprintln(w, line)
		}
		last = line
		if s.TotalTraces > 0 && s.done() == s.TotalTraces {
			if tty {
				fmt.Fprintln(w)
			}
			return s, nil
		}
		if s.Initializing+s.Running+s.Cancelling == 0 && s.done() < s.TotalTraces {
			// Nothing runs, yet attempts wait: a job paused at its ceiling waits for a resume.
			if err := c.pausedJob(ctx, jobID, s); err != nil {
				if tty {
					fmt.Fprintln(w)
				}
				return s, err
			}
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func progressLine(s jobSummary) string {
	const width = 30
	filled := 0
	if s.TotalTraces > 0 {
		filled = s.done() * width / s.TotalTraces
	}
	reward := fmtReward(s.AvgReward)
	return fmt.Sprintf("[%s%s] %d/%d done · %d running · %d errors · mean reward %s",
		strings.Repeat("█", filled), strings.Repeat("·", width-filled), s.done(), s.TotalTraces,
		s.Initializing+s.Running, s.Error, reward)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// pausedJob is an error that says how to go on when the job is paused at its max_cost_usd; nil
// when it is not (or the API cannot say).
func (c *apiClient) pausedJob(ctx context.Context, jobID string, s jobSummary) error {
	var job struct {
		Status     string   `json:"status"`
		MaxCostUSD *float64 `json:"max_cost_usd"`
	}
	if c.do(ctx, http.MethodGet, "/v2/jobs/"+jobID, nil, &job) != nil || job.Status != "paused" {
		return nil
	}
	var usage struct {
		TotalCost float64 `json:"total_cost"`
	}
	spent := "its ceiling"
	if c.do(ctx, http.MethodGet, "/v2/jobs/"+jobID+"/usage", nil, &usage) == nil && job.MaxCostUSD != nil {
		spent = fmt.Sprintf("$%.4g of its max_cost_usd $%.4g", usage.TotalCost, *job.MaxCostUSD)
	}
	return fmt.Errorf("job %s is paused: it has spent %s, and %d attempts wait to start (%d were stopped at their next model call); "+
		"go on with: proctor jobs resume %s --max-cost-usd N (or --lift-ceiling)", jobID, spent, s.Pending, s.Cancelled, jobID)
}
