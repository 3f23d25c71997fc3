package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/proctorhq/proctor/httpapi"
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

// cmdJobs lists the team's jobs, newest first, each with its summary.
func cmdJobs(stdout io.Writer) flagsBody {
	return listCommand[jobRow]{
		path: "/v2/jobs", limit: 20, limitUsage: "at most this many, newest first",
		columns: []string{"ID", "NAME", "STATUS", "ATTEMPTS", "ERRORS", "MEAN REWARD", "CREATED"},
		row: func(j jobRow) []any {
			s := j.Summary
			return []any{j.ID, orDash(j.Name), j.Status, fmt.Sprintf("%d/%d", s.done(), s.TotalTraces), s.Error, fmtReward(s.AvgReward),
				j.CreatedAt.Local().Format("2006-01-02 15:04")}
		},
		complete: func(ctx context.Context, c *apiClient, j *jobRow) error {
			return c.do(ctx, http.MethodGet, "/v2/jobs/"+j.ID+"/summary", nil, &j.Summary)
		},
	}.body(stdout)
}

// jobRow is a job as `proctor jobs` lists it: the list route's fields and the job's summary.
type jobRow struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Status    string     `json:"status"`
	CreatedAt time.Time  `json:"created_at"`
	Summary   jobSummary `json:"summary"`
}

// cmdJobsShow prints a job: its summary, per-task results and the attempts to look at.
func cmdJobsShow(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		limit := fs.Int("limit", 20, "attempts listed per category")
		return jsonClientCommand(func(ctx context.Context, c *apiClient, pos []string, asJSON bool) (err error) {
			if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
				return err
			}
			if asJSON {
				return showJobJSON(ctx, c, pos[0], stdout)
			}
			return showJob(ctx, c, pos[0], *limit, stdout)
		})(fs)
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

// cmdJobsResume goes on with a job paused at its max_cost_usd: a higher ceiling, or none.
func cmdJobsResume(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		ceiling := fs.Float64("max-cost-usd", 0, "the new ceiling in USD, above what the job has spent")
		lift := fs.Bool("lift-ceiling", false, "go on with no ceiling at all")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			if (*ceiling > 0) == *lift || *ceiling < 0 {
				return usagef("give a new ceiling above what the job has spent (--max-cost-usd N), or --lift-ceiling")
			}
			if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
				return err
			}
			body := map[string]any{"lift_ceiling": *lift}
			if *ceiling > 0 {
				body = map[string]any{"max_cost_usd": *ceiling}
			}
			var res httpapi.Resumed
			if err := c.do(ctx, http.MethodPost, "/v2/jobs/"+pos[0]+"/resume", body, &res); err != nil {
				return err
			}
			limit := "no ceiling"
			if res.MaxCostUSD != nil {
				limit = fmt.Sprintf("ceiling $%.4g", *res.MaxCostUSD)
			}
			fmt.Fprintf(stdout, "job %s: %s; spent $%.4g, %s; the attempts that never started run now\nfollow it to the end with: proctor jobs watch %s\n",
				pos[0], res.Status, res.SpentUSD, limit, pos[0])
			return nil
		})(fs)
	}
}

