package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/testenv"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

// The engine's benchmarks, one per question the engine has to answer well. Each prints the ratio
// it exists for; run them all with `task bench` or one with
//
//	go test -run '^$' -bench Orchestration -benchtime 1x ./cmd/proctor/

const orchestrationAttempts, orchestrationConcurrency = 100, 8

// BenchmarkOrchestration runs 100 trivial attempts (the oracle on the todo example, one tool
// call) through the whole engine, 8 at a time, then the same number of workflows of a bare
// Temporal program on the same embedded server and store that runs as many no-op activities
// (and local activities) as a real attempt's history shows, 8 at a time. engine/bare is what the
// engine's orchestration costs on top of Temporal's own (goal ≥ 0.8). The same no-ops then run
// in an attempt's shape (see shapedTemporal): engine/shaped leaves out what Temporal charges for
// that shape (a parent's child, activities on a host's queue). It also reports the activities
// per attempt counted from that history, and launch → running at low load (one attempt at a
// time; goal p50 < 250 ms).
func BenchmarkOrchestration(b *testing.B) {
	for b.Loop() {
		dataDir := b.TempDir()
		dev := startDev(b, dataDir)
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
		versions := uploadAddTodos(c, "bench", []string{"buy milk"})

		start, cpu0, sandboxCPU0 := time.Now(), cpuTime(), childrenCPUTime()
		var launched struct {
			JobID string `json:"job_id"`
		}
		c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": versions, "model_ids": []string{oracle},
			"group_size": orchestrationAttempts, "max_concurrent": orchestrationConcurrency}, &launched)
		sum := c.waitJob(launched.JobID, nil)
		engine, engineCPU, sandboxCPU := time.Since(start), cpuTime()-cpu0, childrenCPUTime()-sandboxCPU0
		if sum.Completed != orchestrationAttempts || *sum.AvgReward != 1 {
			b.Fatalf("engine: %+v", sum)
		}

		tc, err := ptemporal.Dial(context.Background(), dev.info.TemporalAddress, "default", slog.New(slog.DiscardHandler), devKeys(b, dataDir))
		if err != nil {
			b.Fatal(err)
		}
		var engineIDs []string
		for _, tr := range c.traces(launched.JobID) {
			engineIDs = append(engineIDs, "rollout/"+tr.ID)
		}
		h := historyOf(b, tc, engineIDs[0])
		b.Logf("an attempt's history: %d events, %d activities, %d local activities, %d workflow tasks, %d model steps",
			h.events, h.activities, h.local, h.workflowTasks, h.modelSteps)
		et := meanHistory(b, tc, engineIDs)

		lat := launchToRunning(c, versions[0], oracle, 10)
		// The bare programs start no processes: a sandbox reaped while they run is not theirs.
		cpu0 = ownCPUTime()
		bare, bareIDs := bareTemporal(b, tc, h.activities, h.local)
		bareCPU := ownCPUTime() - cpu0
		bt := meanHistory(b, tc, bareIDs)
		cpu0 = ownCPUTime()
		shaped, shapedIDs := shapedTemporal(b, tc, h.offQueue, h.local)
		shapedCPU := ownCPUTime() - cpu0
		st := meanHistory(b, tc, shapedIDs)
		tc.Close()
		dev.stop(b)

		// Where an attempt's time goes, on average, in the engine and in the bare program.
		b.ReportMetric(ms(et.total), "engine_attempt_ms")
		b.ReportMetric(ms(et.wtWait), "engine_task_wait_ms")
		b.ReportMetric(ms(et.wtRun), "engine_task_run_ms")
		b.ReportMetric(ms(et.actRun), "engine_activity_run_ms")
		b.ReportMetric(ms(bt.total), "bare_workflow_ms")
		b.ReportMetric(ms(bt.wtWait), "bare_task_wait_ms")
		b.ReportMetric(ms(bt.wtRun), "bare_task_run_ms")
		b.ReportMetric(ms(bt.actRun), "bare_activity_run_ms")
		b.ReportMetric(ms(st.total), "shaped_workflow_ms")
		b.ReportMetric(float64(orchestrationAttempts)/engine.Seconds(), "engine_attempts/s")
		b.ReportMetric(float64(orchestrationAttempts)/bare.Seconds(), "bare_workflows/s")
		b.ReportMetric(bare.Seconds()/engine.Seconds(), "engine/bare")
		b.ReportMetric(float64(orchestrationAttempts)/shaped.Seconds(), "shaped_workflows/s")
		b.ReportMetric(shaped.Seconds()/engine.Seconds(), "engine/shaped")
		// CPU of this process (server, workers, client) and of the sandboxes it waited for.
		b.ReportMetric(ms(engineCPU)/orchestrationAttempts, "engine_cpu_ms/attempt")
		b.ReportMetric(ms(sandboxCPU)/orchestrationAttempts, "engine_sandbox_cpu_ms/attempt")
		b.ReportMetric(ms(bareCPU)/orchestrationAttempts, "bare_cpu_ms/workflow")
		b.ReportMetric(engineCPU.Seconds()/bareCPU.Seconds(), "cpu_engine/bare")
		b.ReportMetric(ms(shapedCPU)/orchestrationAttempts, "shaped_cpu_ms/workflow")
		b.ReportMetric(engineCPU.Seconds()/shapedCPU.Seconds(), "cpu_engine/shaped")
		b.ReportMetric(float64(h.activities), "activities/attempt")
		b.ReportMetric(float64(3+2*h.modelSteps), "activity_budget(3+2N)")
		b.ReportMetric(float64(h.events), "history_events/attempt")
		b.ReportMetric(median(lat), "launch_to_running_p50_ms")
	}
}

