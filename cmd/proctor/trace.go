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
	"time"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/models"
)

// cmdTrace prints an attempt's trajectory, an event a line, then how it ended.
func cmdTrace(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		follow := fs.Bool("f", false, "follow the attempt live until it ends")
		allTries := fs.Bool("all-tries", false, "also show the events of earlier tries (superseded: their sandbox was lost and the attempt restarted)")
		logs := fs.Bool("logs", false, "print what the environment (and a brought agent) wrote instead: its stderr, and an agent's stdout and stderr; then the worker's lines about the attempt")
		return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) (err error) {
			if pos[0], err = c.resolveID(ctx, "trace", pos[0]); err != nil {
				return err
			}
			if *logs {
				if asJSON || *follow {
					return usagef("--logs prints the logs as text, as they are now")
				}
				return c.printEnvLogs(ctx, pos[0], stdout)
			}
			if asJSON {
				if *follow {
					return usagef("--json prints the trajectory as it is now; -f follows it as text")
				}
				return showTraceJSON(ctx, c, pos[0], *allTries, stdout)
			}
			return c.showTrace(ctx, pos[0], *follow, *allTries, stdout)
		})(fs)
	}
}

// traceEvents is the answer of GET /v2/trace/{id}/events.
type traceEvents struct {
	Events    []eventRow `json:"events"`
	LatestSeq int        `json:"latest_seq"`
	Status    string     `json:"status"`
	Reward    *float64   `json:"reward"`
}

// eventRow is one event of a trace as the CLI prints it, with the images it carries.
type eventRow struct {
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
}

// ended says whether the trace has reached a status it never leaves.
func (ev traceEvents) ended() bool {
	return ev.Status == "completed" || ev.Status == "error" || ev.Status == "cancelled"
}

// showTrace prints a trace's events (with earlier tries' when allTries), and, when follow, the
// new ones every 500 ms until the trace ends; then how it ended.
func (c *apiClient) showTrace(ctx context.Context, traceID string, follow, allTries bool, stdout io.Writer) error {
	since := -1
	for {
		var ev traceEvents
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/trace/%s/events?since_seq=%d&include_superseded=%v", url.PathEscape(traceID), since, allTries), nil, &ev); err != nil {
			return err
		}
		for _, e := range ev.Events {
			printEvent(stdout, e)
			since = e.Seq
		}
		if !follow || ev.ended() {
			c.printTraceEnd(ctx, traceID, ev, allTries, stdout)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// printEvent prints an event's line, marked when a later try superseded it, and a line per image.
func printEvent(stdout io.Writer, e eventRow) {
	mark := ""
	if e.Superseded {
		mark = fmt.Sprintf(" [try %d, superseded]", e.Attempt)
	}
	fmt.Fprintf(stdout, "%4d  %-17s %s%s\n", e.Seq, e.Kind, describeEvent(e.Kind, e.Text, e.Data), mark)
	var d models.AssistantEventData
	if e.Kind == models.EventAssistant && json.Unmarshal(e.Data, &d) == nil && d.Sent != nil {
		fmt.Fprintf(stdout, "      %-17s %s\n", "sent", describeSent(d.Sent))
	}
	for _, im := range e.Images {
		fmt.Fprintf(stdout, "      %-17s %s, %d bytes: %s\n", "image", im.MIMEType, im.Size, cmp.Or(im.URL, "(not kept)"))
	}
}

// printTraceEnd prints how a trace ended (or stands): its status, stop reason, reward and error,
// the build that ran it, and where the events of earlier tries are. Best effort: the events were
// read, and the rest is a footnote.
func (c *apiClient) printTraceEnd(ctx context.Context, traceID string, ev traceEvents, allTries bool, stdout io.Writer) {
	var tr struct {
		StopReason string `json:"stop_reason"`
		Error      string `json:"error"`
		Attempt    int    `json:"attempt"`
	}
	c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(traceID), nil, &tr) //nolint:errcheck // the events were read: the rest is a footnote
	reward := fmtReward(ev.Reward)
	fmt.Fprintf(stdout, "\nstatus %s · stop %s · reward %s", ev.Status, orDash(tr.StopReason), reward)
	if tr.Error != "" {
		fmt.Fprintf(stdout, " · error: %s", tr.Error)
	}
	fmt.Fprintln(stdout)
	c.printTraceSpend(ctx, traceID, ev, stdout)
	c.printTraceBuild(ctx, traceID, stdout)
	if tr.Attempt > 1 && !allTries {
		fmt.Fprintf(stdout, "this is try %d of the attempt: the %d before lost their sandbox, and their events are superseded; see them with: proctor trace %s --all-tries\n",
			tr.Attempt, tr.Attempt-1, traceID)
	}
}

// printTraceSpend prints what a trace's model calls used (the tokens of the events read, the
// live try's) and what the attempt cost (GET /v2/trace/{id}/usage); nothing it cannot read.
func (c *apiClient) printTraceSpend(ctx context.Context, traceID string, ev traceEvents, stdout io.Writer) {
	var in, out, calls int
	for _, e := range ev.Events {
		var d models.AssistantEventData
		if e.Kind != models.EventAssistant || e.Superseded || json.Unmarshal(e.Data, &d) != nil {
			continue
		}
		in, out, calls = in+d.Usage.InputTokens, out+d.Usage.OutputTokens, calls+1
	}
	var u httpapi.TraceUsage
	if err := c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(traceID)+"/usage", nil, &u); err != nil {
		if calls > 0 {
			fmt.Fprintf(stdout, "%d model calls · %d tokens in, %d out\n", calls, in, out)
		}
		return
	}
	fmt.Fprintf(stdout, "%d model calls · %d tokens in, %d out · cost $%.4f (models $%.4f, environment $%.4f)\n",
		calls, in, out, u.InferenceCost+u.EnvironmentCost, u.InferenceCost, u.EnvironmentCost)
}

