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
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/proctorhq/proctor/models"
)

type jobSummary struct {
	AvgReward    *float64 `json:"avg_reward"`
	Pending      int      `json:"pending"`
	Initializing int      `json:"initializing"`
	Running      int      `json:"running"`
	Completed    int      `json:"completed"`
	Error        int      `json:"error"`
	Cancelling   int      `json:"cancelling"`
	Cancelled    int      `json:"cancelled"`
	TotalTraces  int      `json:"total_traces"`
}

func (s jobSummary) done() int { return s.Completed + s.Error + s.Cancelled }

func cmdEval(stdout, stderr io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		model := fs.String("model", "", "model to run (a model_name, e.g. oracle)")
		groupSize := fs.Int("group-size", 1, "attempts per task")
		maxConcurrent := fs.Int("max-concurrent", 10, "attempts live at once")
		maxSteps := fs.Int("max-steps", 30, "model steps per attempt")
		name := fs.String("name", "", "job name (default: <taskset> × <model>)")
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			if *model == "" {
				return usagef("--model is required: proctor eval TASKSET --model MODEL (see proctor models)")
			}
			c, err := client()
			if err != nil {
				return err
			}
			tasksetID, err := c.tasksetByName(ctx, pos[0])
			if err != nil {
				return err
			}
			var m struct {
				ID        string `json:"id"`
				ModelName string `json:"model_name"`
			}
			if err := c.do(ctx, http.MethodGet, "/v2/models/resolve?model="+url.QueryEscape(*model), nil, &m); err != nil {
				var ae *apiError
				if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
					names := []string{}
					if ms, lerr := c.models(ctx); lerr == nil {
						for _, x := range ms {
							names = append(names, x.ModelName)
						}
					}
					return fmt.Errorf("no model %q; you can run: %s (see proctor models)", *model, strings.Join(names, ", "))
				}
				return fmt.Errorf("model %s: %w", *model, err)
			}
			if *name == "" {
				*name = pos[0] + " × " + m.ModelName
			}
			var launched struct {
				JobID    string `json:"job_id"`
				Accepted int    `json:"accepted"`
				Rejected int    `json:"rejected"`
			}
			body := map[string]any{"taskset_id": tasksetID, "model_ids": []string{m.ID}, "group_size": *groupSize,
				"max_concurrent": *maxConcurrent, "max_steps": *maxSteps, "name": *name}
			if err := c.do(ctx, http.MethodPost, "/v2/rollouts/run_list", body, &launched); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "job %s: %s, %d attempts per task\n", launched.JobID, *name, *groupSize)
			c.printBuilds(ctx, launched.JobID, stdout)
			if note := c.capacityNote(ctx, min(*maxConcurrent, launched.Accepted**groupSize), *maxConcurrent); note != "" {
				fmt.Fprintln(stdout, note)
			}

			// Ctrl-C cancels the job rather than leaving it running unseen.
			sum, err := c.follow(ctx, launched.JobID, stderr)
			if errors.Is(err, context.Canceled) {
				fmt.Fprintln(stderr, "\ninterrupted: cancelling the job…")
				cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				var out struct{ Cancelled int }
				if err := c.do(cctx, http.MethodPost, "/v2/rollouts/cancel_job", map[string]any{"job_id": launched.JobID}, &out); err != nil {
					return err
				}
				return fmt.Errorf("job %s cancelled (%d live attempts stopped)", launched.JobID, out.Cancelled)
			}
			if err != nil {
				return err
			}
			return c.printJobTable(ctx, stdout, launched.JobID, sum)
		}
	}
}

