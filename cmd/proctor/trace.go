package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proctorhq/proctor/models"
)

func cmdTrace(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		follow := fs.Bool("f", false, "follow the attempt live until it ends")
		allTries := fs.Bool("all-tries", false, "also show the events of earlier tries (superseded: their sandbox was lost and the attempt restarted)")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			if pos[0], err = c.resolveID(ctx, "trace", pos[0]); err != nil {
				return err
			}
			if *asJSON {
				if *follow {
					return usagef("--json prints the trajectory as it is now; -f follows it as text")
				}
				return showTraceJSON(ctx, c, pos[0], *allTries, stdout)
			}
			since := -1
			for {
				var ev struct {
					Events []struct {
						Seq        int             `json:"seq"`
						Kind       string          `json:"kind"`
						Text       string          `json:"text"`
						Data       json.RawMessage `json:"data"`
						Attempt    int             `json:"attempt"`
						Superseded bool            `json:"superseded"`
						Images     []struct {
							URL      string `json:"url"`
							MIMEType string `json:"mime_type"`
							Size     int    `json:"size"`
						} `json:"images"`
					} `json:"events"`
					LatestSeq int      `json:"latest_seq"`
					Status    string   `json:"status"`
					Reward    *float64 `json:"reward"`
				}
				if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/trace/%s/events?since_seq=%d&include_superseded=%v", url.PathEscape(pos[0]), since, *allTries), nil, &ev); err != nil {
					return err
				}
				for _, e := range ev.Events {
					mark := ""
					if e.Superseded {
						mark = fmt.Sprintf(" [try %d, superseded]", e.Attempt)
					}
					fmt.Fprintf(stdout, "%4d  %-17s %s%s\n", e.Seq, e.Kind, describeEvent(e.Kind, e.Text, e.Data), mark)
					for _, im := range e.Images {
						fmt.Fprintf(stdout, "      %-17s %s, %d bytes: %s\n", "image", im.MIMEType, im.Size, cmp.Or(im.URL, "(not kept)"))
					}
					since = e.Seq
				}
				terminal := ev.Status == "completed" || ev.Status == "error" || ev.Status == "cancelled"
				if !*follow || terminal {
					var tr struct {
						StopReason string `json:"stop_reason"`
						Error      string `json:"error"`
						Attempt    int    `json:"attempt"`
					}
					c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(pos[0]), nil, &tr) //nolint:errcheck // the events were read: the rest is a footnote
					reward := fmtReward(ev.Reward)
					fmt.Fprintf(stdout, "\nstatus %s · stop %s · reward %s", ev.Status, orDash(tr.StopReason), reward)
					if tr.Error != "" {
						fmt.Fprintf(stdout, " · error: %s", tr.Error)
					}
					fmt.Fprintln(stdout)
					// Which build ran: after a redeploy, the question a failure raises first.
					var info struct {
						Environment *struct {
							Name         string  `json:"name"`
							BuildVersion *int    `json:"build_version"`
							BuildDigest  *string `json:"build_digest"`
						} `json:"environment"`
					}
					if c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(pos[0])+"/info", nil, &info) == nil && info.Environment != nil && info.Environment.BuildVersion != nil {
						fmt.Fprintf(stdout, "environment %s, build %d", info.Environment.Name, *info.Environment.BuildVersion)
						if d := info.Environment.BuildDigest; d != nil {
							fmt.Fprintf(stdout, " (%s)", *d)
						}
						fmt.Fprintln(stdout)
					}
					if tr.Attempt > 1 && !*allTries {
						fmt.Fprintf(stdout, "this is try %d of the attempt: the %d before lost their sandbox, and their events are superseded; see them with: proctor trace %s --all-tries\n",
							tr.Attempt, tr.Attempt-1, pos[0])
					}
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(500 * time.Millisecond):
				}
			}
		}
	}
}