// printTraceBuild says which build of its environment ran a trace (after a redeploy, the
// question a failure raises first), and which build of a brought agent, if one ran it. Nothing
// when the API cannot say.
func (c *apiClient) printTraceBuild(ctx context.Context, traceID string, stdout io.Writer) {
	var info struct {
		Environment *struct {
			Name         string  `json:"name"`
			BuildVersion *int    `json:"build_version"`
			BuildDigest  *string `json:"build_digest"`
		} `json:"environment"`
		Agent *httpapi.AgentBuild `json:"agent"`
	}
	if c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(traceID)+"/info", nil, &info) != nil {
		return
	}
	if e := info.Environment; e != nil && e.BuildVersion != nil {
		fmt.Fprintf(stdout, "environment %s, build %d", e.Name, *e.BuildVersion)
		if d := e.BuildDigest; d != nil {
			fmt.Fprintf(stdout, " (%s)", *d)
		}
		fmt.Fprintln(stdout)
	}
	if a := info.Agent; a != nil {
		fmt.Fprintf(stdout, "agent %s, build %d (%s): its output: proctor trace %s --logs\n", a.Name, a.Version, a.Digest, traceID)
	}
}

// printEnvLogs prints every line a trace's environment and brought agent wrote, in order, with
// the stream of each (stderr; agent:stdout, agent:stderr), then the worker's own lines about the
// attempt (its tries, where a brought agent ran and why it stopped), as stream worker.
func (c *apiClient) printEnvLogs(ctx context.Context, traceID string, stdout io.Writer) error {
	if err := c.printStreams(ctx, traceID, stdout); err != nil {
		return err
	}
	var worker struct {
		Logs string `json:"logs"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/trace/"+url.PathEscape(traceID)+"/logs", nil, &worker); err != nil {
		return err
	}
	for line := range strings.Lines(worker.Logs) {
		if line = strings.TrimRight(line, "\n"); line != "" {
			fmt.Fprintf(stdout, "%-12s %s\n", "worker", line)
		}
	}
	return nil
}

// printStreams prints the environment's and a brought agent's lines (GET …/env-logs), page by page.
func (c *apiClient) printStreams(ctx context.Context, traceID string, stdout io.Writer) error {
	for after := -1; ; {
		var page struct {
			Logs    []httpapi.EnvLogLine `json:"logs"`
			HasMore bool                 `json:"has_more"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/trace/%s/env-logs?after_seq=%d&limit=5000", url.PathEscape(traceID), after), nil, &page); err != nil {
			return err
		}
		for _, l := range page.Logs {
			fmt.Fprintf(stdout, "%-12s %s\n", l.Stream, l.Log)
			after = l.Seq
		}
		if !page.HasMore || len(page.Logs) == 0 {
			return nil
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
	case models.EventToolResult:
		var d models.ToolResultEventData
		if json.Unmarshal(data, &d) == nil && d.Refused {
			return "refused: " + text
		}
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

// describeSent is a line about what a brought agent sent the model in a call: how many messages
// of its previous request it repeated, then each new one (its role and text), and its tools when
// they changed.
func describeSent(s *models.SentRequest) string {
	var parts []string
	if s.Kept > 0 {
		parts = append(parts, fmt.Sprintf("%d kept", s.Kept))
	}
	for _, m := range s.Messages {
		p := m.Role
		if m.ToolCallID != "" {
			p += " " + m.ToolCallID
		}
		if m.Content != "" {
			p += fmt.Sprintf(" %q", oneLine(m.Content, 60))
		}
		if len(m.ToolCalls) > 0 {
			p += fmt.Sprintf(" (%d tool call(s))", len(m.ToolCalls))
		}
		if len(m.Images) > 0 {
			p += fmt.Sprintf(" [%d image(s)]", len(m.Images))
		}
		parts = append(parts, p)
	}
	if s.Tools != nil {
		parts = append(parts, fmt.Sprintf("%d tool(s) offered", len(*s.Tools)))
	}
	return oneLine(strings.Join(parts, " · "), 400)
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
		return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) error {
			out := stdout
			if asJSON {
				out = io.Discard // the table and hints; the JSON is printed at the end
			}
			jobID, err := c.jobOrNewest(ctx, *job, out)
			if err != nil {
				return err
			}
			rows, total, err := c.jobTraces(ctx, jobID, statusSet(*status), *limit)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(stdout, struct {
					JobID string            `json:"job_id"`
					Total int               `json:"total"`
					Items []startedTraceRow `json:"items"`
				}{jobID, total, rows})
			}
			printTraceRows(stdout, rows)
			fmt.Fprintf(stdout, "%d shown of %d attempts; see one with: proctor trace TRACE_ID\n", len(rows), total)
			return nil
		})(fs)
	}
}