// cmdJobsRetry runs a run_list job's failed attempts again in the job: those the infrastructure
// failed (no reward), or with --errors all every one that ended in error; never a completed one.
func cmdJobsRetry(stdout io.Writer) flagsBody {
	return func(fs *flag.FlagSet) runFunc {
		which := fs.String("errors", "infra", "which failed attempts: infra (ended in error with no reward: the infrastructure failed; and those a budget stopped) or all (any error, and those)")
		ceiling := fs.Float64("max-cost-usd", 0, "a new ceiling for a job launched with one, which the retries are held to; 0: the job's own")
		return clientCommand(func(ctx context.Context, c *apiClient, pos []string) (err error) {
			if *which != "infra" && *which != "all" {
				return usagef("--errors %s: infra or all", *which)
			}
			if pos[0], err = c.resolveID(ctx, "job", pos[0]); err != nil {
				return err
			}
			var res struct {
				Retried []struct {
					Replaced string `json:"replaced"`
					TraceID  string `json:"trace_id"`
				} `json:"retried"`
			}
			body := map[string]any{"errors": *which}
			if *ceiling > 0 {
				body["max_cost_usd"] = *ceiling
			}
			if err := c.do(ctx, http.MethodPost, "/v2/jobs/"+pos[0]+"/retry", body, &res); err != nil {
				return err
			}
			if len(res.Retried) == 0 {
				fmt.Fprintf(stdout, "job %s: no attempt to retry (--errors %s; each failed attempt is retried once, a completed one never)\n", pos[0], *which)
				return nil
			}
			for _, r := range res.Retried {
				fmt.Fprintf(stdout, "%s\tretries %s\n", r.TraceID, r.Replaced)
			}
			fmt.Fprintf(stdout, "job %s: %d attempts running again (the ones they replace no longer count)\nfollow it to the end with: proctor jobs watch %s\n",
				pos[0], len(res.Retried), pos[0])
			return nil
		})(fs)
	}
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
	if err := printJobMix(ctx, c, job.ID, stdout); err != nil {
		return err
	}
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
	tw := newTable(stdout, "TASK", "ATTEMPTS", "INVALID", "STATUSES", "MEAN REWARD")
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
	if s.Error > 0 {
		traces, err := allItems[traceListRow](ctx, c, "/v2/jobs/"+job.ID+"/traces")
		if err != nil {
			return err
		}
		printErrorGroups(stdout, traces)
	}
	fmt.Fprintln(stdout, "\nsee an attempt with: proctor trace TRACE_ID")
	return nil
}

// printErrorGroups prints why a job's attempts ended in error: each distinct message once,
// most frequent first, with how many attempts ended so and one of them.
func printErrorGroups(w io.Writer, traces []traceListRow) {
	type group struct {
		message, example string
		n                int
	}
	var groups []*group
	byMessage := map[string]*group{}
	for _, t := range traces {
		if t.Status != "error" {
			continue
		}
		msg := cmp.Or(strings.TrimSpace(t.Error), "(no message)")
		g := byMessage[msg]
		if g == nil {
			g = &group{message: msg, example: t.ID}
			byMessage[msg] = g
			groups = append(groups, g)
		}
		g.n++
	}
	if len(groups) == 0 {
		return
	}
	slices.SortStableFunc(groups, func(a, b *group) int { return b.n - a.n })
	fmt.Fprintf(w, "\nerrors, by message:\n")
	for _, g := range groups {
		fmt.Fprintf(w, "  %d × %s\n      e.g. proctor trace %s\n", g.n, strings.ReplaceAll(g.message, "\n", "\n      "), g.example)
	}
}

// printJobMix prints a job's results per (agent, model) pair when it ran a brought agent or
// compared several, and warns when its results mix builds of an environment or versions of a
// task, with how each did (GET /v2/jobs/{id}/mix); it prints nothing for a job that does neither.
func printJobMix(ctx context.Context, c *apiClient, jobID string, stdout io.Writer) error {
	var mix httpapi.JobMix
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID)+"/mix", nil, &mix); err != nil {
		return err
	}
	if len(mix.Entrants) > 1 || len(mix.Entrants) == 1 && mix.Entrants[0].Agent != nil {
		fmt.Fprintln(stdout, "\nby agent and model:")
		printEntrants(stdout, mix.Entrants)
		fmt.Fprintln(stdout)
	}
	if !mix.Mixed {
		return nil
	}
	fmt.Fprintln(stdout, "warning: these results mix what is not comparable (proctor compare pairs by build and version):")
	var ran []httpapi.BuildShare
	for _, b := range mix.Builds {
		if b.Digest != "" {
			ran = append(ran, b)
		}
	}
	if len(ran) > 1 {
		for _, b := range ran {
			fmt.Fprintf(stdout, "  %s build %d (%s): %d attempts, mean reward %s\n", b.Environment, b.Version, shortDigest(b.Digest), b.Attempts, fmtReward(b.MeanReward))
		}
	}
	for _, t := range mix.MixedVersions {
		for _, v := range t.Versions {
			fmt.Fprintf(stdout, "  task %s version %d: %d attempts, mean reward %s\n", t.TaskName, v.Version, v.Attempts, fmtReward(v.MeanReward))
		}
	}
	return nil
}

// shortDigest is an image digest cut to its algorithm and 12 hex digits.
func shortDigest(d string) string {
	algo, hex, ok := strings.Cut(d, ":")
	if !ok || len(hex) <= 12 {
		return d
	}
	return algo + ":" + hex[:12] + "…"
}
