package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"text/tabwriter"
)

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