// printBuilds says which build of each environment a job runs: the latest when it was launched
// (a task whose runtime_config names an image runs that one). After a redeploy, this is the line
// that says whether the fix is in. Best effort: a failed read prints nothing.
func (c *apiClient) printBuilds(ctx context.Context, jobID string, stdout io.Writer) {
	var links struct {
		Links []struct {
			Registry struct{ ID, Name string } `json:"registry"`
		} `json:"links"`
	}
	if c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID)+"/entity-links", nil, &links) != nil {
		return
	}
	seen := map[string]bool{}
	for _, l := range links.Links {
		if l.Registry.ID == "" || seen[l.Registry.ID] {
			continue
		}
		seen[l.Registry.ID] = true
		var reg struct {
			LatestBuild *deployBuild `json:"latest_build"`
		}
		if c.do(ctx, http.MethodGet, "/v2/registry/"+url.PathEscape(l.Registry.ID), nil, &reg) != nil || reg.LatestBuild == nil {
			continue
		}
		b := reg.LatestBuild
		fmt.Fprintf(stdout, "environment %s: build %d (%s)\n", l.Registry.Name, b.Version, cmp.Or(b.Digest, b.ImageName))
	}
}

// capacityNote says why a job will run fewer than live attempts at once: the live workers run
// fewer sandboxes (or none). Empty when they run enough, or when the API cannot say.
func (c *apiClient) capacityNote(ctx context.Context, live, maxConcurrent int) string {
	w, err := c.workers(ctx)
	if err != nil {
		return ""
	}
	hosts := 0
	for _, q := range w.Queues {
		if q.SandboxCapacity > 0 {
			hosts += q.Workers
		}
	}
	switch {
	case w.SandboxCapacity == 0:
		return "note: no live worker runs sandboxes: the attempts wait until one polls their queue (proctor worker --queues sandboxes-cpu)"
	case live > w.SandboxCapacity:
		return fmt.Sprintf("note: at most %d attempts run at once, not %d (--max-concurrent %d): the live workers run %d sandboxes at once (%s); "+
			"the others wait for a free one. Raise it with --max-sandboxes on the workers, or add workers (see proctor workers)",
			w.SandboxCapacity, live, maxConcurrent, w.SandboxCapacity, plural(hosts, "worker"))
	}
	return ""
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

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

type traceListRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	StopReason string   `json:"stop_reason"`
	Reward     *float64 `json:"reward"`
	Error      string   `json:"error"`
	IsValid    bool     `json:"is_valid"`
}