// showTraceJSON prints a trace and its events (with earlier tries' when allTries) as the API
// answers them.
func showTraceJSON(ctx context.Context, c *apiClient, traceID string, allTries bool, stdout io.Writer) error {
	var out struct {
		Trace  json.RawMessage `json:"trace"`
		Events json.RawMessage `json:"events"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(traceID), nil, &out.Trace); err != nil {
		return err
	}
	if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/trace/%s/events?since_seq=-1&include_superseded=%v", url.PathEscape(traceID), allTries), nil, &out.Events); err != nil {
		return err
	}
	return writeJSON(stdout, out)
}

// describeEvent is one line about an event, its data read as the payload of its kind.
func describeEvent(kind, text string, data json.RawMessage) string {
	switch kind {
	case models.EventToolCall:
		var d models.ToolCallEventData
		json.Unmarshal(data, &d) //nolint:errcheck // a line about what could be read
		return fmt.Sprintf("%s %s", text, compactJSON(d.Arguments))
	case models.EventSystem:
		if text == "" {
			return "(no system prompt)"
		}
	case models.EventAssistant:
		var d models.AssistantEventData
		if text == "" && json.Unmarshal(data, &d) == nil && len(d.Message.ToolCalls) > 0 {
			return fmt.Sprintf("(%d tool call(s))", len(d.Message.ToolCalls))
		}
	case models.EventEvaluate:
		// The evaluation's own words (what was missing, what was wrong) say why the reward is
		// what it is.
		var d models.EvaluateEventData
		json.Unmarshal(data, &d) //nolint:errcheck // a line about what could be read
		line := fmt.Sprintf("%s → reward %v", text, d.Reward)
		if d.Result != nil {
			why := d.Result.Text
			if c, ok := d.Result.Structured["content"].(string); ok {
				why = c // an envserver.EvaluationResult's content, without the JSON around it
			}
			if why != "" {
				line += ": " + why
			}
		}
		return oneLine(line, 240)
	}
	return oneLine(text, 160)
}

func compactJSON(v map[string]any) string {
	if len(v) == 0 {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return oneLine(string(b), 160)
}

type traceListRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	StopReason string   `json:"stop_reason"`
	Reward     *float64 `json:"reward"`
	Error      string   `json:"error"`
	IsValid    bool     `json:"is_valid"`
}

// cmdTraces lists a job's attempts (by default the newest job's), filtered by status.
func cmdTraces(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		job := fs.String("job", "", "the job, its id or the id's start (default: your newest)")
		status := fs.String("status", "", "only these statuses, comma-separated (pending, initializing, running, completed, error, cancelling, cancelled)")
		limit := fs.Int("limit", 50, "at most this many")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			out := stdout
			if *asJSON {
				out = io.Discard // the table and hints; the JSON is printed at the end
			}
			if *job != "" {
				if *job, err = c.resolveID(ctx, "job", *job); err != nil {
					return err
				}
			} else {
				var page struct {
					Items []struct{ ID, Name string } `json:"items"`
				}
				if err := c.do(ctx, http.MethodGet, "/v2/jobs?limit=1", nil, &page); err != nil {
					return err
				}
				if len(page.Items) == 0 {
					return errors.New("your team has no jobs yet: run one with proctor eval TASKSET --model MODEL")
				}
				*job = page.Items[0].ID
				fmt.Fprintf(out, "job %s %q (your newest)\n", page.Items[0].ID, page.Items[0].Name)
			}
			want := map[string]bool{}
			for _, s := range strings.Split(*status, ",") {
				if s = strings.TrimSpace(s); s != "" {
					want[s] = true
				}
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TRACE\tTASK\tSTATUS\tSTOP\tREWARD\tSTARTED")
			shown, seen, total := 0, 0, 0
			type row struct {
				traceListRow
				StartTime *time.Time `json:"start_time"`
			}
			rows := []row{}
			for off := 0; shown < *limit; off += 500 {
				var page struct {
					Items []row `json:"items"`
					Total int   `json:"total"`
				}
				if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs/%s/traces?limit=500&offset=%d", url.PathEscape(*job), off), nil, &page); err != nil {
					return err
				}
				total = page.Total
				for _, t := range page.Items {
					seen++
					if (len(want) > 0 && !want[t.Status]) || shown >= *limit {
						continue
					}
					shown++
					rows = append(rows, t)
					reward, started := fmtReward(t.Reward), "–"
					if t.StartTime != nil {
						started = t.StartTime.Local().Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, orDash(t.Name), t.Status, orDash(t.StopReason), reward, started)
				}
				if len(page.Items) == 0 || seen >= page.Total {
					break
				}
			}
			tw.Flush()
			if *asJSON {
				return writeJSON(stdout, struct {
					JobID string `json:"job_id"`
					Total int    `json:"total"`
					Items []row  `json:"items"`
				}{*job, total, rows})
			}
			fmt.Fprintf(stdout, "%d shown of %d attempts; see one with: proctor trace TRACE_ID\n", shown, total)
			return nil
		}
	}
}
