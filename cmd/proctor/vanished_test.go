package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/testenv"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/workflows/names"
)

// TestAnAttemptTerminatedOutsideProctorEnds terminates, through Temporal's own API, the Rollout
// of a running attempt of a job (watched by its RunList) and of a single run (watched by no
// workflow): each ends error ("terminated outside Proctor"), its instance ends priced to that
// moment, its sandbox's processes are stopped by the host, and both jobs end. On one store: the
// writes that end it (FinishTrace, the instances' end) run on both in the store suites.
func TestAnAttemptTerminatedOutsideProctorEnds(t *testing.T) {
	oneStore(t, "sqlite", testTerminatedOutside)
}

func testTerminatedOutside(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey}
	// Slow enough that the attempts are mid-way when terminated, and stay so while the test acts.
	srv, _ := scriptedOpenAI(t, twoTodoCalls, 3*time.Second)
	slow := addScriptedModel(t, c, dataDir, storeArgs, "slow", srv.URL)
	task := c.addTwoTodosTask("terminated")
	tc, err := ptemporal.Dial(t.Context(), dev.info.TemporalAddress, "default", slog.New(slog.DiscardHandler), devKeys(t, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	var job struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{task}, "model_ids": []string{slow},
		"group_size": 2, "max_concurrent": 2}, &job)
	var single struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": task, "model_id": slow}, &single); code != 201 {
		t.Fatalf("run = %d", code)
	}
	// Each is terminated once it runs (the host may run the two jobs' attempts one after another).
	terminated := map[string]bool{}
	victim := ""
	testenv.Wait(t, "attempts running, to terminate", testenv.StallWindow, func() (bool, string) {
		var st traceRow
		c.call("GET", "/v2/trace/"+single.TraceID, nil, &st)
		running := []string{}
		if st.Status == "running" {
			running = append(running, single.TraceID)
		}
		seen := []string{}
		for _, tr := range c.traces(job.JobID) {
			seen = append(seen, tr.Status)
			if tr.Status == "running" && victim == "" {
				victim = tr.ID
				running = append(running, tr.ID)
			}
		}
		for _, id := range running {
			if terminated[id] {
				continue
			}
			if err := tc.TerminateWorkflow(context.Background(), names.RolloutWorkflowID(uuid.MustParse(id)), "", "a hostile operator"); err != nil {
				t.Fatal(err)
			}
			terminated[id] = true
		}
		return terminated[single.TraceID] && victim != "", fmt.Sprintf("single %s, job %q, terminated %d", st.Status, seen, len(terminated))
	}, func() string { return c.describeLive(job.JobID) })

	sum := c.waitJob(job.JobID, nil)
	if sum.Completed != 1 || sum.Error != 1 {
		t.Errorf("the job ended %s, want one attempt completed and the terminated one error", sum)
	}
	c.waitJob(single.JobID, nil)
	for _, id := range []string{victim, single.TraceID} {
		var tr traceRow
		c.call("GET", "/v2/trace/"+id, nil, &tr)
		if tr.Status != "error" || !strings.Contains(tr.Error, "terminated outside Proctor") {
			t.Errorf("the terminated attempt %s reads %s %q, want error, terminated outside Proctor", id, tr.Status, tr.Error)
		}
		var usage struct {
			EnvironmentID string `json:"environment_id"`
		}
		c.call("GET", "/v2/trace/"+id+"/usage", nil, &usage)
		var l instanceList
		c.call("GET", "/v2/instance?include_terminated=true&limit=500&registry_id="+usage.EnvironmentID, nil, &l)
		found := false
		for _, in := range l.Instances {
			if in.TraceID != id {
				continue
			}
			found = true
			if in.Status != "terminated" || in.TerminatedAt == nil || in.StopReason == "" {
				t.Errorf("the terminated attempt's instance: %+v, want it ended", in)
			}
		}
		if !found {
			t.Errorf("no instance of the terminated attempt %s among %+v", id, l.Instances)
		}
	}
	// The host stops the sandboxes no workflow will come back to (every activities.SweepEvery).
	testenv.Wait(t, "the terminated attempts' sandboxes stopped", testenv.StallWindow, func() (bool, string) {
		p := envProcesses(dataDir)
		return p == "", p
	}, nil)
	var logs struct{ Logs string }
	c.call("GET", "/v2/trace/"+single.TraceID+"/logs", nil, &logs)
	if !strings.Contains(logs.Logs, "the attempt is over, and its sandbox") {
		t.Errorf("the single run's log does not say its sandbox was stopped by the host:\n%s", logs.Logs)
	}
}