// BenchmarkRealisticAttempt is what a user feels: an attempt of 10 model steps, each answered
// by a scripted OpenAI-compatible server after 500 ms, in the real todo environment, through the
// engine (launch → completed, one at a time) against the same loop as direct calls
// (agent.RunEpisode over the same sandbox provider and model adapter). Goal engine/direct ≤ 1.05.
func BenchmarkRealisticAttempt(b *testing.B) {
	const steps, runs = 10, 3
	titles, calls := todoSteps(steps)
	for b.Loop() {
		srv, _ := scriptedOpenAI(b, calls, 500*time.Millisecond)
		dataDir := b.TempDir()
		dev := startDev(b, dataDir)
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		dbURL := "sqlite:" + filepath.Join(dataDir, "proctor.db")
		if err := run(context.Background(), []string{"admin", "model", "add", "--name", "scripted", "--adapter", "openai", "--base-url", srv.URL + "/v1/",
			"--api-key-env", "SCRIPTED_KEY", "--database-url", dbURL}, io.Discard, io.Discard); err != nil {
			b.Fatal(err)
		}
		model := c.resolve("/v2/models/resolve?model=scripted", "id")
		versions := uploadAddTodos(c, "realistic", titles)
		var engine []float64
		for range runs {
			start := time.Now()
			id := launch(c, versions[0], model)
			if tr := waitTrace(c, id); tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
				b.Fatalf("engine attempt: %+v", tr)
			}
			engine = append(engine, time.Since(start).Seconds())
		}
		dev.stop(b)

		var direct []float64
		bin := testenv.Program(b, "examples/environments/todo")
		for range runs {
			start := time.Now()
			res := directAttempt(b, bin, titles, agent.OpenAIConfig{BaseURL: srv.URL + "/v1/", APIKey: "scripted-key", Model: "scripted"})
			if res.Reward != 1 || res.Steps != steps {
				b.Fatalf("direct attempt: reward %v after %d steps", res.Reward, res.Steps)
			}
			direct = append(direct, time.Since(start).Seconds())
		}
		b.ReportMetric(median(engine), "engine_s")
		b.ReportMetric(median(direct), "direct_s")
		b.ReportMetric(median(engine)/median(direct), "engine/direct")
	}
}

