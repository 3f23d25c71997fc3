package activities

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
	"github.com/proctorhq/proctor/workflows/names"
)

func TestMain(m *testing.M) { storetest.Main(m, testenv.Cleanup) }

// todoBinary is the todo example environment, built once per test binary.
func todoBinary(t testing.TB) string { return testenv.Program(t, "examples/environments/todo") }

// engine is a store with the todo environment registered, one oracle task over it, and
// Activities wired to a real process sandbox provider.
type engine struct {
	acts    *Activities
	store   *models.Store
	caller  *models.Caller
	version uuid.UUID
	oracle  *models.LLMModel
}

func newEngine(t testing.TB, s *models.Store, capacity int) *engine {
	t.Helper()
	ctx := context.Background()
	tm, err := s.CreateTeam(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	u, m, err := s.AddMember(ctx, tm.ID, "", "a@example.com", models.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	c := &models.Caller{TeamID: tm.ID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
	reg, err := registry.Of(s).CreateRegistry(ctx, c, registry.NewRegistry{Name: "todo"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, SetLatest: true,
		Scenarios: []models.Scenario{{Name: "add-todos"}}, RuntimeConfig: models.BuildRuntime{Command: []string{todoBinary(t)}}}); err != nil {
		t.Fatal(err)
	}
	up, err := catalog.Of(s).UploadTasks(ctx, c, catalog.Upload{TasksetName: "t", Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{
		Name: "add", Env: "todo", Scenario: "add-todos", Args: map[string]any{"items": []any{"buy milk", "walk the dog"}},
		Prompt:     "Use the tools.",
		Validation: []models.ValidationCall{{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}, {Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}}},
	}}}})
	if err != nil {
		t.Fatal(err)
	}
	oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
	if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sb, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), MaxSandboxes: capacity, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	return &engine{
		acts:  &Activities{Store: s, Logger: log, Sandboxes: sb, Envs: NewEnvs(), HostQueue: "host/test/1"},
		store: s, caller: c, version: up.TaskVersionIDs[0], oracle: oracle,
	}
}

// launch creates a run_list job of n traces and returns their ids.
func (e *engine) launch(t testing.TB, n int) (uuid.UUID, []uuid.UUID) {
	t.Helper()
	var lts []rollouts.LaunchTrace
	for range n {
		lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: e.version, ModelID: e.oracle.ID, MaxSteps: 10})
	}
	job, traces, err := rollouts.Of(e.store).LaunchJob(context.Background(), e.caller, rollouts.Launch{Name: "j", MaxSteps: 10, GroupSize: n, MaxConcurrent: n,
		Kind: models.JobBatch, Traces: lts})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uuid.UUID, len(traces))
	for i, tr := range traces {
		ids[i] = tr.ID
	}
	return job.ID, ids
}

