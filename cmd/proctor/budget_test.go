package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// A job launched with max_cost_usd pauses once its spend reaches it: it starts no attempt, its
// live attempts stop at their next model call (stop reason budget), and it stays paused through
// a restart of the whole platform. Raising the ceiling (PATCH) goes on until the new one is
// reached; proctor jobs resume --lift-ceiling finishes it. Nothing that ended runs again: the job
// keeps its six attempts, each run at most once, and every model call was made once.
func TestABudgetPausesAJobAndResumeFinishesItRunningNothingTwice(t *testing.T) {
	eachStore(t, testBudget)
}

func testBudget(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	srv, requests := scriptedOpenAI(t, twoTodoCalls, 100*time.Millisecond)
	// 10 prompt and 5 completion tokens a call: $0.02. An attempt makes three calls: $0.06.
	model := addScriptedModel(t, c, dataDir, storeArgs, "metered", srv.URL, "--input-cost-per-token", "0.001", "--output-cost-per-token", "0.002")
	const perCall, concurrent = 0.02, 2
	var launched struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{c.addTwoTodosTask("budget")}, "model_ids": []string{model},
		"group_size": 6, "max_concurrent": concurrent, "max_cost_usd": 0.1}, &launched)
	job := launched.JobID

	type jobView struct {
		Status     string   `json:"status"`
		MaxCostUSD *float64 `json:"max_cost_usd"`
	}
	spent := func() float64 {
		var u struct {
			TotalCost float64 `json:"total_cost"`
		}
		c.call("GET", "/v2/jobs/"+job+"/usage", nil, &u)
		return u.TotalCost
	}
	// paused waits for the job to read paused with none of its attempts live, and checks that it
	// stopped at its ceiling: at most one call per live attempt past it.
	paused := func(ceiling float64, attemptsLeft bool) summary {
		t.Helper()
		var s summary
		testenv.Wait(t, "job "+job+" paused", testenv.StallWindow, func() (bool, string) {
			var j jobView
			s = summary{}
			c.call("GET", "/v2/jobs/"+job, nil, &j)
			c.call("GET", "/v2/jobs/"+job+"/summary", nil, &s)
			return j.Status == "paused" && s.Initializing+s.Running+s.Cancelling == 0, j.Status + " " + s.String()
		}, func() string { return c.describeLive(job) })
		if got := spent(); got < ceiling-1e-9 || got > ceiling+concurrent*perCall+1e-9 || attemptsLeft && s.Pending == 0 {
			t.Fatalf("paused at $%g spent (ceiling $%g), summary %s: want the ceiling reached, at most one call per live attempt past it, attempts left", got, ceiling, s.String())
		}
		return s
	}
	// At most three of the six attempts can have started under $0.10.
	first := paused(0.1, true)
	ended := map[string]traceRow{}
	for _, tr := range c.traces(job) {
		if tr.Status != "pending" {
			ended[tr.ID] = tr
		}
	}

	// proctor jobs watch says why nothing runs, and how to go on.
	if out, err := c.cli("jobs", "watch", job); err == nil || !strings.Contains(err.Error(), "is paused") || !strings.Contains(err.Error(), "proctor jobs resume "+job) {
		t.Errorf("proctor jobs watch of a paused job: %v\n%s", err, out)
	}

	// Every process stops and starts again: the job is as it was.
	dev.stop(t)
	dev = startDev(t, dataDir, storeArgs...)
	c.base, c.key, c.temporal = dev.info.APIURL, dev.info.APIKey, dev.info.TemporalAddress
	var after jobView
	c.call("GET", "/v2/jobs/"+job, nil, &after)
	var again summary
	c.call("GET", "/v2/jobs/"+job+"/summary", nil, &again)
	if after.Status != "paused" || again.String() != first.String() {
		t.Fatalf("after a restart: %s %s, want paused %s", after.Status, again.String(), first.String())
	}
	// A paused job has not ended: it is active, and cancel_user_jobs would cancel it.
	var active []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	c.call("GET", "/v2/jobs/active", nil, &active)
	if len(active) != 1 || active[0].ID != job || active[0].Status != "paused" {
		t.Errorf("active jobs: %+v, want the paused one", active)
	}

	// Refusals: a ceiling at or below the spend keeps nothing paused from running; resume needs one.
	for _, tc := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"PATCH", "/v2/jobs/" + job, map[string]any{"max_cost_usd": 0.05}, 422},
		{"PATCH", "/v2/jobs/" + job, map[string]any{"max_cost_usd": -1}, 422},
		{"POST", "/v2/jobs/" + job + "/resume", map[string]any{}, 422},
		{"POST", "/v2/jobs/" + job + "/resume", map[string]any{"max_cost_usd": 1, "lift_ceiling": true}, 422},
		{"POST", "/v2/jobs/" + job + "/retry", map[string]any{}, 409},
	} {
		if code, body := c.raw(tc.method, tc.path, tc.body); code != tc.want {
			t.Errorf("%s %s %v = %d %s, want %d", tc.method, tc.path, tc.body, code, body, tc.want)
		}
	}
	if out, err := c.cli("jobs", "resume", job); err == nil || !strings.Contains(out+err.Error(), "--lift-ceiling") {
		t.Errorf("proctor jobs resume with no ceiling: %v\n%s", err, out)
	}

	// A higher ceiling goes on, and pauses again at it.
	var j jobView
	if code := c.call("PATCH", "/v2/jobs/"+job, map[string]any{"max_cost_usd": 0.2}, &j); code != 200 || j.Status != "running" || j.MaxCostUSD == nil || *j.MaxCostUSD != 0.2 {
		t.Fatalf("raise the ceiling: %d %+v", code, j)
	}
	paused(0.2, false)
	for _, tr := range c.traces(job) {
		if tr.Status != "pending" && ended[tr.ID].ID == "" {
			ended[tr.ID] = tr
		}
	}

	out, err := c.cli("jobs", "resume", job, "--lift-ceiling")
	if err != nil || !strings.Contains(out, "running") || !strings.Contains(out, "no ceiling") {
		t.Fatalf("proctor jobs resume --lift-ceiling: %v\n%s", err, out)
	}
	final := c.waitJob(job, nil)
	testenv.Wait(t, "job "+job+" completed", testenv.StallWindow, func() (bool, string) {
		c.call("GET", "/v2/jobs/"+job, nil, &j)
		return j.Status == "completed", j.Status
	}, nil)

	traces := c.traces(job)
	stopped, completed := 0, 0
	for _, tr := range traces {
		if was, ok := ended[tr.ID]; ok && (was.Status != tr.Status || fmtReward(was.Reward) != fmtReward(tr.Reward)) {
			t.Errorf("attempt %s ended %s before the resume and reads %s after it", tr.ID, was.Status, tr.Status)
		}
		switch {
		case tr.Status == "cancelled" && tr.StopReason == "budget" && tr.Reward == nil && strings.Contains(tr.Error, "max_cost_usd"):
			stopped++
		case tr.Status == "completed" && tr.Reward != nil && *tr.Reward == 1:
			completed++
		default:
			t.Errorf("attempt %+v: want completed at 1, or stopped by the budget", tr)
		}
	}
	if len(traces) != 6 || stopped+completed != 6 || completed < 2 || final.TotalTraces != 6 {
		t.Errorf("the job's attempts: %d (%d completed, %d stopped by the budget), summary %s", len(traces), completed, stopped, final.String())
	}
	// Each call was made once and billed once: three per completed attempt, and at most two for
	// a stopped one (it was refused its next call).
	calls := int(requests.Load())
	if got := spent(); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", float64(calls)*perCall) || calls < 3*completed || calls > 3*completed+2*stopped {
		t.Errorf("%d calls made, $%g billed; %d completed, %d stopped", calls, got, completed, stopped)
	}
}