// startedTraceRow is a trace as `proctor traces` lists it.
type startedTraceRow struct {
	traceListRow
	StartTime *time.Time `json:"start_time"`
}

// jobOrNewest resolves job (an id or its start), or, when it is empty, names the team's newest
// job on out.
func (c *apiClient) jobOrNewest(ctx context.Context, job string, out io.Writer) (string, error) {
	if job != "" {
		return c.resolveID(ctx, "job", job)
	}
	var page struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/jobs?limit=1", nil, &page); err != nil {
		return "", err
	}
	if len(page.Items) == 0 {
		return "", errors.New("your team has no jobs yet: run one with proctor eval TASKSET --model MODEL")
	}
	fmt.Fprintf(out, "job %s %q (your newest)\n", page.Items[0].ID, page.Items[0].Name)
	return page.Items[0].ID, nil
}

// statusSet is the set of a comma-separated list of statuses (empty: any status).
func statusSet(list string) map[string]bool {
	want := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			want[s] = true
		}
	}
	return want
}

// jobTraces reads a job's traces 500 a page until limit of them have a status in want (any,
// when want is empty), and says how many the job has.
func (c *apiClient) jobTraces(ctx context.Context, jobID string, want map[string]bool, limit int) (rows []startedTraceRow, total int, err error) {
	rows = []startedTraceRow{}
	seen := 0
	for off := 0; len(rows) < limit; off += 500 {
		var page struct {
			Items []startedTraceRow `json:"items"`
			Total int               `json:"total"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs/%s/traces?limit=500&offset=%d", url.PathEscape(jobID), off), nil, &page); err != nil {
			return nil, 0, err
		}
		total = page.Total
		for _, t := range page.Items {
			seen++
			if (len(want) == 0 || want[t.Status]) && len(rows) < limit {
				rows = append(rows, t)
			}
		}
		if len(page.Items) == 0 || seen >= page.Total {
			break
		}
	}
	return rows, total, nil
}

// printTraceRows prints traces as a table.
func printTraceRows(stdout io.Writer, rows []startedTraceRow) {
	tw := newTable(stdout, "TRACE", "TASK", "STATUS", "STOP", "REWARD", "STARTED")
	for _, t := range rows {
		reward, started := fmtReward(t.Reward), "–"
		if t.StartTime != nil {
			started = t.StartTime.Local().Format("2006-01-02 15:04:05")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, orDash(t.Name), t.Status, orDash(t.StopReason), reward, started)
	}
	tw.Flush()
}