func (e *engine) trace(t *testing.T, id uuid.UUID) *rollouts.TraceRow {
	t.Helper()
	tr, err := rollouts.Of(e.store).GetTrace(context.Background(), e.caller, id)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestAnAttemptThroughTheActivities runs the activities of one attempt in the order the Rollout
// workflow does, against a real store and a sandboxed environment, and checks what each leaves
// in the store.
func TestAnAttemptThroughTheActivities(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 4)
		_, ids := e.launch(t, 1)
		id := ids[0]

		plan, err := e.acts.PrepareRollout(ctx, PrepareRolloutInput{TraceID: id})
		if err != nil || plan.Queue != names.QueueSandboxesCPU || plan.MaxSteps != 10 || plan.RunTimeoutS != DefaultRunTimeoutS {
			t.Fatalf("plan = %+v, %v", plan, err)
		}
		started, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: id, Attempt: 1})
		if err != nil || started.HostQueue != "host/test/1" || started.Tools == 0 {
			t.Fatalf("start = %+v, %v", started, err)
		}
		if tr := e.trace(t, id); tr.Status != models.TraceRunning || tr.Attempt != 1 || tr.StartTime == nil {
			t.Errorf("after start: status %s attempt %d", tr.Status, tr.Attempt)
		}
		evs, _ := rollouts.Of(s).TraceEvents(ctx, id, -1, false)
		if len(evs) < 2 || evs[0].Kind != models.EventSystem || evs[len(evs)-1].Kind != models.EventUser ||
			!strings.Contains(evs[len(evs)-1].Text, "buy milk") || !strings.HasSuffix(evs[len(evs)-1].Text, "Use the tools.") {
			t.Fatalf("opening events = %+v", evs)
		}

		var steps int
		for step := 0; ; step++ {
			ms, err := e.acts.ModelStep(ctx, ModelStepInput{TraceID: id, Attempt: 1, Step: step})
			if err != nil {
				t.Fatal(err)
			}
			// A retried model step answers from the store, without a second answer.
			again, err := e.acts.ModelStep(ctx, ModelStepInput{TraceID: id, Attempt: 1, Step: step})
			if err != nil || again != ms {
				t.Fatalf("retried step %d = %+v, %v; want %+v", step, again, err, ms)
			}
			steps++
			if ms.Done {
				break
			}
			if err := e.acts.ToolStep(ctx, ToolStepInput{TraceID: id, Attempt: 1, Step: step, AssistantSeq: ms.Seq}); err != nil {
				t.Fatal(err)
			}
			// A retried tool step skips the calls already recorded.
			if err := e.acts.ToolStep(ctx, ToolStepInput{TraceID: id, Attempt: 1, Step: step, AssistantSeq: ms.Seq}); err != nil {
				t.Fatal(err)
			}
		}
		if steps != 3 {
			t.Errorf("%d model steps, want 3 (two calls, then the answer)", steps)
		}
		evs, _ = rollouts.Of(s).TraceEvents(ctx, id, -1, false)
		kinds := map[string]int{}
		for _, ev := range evs {
			kinds[ev.Kind]++
		}
		if kinds[models.EventAssistant] != 3 || kinds[models.EventToolCall] != 2 || kinds[models.EventToolResult] != 2 {
			t.Errorf("events by kind = %v", kinds)
		}

		res, err := e.acts.Evaluate(ctx, EvaluateInput{TraceID: id, Attempt: 1, StopReason: models.StopDone})
		if err != nil || res.Reward == nil || *res.Reward != 1 {
			t.Fatalf("evaluate = %+v, %v", res, err)
		}
		tr := e.trace(t, id)
		if tr.Status != models.TraceCompleted || tr.Reward == nil || *tr.Reward != 1 || tr.StopReason != models.StopDone || tr.EvaluationResult == nil || tr.EvaluationResult.Reward != 1.0 {
			t.Errorf("after evaluate: %s %v %s %v", tr.Status, tr.Reward, tr.StopReason, tr.EvaluationResult)
		}
		// Evaluate stopped the sandbox.
		if n := e.acts.Sandboxes.(*sandbox.Process).Running(); n != 0 {
			t.Errorf("%d sandboxes still running after evaluate", n)
		}
		if err := e.acts.ToolStep(ctx, ToolStepInput{TraceID: id, Attempt: 1, Step: 0, AssistantSeq: 0}); err == nil {
			t.Error("a tool step after evaluate found the environment live")
		}
		if err := e.acts.Teardown(ctx, TeardownInput{TraceID: id, Attempt: 1}); err != nil {
			t.Errorf("a teardown after evaluate: %v", err)
		}
	})
}

func TestStartEnvironmentAtCapacityAndForClosedTraces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 1)
		jobID, ids := e.launch(t, 3)
		if _, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: ids[0], Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		// The host's one slot is taken: the start is refused as retryable capacity.
		_, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: ids[1], Attempt: 1})
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || appErr.Type() != ErrCapacity || appErr.NonRetryable() {
			t.Fatalf("start at capacity = %v, want a retryable %s", err, ErrCapacity)
		}
		if err := e.acts.Teardown(ctx, TeardownInput{TraceID: ids[0], Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		// A trace cancelled before its sandbox started does not start.
		if _, err := rollouts.Of(s).MarkJobCancelling(ctx, jobID); err != nil {
			t.Fatal(err)
		}
		_, err = e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: ids[2], Attempt: 1})
		if !errors.As(err, &appErr) || appErr.Type() != ErrTraceClosed {
			t.Fatalf("start of a cancelled trace = %v, want %s", err, ErrTraceClosed)
		}
		if n := e.acts.Sandboxes.(*sandbox.Process).Running(); n != 0 {
			t.Errorf("%d sandboxes running after a refused start", n)
		}
	})
}

// TestALostTrysTeardownStopsOnlyItsOwnSandbox: the Rollout starts an attempt's next try without
// waiting for the lost try's Teardown, so both can be on the same (live) host at once. Each try
// finds its own sandbox: the late Teardown stops the lost try's and leaves the new one running.
func TestALostTrysTeardownStopsOnlyItsOwnSandbox(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 2)
		_, ids := e.launch(t, 1)
		id := ids[0]
		if _, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: id, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.acts.SupersedeTry(ctx, SupersedeTryInput{TraceID: id, Attempt: 1, Reason: "activity Heartbeat timeout"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: id, Attempt: 2}); err != nil {
			t.Fatal(err)
		}
		procs := e.acts.Sandboxes.(*sandbox.Process)
		if n := procs.Running(); n != 2 {
			t.Fatalf("%d sandboxes running, want the lost try's and the next one's", n)
		}
		if err := e.acts.Teardown(ctx, TeardownInput{TraceID: id, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if running := e.acts.Envs.Running(); procs.Running() != 1 || len(running) != 1 || running[0].Attempt != 2 {
			t.Fatalf("after the lost try's teardown: %d sandboxes, environments %+v; want the next try's alone", procs.Running(), running)
		}
		if e.acts.envOf(id, 2) == nil {
			t.Error("the next try's environment is gone from the worker")
		}
		if err := e.acts.Teardown(ctx, TeardownInput{TraceID: id, Attempt: 2}); err != nil || procs.Running() != 0 {
			t.Errorf("after the next try's teardown: %d sandboxes, %v", procs.Running(), err)
		}
	})
}