// printJobTable prints one row per task: attempts, how they ended and the mean reward.
func (c *apiClient) printJobTable(ctx context.Context, w io.Writer, jobID string, s jobSummary) error {
	var all []traceListRow
	for off := 0; ; off += 500 {
		var page struct {
			Items []traceListRow `json:"items"`
			Total int            `json:"total"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs/%s/traces?limit=500&offset=%d", jobID, off), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Items...)
		if len(all) >= page.Total || len(page.Items) == 0 {
			break
		}
	}
	type agg struct {
		n, completed, errors, cancelled int
		sum                             float64
		graded                          int
		example                         string
	}
	byTask := map[string]*agg{}
	for _, t := range all {
		a := byTask[t.Name]
		if a == nil {
			a = &agg{}
			byTask[t.Name] = a
		}
		a.n++
		switch t.Status {
		case "completed":
			a.completed++
		case "error":
			a.errors++
			if a.example == "" {
				a.example = t.ID
			}
		case "cancelled":
			a.cancelled++
		}
		if t.Reward != nil && t.Status == "completed" && t.IsValid {
			a.sum += *t.Reward
			a.graded++
		}
	}
	names := make([]string, 0, len(byTask))
	for n := range byTask {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nTASK\tATTEMPTS\tCOMPLETED\tERRORS\tCANCELLED\tMEAN REWARD")
	for _, n := range names {
		a := byTask[n]
		mean := "–"
		if a.graded > 0 {
			mean = fmt.Sprintf("%.3f", a.sum/float64(a.graded))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", n, a.n, a.completed, a.errors, a.cancelled, mean)
	}
	tw.Flush()
	reward := fmtReward(s.AvgReward)
	fmt.Fprintf(w, "\n%d attempts: %d completed, %d errors, %d cancelled · mean reward %s\n", s.TotalTraces, s.Completed, s.Error, s.Cancelled, reward)
	var usage struct {
		TotalCost     float64 `json:"total_cost"`
		InferenceCost struct {
			Cost  float64 `json:"cost"`
			Count int     `json:"count"`
		} `json:"inference_cost"`
		EnvironmentCost struct {
			Cost float64 `json:"cost"`
		} `json:"environment_cost"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+jobID+"/usage", nil, &usage); err != nil {
		return err
	}
	fmt.Fprintf(w, "cost $%.4f: inference $%.4f (%d model calls), environments $%.4f\n",
		usage.TotalCost, usage.InferenceCost.Cost, usage.InferenceCost.Count, usage.EnvironmentCost.Cost)
	for _, n := range names {
		if byTask[n].example != "" {
			fmt.Fprintf(w, "an error of %s: proctor trace %s\n", n, byTask[n].example)
			break
		}
	}
	fmt.Fprintf(w, "per-task results and the attempts to look at: proctor jobs show %s\n", jobID)
	return nil
}

func (c *apiClient) tasksetByName(ctx context.Context, name string) (string, error) {
	var page struct {
		Items []struct{ ID, Name string } `json:"items"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/tasksets?limit=500&search="+url.QueryEscape(name), nil, &page); err != nil {
		return "", err
	}
	for _, t := range page.Items {
		if t.Name == name {
			return t.ID, nil
		}
	}
	return "", fmt.Errorf("no taskset named %q (see `proctor tasksets list`)", name)
}

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

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len([]rune(s)) > n {
		return string([]rune(s)[:n]) + "…"
	}
	return s
}

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

// cmdJobsShow prints a job: its summary, per-task results and the attempts to look at.
func cmdJobsShow(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		limit := fs.Int("limit", 20, "attempts listed per category")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
				return err
			}
			if *asJSON {
				return showJobJSON(ctx, c, pos[0], stdout)
			}
			return showJob(ctx, c, pos[0], *limit, stdout)
		}
	}
}

// cmdJobsWatch follows a running job to its end (again), then prints its per-task table.
func cmdJobsWatch(stdout, stderr io.Writer) flagsBody {
	return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
		if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
			return err
		}
		sum, err := c.follow(ctx, pos[0], stderr)
		if err != nil {
			return err
		}
		return c.printJobTable(ctx, stdout, pos[0], sum)
	})
}

// cmdJobs lists the team's jobs, newest first.
func cmdJobs(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		limit := fs.Int("limit", 20, "at most this many, newest first")
		asJSON := jsonFlag(fs)
		client := clientFlags(fs)
		return func(ctx context.Context, pos []string) error {
			c, err := client()
			if err != nil {
				return err
			}
			type jobRow struct {
				ID        string     `json:"id"`
				Name      string     `json:"name"`
				Status    string     `json:"status"`
				CreatedAt time.Time  `json:"created_at"`
				Summary   jobSummary `json:"summary"`
			}
			var page struct {
				Items []jobRow `json:"items"`
				Total int      `json:"total"`
			}
			if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs?limit=%d", *limit), nil, &page); err != nil {
				return err
			}
			for i := range page.Items {
				if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+page.Items[i].ID+"/summary", nil, &page.Items[i].Summary); err != nil {
					return err
				}
			}
			if *asJSON {
				return writeJSON(stdout, page)
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tSTATUS\tATTEMPTS\tERRORS\tMEAN REWARD\tCREATED")
			for _, j := range page.Items {
				s := j.Summary
				reward := fmtReward(s.AvgReward)
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", j.ID, orDash(j.Name), j.Status, s.done(), s.TotalTraces, s.Error, reward, j.CreatedAt.Local().Format("2006-01-02 15:04"))
			}
			tw.Flush()
			if page.Total > len(page.Items) {
				fmt.Fprintf(stdout, "(%d of %d; --limit shows more)\n", len(page.Items), page.Total)
			}
			return nil
		}
	}
}

// cmdJobsCancel cancels every attempt of a job: those that never started at once, the live
// ones after their sandboxes are torn down.
func cmdJobsCancel(stdout io.Writer) flagsBody {
	return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
		if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
			return err
		}
		var res struct {
			Cancelled int `json:"cancelled"`
		}
		if err := c.do(ctx, http.MethodPost, "/v2/rollouts/cancel_job", map[string]string{"job_id": pos[0]}, &res); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "job %s: cancelling; %d live attempts asked to stop (attempts not started yet are cancelled at once)\n", pos[0], res.Cancelled)
		fmt.Fprintf(stdout, "follow it to the end with: proctor jobs watch %s\n", pos[0])
		return nil
	})
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

// showJobJSON prints a job, its summary and its taskset coverage (per task: attempts, statuses
// and mean reward) as the API answers them.
func showJobJSON(ctx context.Context, c *apiClient, jobID string, stdout io.Writer) error {
	var out struct {
		Job      json.RawMessage `json:"job"`
		Summary  json.RawMessage `json:"summary"`
		Coverage json.RawMessage `json:"coverage"`
	}
	for _, part := range []struct {
		path string
		into *json.RawMessage
	}{{"", &out.Job}, {"/summary", &out.Summary}, {"/taskset-coverage", &out.Coverage}} {
		if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID)+part.path, nil, part.into); err != nil {
			return err
		}
	}
	return writeJSON(stdout, out)
}

// showJob prints a job: its summary, its taskset coverage (per task: attempts, statuses and mean
// reward) and, per category other than successful, the first attempts to look at.
func showJob(ctx context.Context, c *apiClient, jobID string, limit int, stdout io.Writer) error {
	var job struct {
		ID, Name, Status string
		CreatedAt        time.Time `json:"created_at"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID), nil, &job); err != nil {
		return err
	}
	var s jobSummary
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+job.ID+"/summary", nil, &s); err != nil {
		return err
	}
	reward := fmtReward(s.AvgReward)
	fmt.Fprintf(stdout, "job %s %q: %s, %d/%d attempts done (%d completed, %d error, %d cancelled), mean reward %s\n",
		job.ID, job.Name, job.Status, s.done(), s.TotalTraces, s.Completed, s.Error, s.Cancelled, reward)
	var cov struct {
		TasksetName     string `json:"taskset_name"`
		TotalTasks      int    `json:"total_tasks"`
		TasksWithTraces int    `json:"tasks_with_traces"`
		Tasks           []struct {
			TaskName         string   `json:"task_name"`
			AvgReward        *float64 `json:"avg_reward"`
			TraceCount       int      `json:"trace_count"`
			InvalidatedCount int      `json:"invalidated_count"`
			Statuses         []string `json:"statuses"`
		} `json:"tasks"`
	}
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+job.ID+"/taskset-coverage", nil, &cov); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "taskset %s: %d of %d tasks run\n\n", orDash(cov.TasksetName), cov.TasksWithTraces, cov.TotalTasks)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tATTEMPTS\tINVALID\tSTATUSES\tMEAN REWARD")
	for _, t := range cov.Tasks {
		r := fmtReward(t.AvgReward)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", t.TaskName, t.TraceCount, t.InvalidatedCount, orDash(strings.Join(t.Statuses, ",")), r)
	}
	tw.Flush()
	for _, cat := range []string{"failed", "no_score", "live"} {
		var th struct {
			Thumbnails []struct {
				TraceID    string   `json:"id"`
				Status     string   `json:"status"`
				TaskName   *string  `json:"task_name"`
				Reward     *float64 `json:"reward"`
				StopReason string   `json:"stop_reason"`
			} `json:"thumbnails"`
			CategoryCounts map[string]int `json:"category_counts"`
		}
		if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/v2/jobs/%s/thumbnails?category=%s&limit=%d", job.ID, cat, max(1, min(limit, 500))), nil, &th); err != nil {
			return err
		}
		if len(th.Thumbnails) == 0 {
			continue
		}
		fmt.Fprintf(stdout, "\n%s (%d):\n", strings.ReplaceAll(cat, "_", " "), th.CategoryCounts[cat])
		for _, t := range th.Thumbnails {
			r := fmtReward(t.Reward)
			name := "–"
			if t.TaskName != nil {
				name = *t.TaskName
			}
			fmt.Fprintf(stdout, "  %s  %-24s %s %s reward %s\n", t.TraceID, name, t.Status, t.StopReason, r)
		}
	}
	fmt.Fprintln(stdout, "\nsee an attempt with: proctor trace TRACE_ID")
	return nil
}