// todoSteps are the todos of an add-todos task solved in steps model steps (one add_todo call a
// step, then the answer), and the scripted model's calls that solve it.
func todoSteps(steps int) (titles []string, calls []map[string]any) {
	for i := range steps - 1 {
		titles = append(titles, fmt.Sprintf("todo %d", i))
		calls = append(calls, map[string]any{"name": "add_todo", "arguments": map[string]any{"title": titles[i]}})
	}
	return titles, calls
}

// uploadAddTodos uploads one add-todos task over items into a taskset, and returns its version ids.
func uploadAddTodos(c api, taskset string, items []string) []string {
	var validation []any
	for _, it := range items {
		validation = append(validation, map[string]any{"name": "add_todo", "arguments": map[string]any{"title": it}})
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": taskset, "tasks": []any{map[string]any{
		"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": items}, "validation": validation}}}, &up)
	if len(up.TaskVersionIDs) != 1 {
		c.t.Fatalf("upload: %+v", up)
	}
	return up.TaskVersionIDs
}

// launch starts a single attempt and returns its trace id.
func launch(c api, version, model string) string {
	var out struct {
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": version, "model_id": model}, &out); code != 201 {
		c.t.Fatalf("launch: %d", code)
	}
	return out.TraceID
}

type traceState struct {
	Status    string    `json:"status"`
	Error     string    `json:"error"`
	Reward    *float64  `json:"reward"`
	CreatedAt time.Time `json:"created_at"`
}

