package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"

	"github.com/proctorhq/proctor/httpapi"
)

// printJobTable prints one row per task: attempts, how they ended and the mean reward; then the
// job's totals, its cost, and where to look next.
func (c *apiClient) printJobTable(ctx context.Context, w io.Writer, jobID string, s jobSummary) error {
	traces, err := allItems[traceListRow](ctx, c, "/v2/jobs/"+jobID+"/traces")
	if err != nil {
		return err
	}
	byTask, names := tallyByTask(traces)
	var mix httpapi.JobMix
	if err := c.do(ctx, http.MethodGet, "/v2/jobs/"+url.PathEscape(jobID)+"/mix", nil, &mix); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if len(mix.Entrants) > 1 {
		// A comparison: each (agent, model) pair's own results, never pooled.
		printEntrants(w, mix.Entrants)
	} else {
		tw := newTable(w, "TASK", "ATTEMPTS", "COMPLETED", "ERRORS", "CANCELLED", "MEAN REWARD")
		for _, n := range names {
			a := byTask[n]
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", n, a.n, a.completed, a.errors, a.cancelled, a.meanReward())
		}
		tw.Flush()
	}
	reward := fmtReward(s.AvgReward)
	fmt.Fprintf(w, "\n%d attempts: %d completed, %d errors, %d cancelled · mean reward %s\n", s.TotalTraces, s.Completed, s.Error, s.Cancelled, reward)
	if err := c.printJobCost(ctx, w, jobID); err != nil {
		return err
	}
	for _, n := range names {
		if byTask[n].example != "" {
			fmt.Fprintf(w, "an error of %s: proctor trace %s\n", n, byTask[n].example)
			break
		}
	}
	fmt.Fprintf(w, "per-task results and the attempts to look at: proctor jobs show %s\n", jobID)
	return nil
}

// printEntrants prints a job's results per (agent, model) pair: a row of the pair's totals
// (task "all"), then one per task.
func printEntrants(w io.Writer, entrants []httpapi.Entrant) {
	tw := newTable(w, "AGENT", "MODEL", "TASK", "ATTEMPTS", "SCORED", "MEAN REWARD")
	for _, e := range entrants {
		agent := "built-in loop"
		if e.Agent != nil {
			agent = fmt.Sprintf("%s:%d", e.Agent.Name, e.Agent.Version)
		}
		model := orDash(e.ModelName)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", agent, model, "all", e.Attempts, e.Scored, fmtReward(e.MeanReward))
		for _, t := range e.Tasks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", agent, model, t.TaskName, t.Attempts, t.Scored, fmtReward(t.MeanReward))
		}
	}
	tw.Flush()
}

// taskTally is how a task's attempts ended: counts by status, the rewards of the valid completed
// ones, and an attempt that ended in error, to look at.
type taskTally struct {
	n, completed, errors, cancelled int
	sum                             float64
	graded                          int
	example                         string
}

// meanReward is the mean reward of the graded attempts, or – when none was graded.
func (a *taskTally) meanReward() string {
	if a.graded == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f", a.sum/float64(a.graded))
}

// tallyByTask tallies traces by task name, and lists the names in order.
func tallyByTask(traces []traceListRow) (map[string]*taskTally, []string) {
	byTask := map[string]*taskTally{}
	for _, t := range traces {
		a := byTask[t.Name]
		if a == nil {
			a = &taskTally{}
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
	return byTask, names
}

// printJobCost prints what a job cost: inference (and how many model calls) and environments.
func (c *apiClient) printJobCost(ctx context.Context, w io.Writer, jobID string) error {
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
	return nil
}