func TestFinishTraceOfACancellingTraceEndsCancelled(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 1)
		jobID, ids := e.launch(t, 1)
		now := time.Now().UTC()
		if _, err := rollouts.Of(s).TransitionTrace(ctx, ids[0], rollouts.TraceUpdate{Status: models.TraceRunning, Attempt: 1, StartTime: &now}); err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).MarkJobCancelling(ctx, jobID); err != nil {
			t.Fatal(err)
		}
		// The attempt finished as the job was being cancelled.
		one := 1.0
		if err := e.acts.FinishTrace(ctx, FinishTraceInput{TraceID: ids[0], Status: models.TraceCompleted, StopReason: models.StopDone, Reward: &one}); err != nil {
			t.Fatal(err)
		}
		if tr := e.trace(t, ids[0]); tr.Status != models.TraceCancelled || tr.StopReason != models.StopCancelled {
			t.Errorf("trace = %s (%s), want cancelled", tr.Status, tr.StopReason)
		}
	})
}

func TestJobTracesPagesAndOpenTraces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 1)
		jobID, ids := e.launch(t, 5)
		var got []uuid.UUID
		for off := 0; ; off += 2 {
			page, err := e.acts.JobTracesPage(ctx, JobTracesPageInput{JobID: jobID, Offset: off, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.TraceIDs...)
			if len(page.TraceIDs) < 2 {
				break
			}
		}
		if len(got) != 5 {
			t.Fatalf("pages gave %d traces, want 5", len(got))
		}
		seen := map[uuid.UUID]bool{}
		for _, id := range got {
			seen[id] = true
		}
		if len(seen) != 5 {
			t.Errorf("pages repeat traces: %v", got)
		}
		if err := e.acts.FinishTrace(ctx, FinishTraceInput{TraceID: ids[1], Status: models.TraceError, StopReason: models.StopError, Error: "x"}); err != nil {
			t.Fatal(err)
		}
		open, err := e.acts.OpenTraces(ctx, OpenTracesInput{TraceIDs: ids[:3]})
		if err != nil || len(open.TraceIDs) != 2 {
			t.Errorf("open traces = %v, %v; want two of three", open.TraceIDs, err)
		}
	})
}

// An attempt that declares a limit this host's sandboxes cannot enforce runs, and its
// environment log says so from its first line (and the worker's line about its start); with
// RefuseUnenforcedLimits the worker refuses it instead, starting nothing. The provider here
// limits nothing (LimiterNone), so its memory bound is what no host would enforce.
func TestALimitThisHostCannotEnforceIsSaidOrRefused(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 2)
		sb, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), Limiter: sandbox.LimiterNone, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { sb.Close(context.Background()) })
		e.acts.Sandboxes = sb
		mem := 256
		var lts []rollouts.LaunchTrace
		for range 2 {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: e.version, ModelID: e.oracle.ID, MaxSteps: 10,
				RuntimeConfig: &models.RuntimeConfig{Resources: &models.RuntimeResources{MemoryMB: &mem}}})
		}
		_, traces, err := rollouts.Of(s).LaunchJob(ctx, e.caller, rollouts.Launch{Name: "j", MaxSteps: 10, GroupSize: 2, MaxConcurrent: 2, Kind: models.JobBatch, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}

		if _, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: traces[0].ID, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		if err := e.acts.Teardown(ctx, TeardownInput{TraceID: traces[0].ID, Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		logs, _, err := rollouts.Of(s).TraceLogs(ctx, traces[0].ID, rollouts.LogEnv, -1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) == 0 || logs[0].Stream != LogStreamProctor || logs[0].Line != "limit not enforced on this host: memory 256 MiB: memory: not limited" {
			t.Errorf("the environment log begins %+v, want the unenforced memory bound said", logs)
		}

		e.acts.RefuseUnenforcedLimits = true
		_, err = e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: traces[1].ID, Attempt: 1})
		var appErr *temporal.ApplicationError
		if !errors.As(err, &appErr) || !appErr.NonRetryable() || !strings.Contains(err.Error(), "this worker refuses the attempt: it declares limits its sandboxes cannot enforce here (memory 256 MiB: memory: not limited)") {
			t.Fatalf("a refused start = %v", err)
		}
		if n := sb.Running(); n != 0 {
			t.Errorf("%d sandboxes running after a refused start", n)
		}
	})
}