// waitTrace polls a trace until it ends.
func waitTrace(c api, id string) traceState {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var tr traceState
		c.call("GET", "/v2/trace/"+id, nil, &tr)
		if tr.Status == "completed" || tr.Status == "error" || tr.Status == "cancelled" || time.Now().After(deadline) {
			return tr
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// launchToRunning launches n attempts one after another and returns, for each, the time from the
// trace's creation to its first user message (written as the attempt turns running), in ms.
func launchToRunning(c api, version, model string, n int) []float64 {
	var lat []float64
	for range n {
		id := launch(c, version, model)
		tr := waitTrace(c, id)
		var ev struct {
			Events []struct {
				Kind      string    `json:"kind"`
				StartedAt time.Time `json:"started_at"`
			} `json:"events"`
		}
		c.call("GET", "/v2/trace/"+id+"/events", nil, &ev)
		for _, e := range ev.Events {
			if e.Kind == "user_message" {
				lat = append(lat, e.StartedAt.Sub(tr.CreatedAt).Seconds()*1000)
				break
			}
		}
	}
	return lat
}

// directAttempt runs one attempt as function calls: a sandbox, an MCP session and
// agent.RunEpisode with an OpenAI-compatible model.
func directAttempt(b *testing.B, bin string, items []string, model agent.OpenAIConfig) *agent.EpisodeResult {
	sb, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: b.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	ctx := context.Background()
	box, err := sb.Start(ctx, sandbox.Spec{ID: "direct-" + uuid.NewString()[:8], Command: []string{bin}})
	if err != nil {
		b.Fatal(err)
	}
	defer box.Stop(ctx)
	env, err := agent.Connect(ctx, box.Stdout(), box.Stdin(), agent.ConnectOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Close()
	m, err := agent.NewOpenAI(model)
	if err != nil {
		b.Fatal(err)
	}
	res, err := agent.RunEpisode(ctx, env, m, agent.Episode{Scenario: "add-todos", Args: map[string]any{"items": items}, MaxSteps: 30})
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	return s[len(s)/2]
}

// BenchmarkHundredThousandAttemptJob launches a job of 100,000 attempts (100 tasks × group
// size 1,000, the oracle on the todo example, real sandboxes, 8 at a time), lets it run until
// its RunList has continued as new twice, cancels it, and reports the longest workflow history
// seen: every run of the RunList, the CancelJob, and every Rollout that ran. Run:
//
//	go test -run '^$' -bench HundredThousand -benchtime 1x -timeout 30m ./cmd/proctor/
func BenchmarkHundredThousandAttemptJob(b *testing.B) {
	const tasks, group = 100, 1000
	for b.Loop() {
		dataDir := b.TempDir()
		dev := startDev(b, dataDir)
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
		var list []any
		for i := range tasks {
			list = append(list, map[string]any{"name": fmt.Sprint("add-", i), "env": "todo", "scenario": "add-todos",
				"args":       map[string]any{"items": []string{"buy milk"}},
				"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}})
		}
		var up struct {
			TaskVersionIDs []string `json:"task_version_ids"`
		}
		c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "huge", "tasks": list}, &up)

		start := time.Now()
		var launched struct {
			JobID    string `json:"job_id"`
			Accepted int    `json:"accepted"`
		}
		if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs, "model_ids": []string{oracle},
			"group_size": group, "max_concurrent": orchestrationConcurrency}, &launched); code != 201 || launched.Accepted != tasks {
			b.Fatalf("launch: %d, %d accepted", code, launched.Accepted)
		}
		b.Logf("launched %d attempts in %s", tasks*group, time.Since(start))

		tc, err := ptemporal.Dial(context.Background(), dev.info.TemporalAddress, "default", slog.New(slog.DiscardHandler), devKeys(b, dataDir))
		if err != nil {
			b.Fatal(err)
		}
		defer tc.Close()
		runs := func() []string {
			var ids []string
			var token []byte
			for {
				res, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
					Namespace: "default", Query: fmt.Sprintf("WorkflowId = 'runlist/%s'", launched.JobID), NextPageToken: token})
				if err != nil {
					b.Fatal(err)
				}
				for _, e := range res.Executions {
					ids = append(ids, e.GetExecution().GetRunId())
				}
				if token = res.NextPageToken; len(token) == 0 {
					return ids
				}
			}
		}
		deadline := time.Now().Add(10 * time.Minute)
		for len(runs()) < 3 {
			if time.Now().After(deadline) {
				b.Fatal("the run list did not continue as new twice in 10 minutes")
			}
			time.Sleep(time.Second)
		}
		var cancelled struct {
			Cancelled int `json:"cancelled"`
		}
		c.call("POST", "/v2/rollouts/cancel_job", map[string]any{"job_id": launched.JobID}, &cancelled)
		if st := c.jobStatus(launched.JobID); st != "cancelled" {
			b.Fatalf("job status after cancel = %q", st)
		}
		elapsed := time.Since(start)
		var sum summary
		c.call("GET", "/v2/jobs/"+launched.JobID+"/summary", nil, &sum)
		if sum.live() != 0 || sum.Completed+sum.Cancelled != tasks*group {
			b.Fatalf("after cancel: %+v", sum)
		}

		longest, longestOf := 0, ""
		measure := func(workflowID, runID string) {
			n := 0
			it := tc.GetWorkflowHistory(context.Background(), workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			for it.HasNext() {
				if _, err := it.Next(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n > longest {
				longest, longestOf = n, workflowID
			}
		}
		rl := runs()
		for _, run := range rl {
			measure("runlist/"+launched.JobID, run)
		}
		measure("canceljob/"+launched.JobID, "")
		var page struct {
			Items []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"items"`
		}
		c.call("GET", "/v2/jobs/"+launched.JobID+"/traces?limit=500", nil, &page)
		for _, tr := range page.Items {
			measure("rollout/"+tr.ID, "")
		}
		dev.stop(b)
		b.Logf("%d completed, %d cancelled in %s; %d run list runs; longest history %d events (%s)",
			sum.Completed, sum.Cancelled, elapsed, len(rl), longest, longestOf)
		b.ReportMetric(float64(sum.Completed), "attempts_completed")
		b.ReportMetric(float64(len(rl)), "runlist_runs")
		b.ReportMetric(float64(longest), "longest_history_events")
	}
}
