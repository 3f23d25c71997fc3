package workflows

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// fakeEngine is a scripted set of activities for the Rollout and RunList workflows: each
// records its calls (with the task queue it ran on) and answers as the test says.
type fakeEngine struct {
	mu    sync.Mutex
	calls map[string]int
	// queues records the task queue of each sandbox activity call, by activity name.
	queues map[string][]string
	// finished is the FinishTrace inputs, evaluated the Evaluate inputs, superseded the tries.
	finished   []activities.FinishTraceInput
	evaluated  []activities.EvaluateInput
	superseded []int
	steps      []int
	live, most int
	// toolDelay is how long (in the test's clock) a tool step takes, teardownDelay a teardown.
	toolDelay, teardownDelay time.Duration
	// storeDown, while positive, is how many more FinishTrace calls fail, as in a database outage.
	storeDown int
	// onFinish is called as an attempt's end is recorded, as FinishTrace signals a RunList.
	onFinish func(traceID uuid.UUID)

	plan activities.PrepareRolloutResult
	// modelStep answers a step: done, or an error.
	modelStep func(in activities.ModelStepInput) (activities.ModelStepResult, error)
	toolStep  func(in activities.ToolStepInput) error
	start     func(in activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error)
	evaluate  func(in activities.EvaluateInput) (activities.EvaluateResult, error)
	// runAgent answers RunAgent (a brought agent's run): by default it stops done.
	runAgent func(in activities.RunAgentInput) (activities.RunAgentResult, error)
	// supersede, when set, answers SupersedeTry (by default the try is superseded).
	supersede func(in activities.SupersedeTryInput) activities.SupersedeTryResult
}

// neverDone is a model that always asks for another tool call.
func neverDone(in activities.ModelStepInput) (activities.ModelStepResult, error) {
	return activities.ModelStepResult{ToolCalls: 1, Seq: in.Step}, nil
}

func newFakeEngine() *fakeEngine {
	one := 1.0
	return &fakeEngine{
		calls: map[string]int{}, queues: map[string][]string{},
		plan: activities.PrepareRolloutResult{Queue: names.QueueSandboxesCPU, StartupTimeoutS: 60, RunTimeoutS: 600, MaxSteps: 30},
		modelStep: func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
			return activities.ModelStepResult{Done: in.Step == 2, ToolCalls: 1, Seq: 10 + in.Step}, nil
		},
		toolStep: func(activities.ToolStepInput) error { return nil },
		start: func(activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
			return activities.StartEnvironmentResult{HostQueue: "host/a/1", Tools: 3}, nil
		},
		evaluate: func(activities.EvaluateInput) (activities.EvaluateResult, error) {
			return activities.EvaluateResult{Reward: &one}, nil
		},
	}
}

func (f *fakeEngine) record(ctx context.Context, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[name]++
	if activity.IsActivity(ctx) {
		f.queues[name] = append(f.queues[name], activity.GetInfo(ctx).TaskQueue)
	}
}

func (f *fakeEngine) count(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// register mocks every activity of the engine on env.
func (f *fakeEngine) register(env *testsuite.TestWorkflowEnvironment) {
	env.RegisterActivity(&activities.Activities{})
	env.OnActivity(a.PrepareRollout, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.PrepareRolloutInput) (activities.PrepareRolloutResult, error) {
			f.record(ctx, "PrepareRollout")
			return f.plan, nil
		})
	env.OnActivity(a.StartEnvironment, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
			f.record(ctx, "StartEnvironment")
			res, err := f.start(in)
			if err == nil {
				f.mu.Lock()
				f.live++
				f.most = max(f.most, f.live)
				f.mu.Unlock()
			}
			return res, err
		})
	env.OnActivity(a.ModelStep, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.ModelStepInput) (activities.ModelStepResult, error) {
			f.record(ctx, "ModelStep")
			f.mu.Lock()
			f.steps = append(f.steps, in.Step)
			f.mu.Unlock()
			return f.modelStep(in)
		})
	env.OnActivity(a.ToolStep, mock.Anything, mock.Anything).After(f.toolDelay).Return(
		func(ctx context.Context, in activities.ToolStepInput) error {
			f.record(ctx, "ToolStep")
			return f.toolStep(in)
		})
	env.OnActivity(a.RunAgent, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.RunAgentInput) (activities.RunAgentResult, error) {
			f.record(ctx, "RunAgent")
			if f.runAgent != nil {
				return f.runAgent(in)
			}
			return activities.RunAgentResult{StopReason: models.StopDone, Steps: 2}, nil
		})
	env.OnActivity(a.Evaluate, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.EvaluateInput) (activities.EvaluateResult, error) {
			f.record(ctx, "Evaluate")
			f.mu.Lock()
			f.evaluated = append(f.evaluated, in)
			f.live--
			f.mu.Unlock()
			res, err := f.evaluate(in)
			if err == nil && f.onFinish != nil {
				f.onFinish(in.TraceID)
			}
			return res, err
		})
	env.OnActivity(a.Teardown, mock.Anything, mock.Anything).After(f.teardownDelay).Return(
		func(ctx context.Context, in activities.TeardownInput) error {
			f.record(ctx, "Teardown")
			f.mu.Lock()
			f.live--
			f.mu.Unlock()
			return nil
		})
	env.OnActivity(a.FinishTrace, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.FinishTraceInput) error {
			f.record(ctx, "FinishTrace")
			f.mu.Lock()
			if f.storeDown > 0 {
				f.storeDown--
				f.mu.Unlock()
				return errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
			}
			f.finished = append(f.finished, in)
			f.mu.Unlock()
			if f.onFinish != nil {
				f.onFinish(in.TraceID)
			}
			return nil
		})
	env.OnActivity(a.SupersedeTry, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.SupersedeTryInput) (activities.SupersedeTryResult, error) {
			f.record(ctx, "SupersedeTry")
			if f.supersede != nil {
				return f.supersede(in), nil
			}
			f.mu.Lock()
			f.superseded = append(f.superseded, in.Attempt)
			f.mu.Unlock()
			return activities.SupersedeTryResult{}, nil
		})
}

func runRollout(t *testing.T, f *fakeEngine, in RolloutInput, during ...func(env *testsuite.TestWorkflowEnvironment)) (*testsuite.TestWorkflowEnvironment, RolloutResult, error) {
	t.Helper()
	env := newTestEnv()
	f.register(env)
	for _, d := range during {
		d(env)
	}
	if in.TraceID == uuid.Nil {
		in.TraceID = uuid.New()
	}
	env.ExecuteWorkflow(Rollout, in)
	if !env.IsWorkflowCompleted() {
		t.Fatal("the workflow did not complete")
	}
	var res RolloutResult
	err := env.GetWorkflowError()
	if err == nil {
		if gerr := env.GetWorkflowResult(&res); gerr != nil {
			t.Fatal(gerr)
		}
	}
	return env, res, err
}

func TestRolloutRunsTheAgentLoopOnTheSandboxHost(t *testing.T) {
	f := newFakeEngine()
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || res.StopReason != models.StopDone || res.Reward == nil || *res.Reward != 1 {
		t.Fatalf("result = %+v, want completed/done at 1", res)
	}
	// Three model steps (the third answers without tool calls), two tool steps.
	if f.count("ModelStep") != 3 || f.count("ToolStep") != 2 {
		t.Fatalf("calls = %v, want 3 model steps and 2 tool steps", f.calls)
	}
	for _, name := range []string{"ToolStep", "Evaluate"} {
		for _, q := range f.queues[name] {
			if q != "host/a/1" {
				t.Errorf("%s ran on %q, want the sandbox host's queue", name, q)
			}
		}
	}
	if q := f.queues["StartEnvironment"]; len(q) != 1 || q[0] != names.QueueSandboxesCPU {
		t.Errorf("StartEnvironment ran on %v, want the plan's queue", q)
	}
	for _, q := range f.queues["ModelStep"] {
		if q != names.QueueWorkflows {
			t.Errorf("ModelStep ran on %q, want any worker (%s)", q, names.QueueWorkflows)
		}
	}
	// Evaluate records the outcome and stops the sandbox itself: no Teardown, no FinishTrace.
	if f.count("Teardown") != 0 || f.count("FinishTrace") != 0 {
		t.Errorf("calls = %v: Evaluate already tore down and recorded the outcome", f.calls)
	}
	// Activities per attempt: 3 + 2 × model steps at most, local activities aside.
	acts := f.count("StartEnvironment") + f.count("ModelStep") + f.count("ToolStep") + f.count("Evaluate") + f.count("Teardown")
	if limit := 3 + 2*f.count("ModelStep"); acts > limit {
		t.Errorf("%d activities for %d model steps, want at most %d", acts, f.count("ModelStep"), limit)
	}
}

func TestRolloutErrorsOfTheTaskEndTheAttemptWithoutRetry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		message string
		script  func(f *fakeEngine)
	}{
		{"model error", "model step 0: 400 bad request", func(f *fakeEngine) {
			f.modelStep = func(activities.ModelStepInput) (activities.ModelStepResult, error) {
				return activities.ModelStepResult{}, temporal.NewNonRetryableApplicationError("model step 0: 400 bad request", activities.ErrModel, nil)
			}
		}},
		{"tool error of the environment", "tool add: the environment exited", func(f *fakeEngine) {
			f.toolStep = func(activities.ToolStepInput) error {
				return temporal.NewNonRetryableApplicationError("tool add: the environment exited", activities.ErrEnvironment, nil)
			}
		}},
		{"setup failed", "setup seed failed", func(f *fakeEngine) {
			f.start = func(activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
				return activities.StartEnvironmentResult{}, temporal.NewNonRetryableApplicationError("setup seed failed", activities.ErrEnvironment, nil)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEngine()
			tc.script(f)
			_, res, err := runRollout(t, f, RolloutInput{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != models.TraceError || res.Reward == nil || *res.Reward != 0 {
				t.Fatalf("result = %+v, want error at reward 0", res)
			}
			if f.count("StartEnvironment") != 1 || len(f.superseded) != 0 {
				t.Errorf("calls = %v, superseded %v: an error of the task is not retried", f.calls, f.superseded)
			}
			// The activity's own message, as people read it: not the SDK's wrapping of it.
			if len(f.finished) != 1 || f.finished[0].Status != models.TraceError || f.finished[0].Error != tc.message {
				t.Errorf("finished = %+v, want one error reading %q", f.finished, tc.message)
			}
		})
	}
}

func TestRolloutRetriesInfrastructureFailuresInAFreshSandbox(t *testing.T) {
	t.Run("recovers", func(t *testing.T) {
		f := newFakeEngine()
		failures := 1
		f.toolStep = func(in activities.ToolStepInput) error {
			if in.Attempt == 1 && failures > 0 {
				failures--
				return errors.New("sandbox lost")
			}
			return nil
		}
		_, res, err := runRollout(t, f, RolloutInput{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != models.TraceCompleted || f.count("StartEnvironment") != 2 || len(f.superseded) != 1 || f.superseded[0] != 1 {
			t.Fatalf("result %+v, calls %v, superseded %v: want the second try to complete", res, f.calls, f.superseded)
		}
		if f.count("Teardown") != 1 {
			t.Errorf("the failed try was torn down %d times, want 1", f.count("Teardown"))
		}
	})
	t.Run("up to the limit", func(t *testing.T) {
		f := newFakeEngine()
		f.toolStep = func(activities.ToolStepInput) error { return errors.New("sandbox lost") }
		_, res, err := runRollout(t, f, RolloutInput{MaxTries: 2})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != models.TraceError || f.count("StartEnvironment") != 2 || len(f.superseded) != 2 {
			t.Fatalf("result %+v, calls %v: want error after 2 tries", res, f.calls)
		}
		if len(f.finished) != 1 || f.finished[0].Error == "" || !f.finished[0].Infrastructure {
			t.Errorf("finished = %+v, want an infrastructure failure", f.finished)
		}
	})
}

// TestRolloutStartsTheNextTryWithoutWaitingForTheLostTrysTeardown: a try whose host died leaves a
// Teardown that waits out HostLostTimeout on the dead host's queue. The next try starts at once,
// not after it, and the workflow still waits for it before it ends: restarting an attempt after a
// kill -9 costs one HostLostTimeout, not two.
func TestRolloutStartsTheNextTryWithoutWaitingForTheLostTrysTeardown(t *testing.T) {
	f := newFakeEngine()
	f.teardownDelay = HostLostTimeout
	var env *testsuite.TestWorkflowEnvironment
	var lostAt, restartedAt time.Time
	f.toolStep = func(in activities.ToolStepInput) error {
		if in.Attempt == 1 {
			lostAt = env.Now()
			return errors.New("activity Heartbeat timeout")
		}
		return nil
	}
	f.start = func(in activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
		if in.Attempt == 2 {
			restartedAt = env.Now()
		}
		return activities.StartEnvironmentResult{HostQueue: fmt.Sprintf("host/h%d/1", in.Attempt), Tools: 3}, nil
	}
	_, res, err := runRollout(t, f, RolloutInput{}, func(e *testsuite.TestWorkflowEnvironment) { env = e })
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || f.count("StartEnvironment") != 2 {
		t.Fatalf("result %+v, calls %v: want the second try to complete", res, f.calls)
	}
	if gap := restartedAt.Sub(lostAt); gap >= HostLostTimeout {
		t.Errorf("the next try started %s after the loss: it waited for the lost try's teardown", gap)
	}
	if f.count("Teardown") != 1 || f.queues["Teardown"][0] != "host/h1/1" {
		t.Errorf("teardowns %v on %v: want the lost try's, on its host, awaited before the end", f.count("Teardown"), f.queues["Teardown"])
	}
}

// TestATaskFaultEndsTheAttemptInError: Evaluate said the task itself is broken (a Harbor task
// whose tests wrote no reward) and recorded the end: the attempt is an error, unscored, and it is
// neither retried nor written again.
func TestATaskFaultEndsTheAttemptInError(t *testing.T) {
	f := newFakeEngine()
	f.evaluate = func(activities.EvaluateInput) (activities.EvaluateResult, error) {
		return activities.EvaluateResult{Status: models.TraceError}, nil
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceError || res.Reward != nil || f.count("Evaluate") != 1 || f.count("FinishTrace") != 0 {
		t.Errorf("result %+v after %d evaluations and %d more writes, want one error, unscored, recorded by Evaluate", res, f.count("Evaluate"), f.count("FinishTrace"))
	}
}

// TestRolloutRidesOutAStoreOutage: the database is away for longer than a store write's 30 s
// (a failover, a restart) as the attempt ends. The write is retried until it is back, and the
// attempt ends recorded: a workflow that failed instead would leave its trace running for ever.
func TestRolloutRidesOutAStoreOutage(t *testing.T) {
	f := newFakeEngine()
	f.evaluate = func(activities.EvaluateInput) (activities.EvaluateResult, error) {
		return activities.EvaluateResult{}, temporal.NewApplicationError("evaluate failed", activities.ErrEnvironment)
	}
	f.storeDown = 20 // at most 10 s apart: over two minutes of retries
	var env *testsuite.TestWorkflowEnvironment
	var began time.Time
	_, res, err := runRollout(t, f, RolloutInput{}, func(e *testsuite.TestWorkflowEnvironment) {
		env = e
		began = e.Now()
	})
	if err != nil {
		t.Fatalf("the workflow failed in a store outage: %v", err)
	}
	if res.Status != models.TraceError || len(f.finished) != 1 || f.count("FinishTrace") != 21 {
		t.Fatalf("result %+v, FinishTrace called %d times, finished %+v: want the end recorded once the store is back", res, f.count("FinishTrace"), f.finished)
	}
	if took := env.Now().Sub(began); took < time.Minute {
		t.Errorf("the outage lasted %s, want over a minute of retries", took)
	}
}

// TestRolloutKeepsAnOutcomeRecordedBeforeItsHostWasLost: Evaluate recorded the outcome, and its
// host died before Temporal heard back. The try fails as lost, and the store says the attempt
// finished: that outcome stands, and no new try starts.
func TestRolloutKeepsAnOutcomeRecordedBeforeItsHostWasLost(t *testing.T) {
	f := newFakeEngine()
	f.evaluate = func(activities.EvaluateInput) (activities.EvaluateResult, error) {
		return activities.EvaluateResult{}, errors.New("activity StartToClose timeout")
	}
	one := 1.0
	f.supersede = func(in activities.SupersedeTryInput) activities.SupersedeTryResult {
		return activities.SupersedeTryResult{Finished: true, Status: models.TraceCompleted, StopReason: models.StopDone, Reward: &one}
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || res.Reward == nil || *res.Reward != 1 {
		t.Errorf("result %+v, want the recorded outcome", res)
	}
	if f.count("StartEnvironment") != 1 || f.count("FinishTrace") != 0 || f.count("SupersedeTry") != 1 {
		t.Errorf("calls %v: want one try, its outcome not written again", f.calls)
	}
}

func TestRolloutStopsAtMaxStepsAndStillEvaluates(t *testing.T) {
	f := newFakeEngine()
	f.plan.MaxSteps = 4
	f.modelStep = neverDone
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != models.StopMaxSteps || f.count("ModelStep") != 4 || len(f.evaluated) != 1 || f.evaluated[0].StopReason != models.StopMaxSteps {
		t.Fatalf("result %+v, calls %v, evaluated %+v", res, f.calls, f.evaluated)
	}
}

func TestRolloutStopsAtTheRunTimeoutAndStillEvaluates(t *testing.T) {
	f := newFakeEngine()
	f.plan.RunTimeoutS = 5
	f.modelStep = neverDone
	f.toolDelay = 2 * time.Second
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != models.StopTimeout || len(f.evaluated) != 1 || f.evaluated[0].StopReason != models.StopTimeout {
		t.Fatalf("result %+v, calls %v, evaluated %+v: want a timeout that still evaluates", res, f.calls, f.evaluated)
	}
	if n := f.count("ModelStep"); n < 2 || n > 4 {
		t.Errorf("%d model steps in 5 s of 2 s tool steps", n)
	}
}

func TestRolloutWithoutAHostInTimeEndsWithAClearError(t *testing.T) {
	f := newFakeEngine()
	f.plan.Queue = names.GPUQueue("h100")
	f.start = func(activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
		return activities.StartEnvironmentResult{}, temporal.NewTimeoutError(enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START, nil)
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceError || len(f.finished) != 1 || len(f.superseded) != 0 {
		t.Fatalf("result %+v, finished %+v, superseded %v: want one error, no retry", res, f.finished, f.superseded)
	}
	if msg := f.finished[0].Error; !strings.Contains(msg, "sandboxes-gpu-h100") || !strings.Contains(msg, "startup_timeout_s") {
		t.Errorf("error %q should name the queue and the startup timeout", msg)
	}
	if f.count("Teardown") != 0 {
		t.Error("nothing started, yet a teardown was sent")
	}
}

func TestRolloutCancelTearsDownAndRecordsCancelled(t *testing.T) {
	f := newFakeEngine()
	f.modelStep = neverDone
	f.toolDelay = 10 * time.Second
	_, _, err := runRollout(t, f, RolloutInput{}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(env.CancelWorkflow, 25*time.Second)
	})
	var canceled *temporal.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v, want cancelled", err)
	}
	if f.count("Teardown") != 1 || f.count("Evaluate") != 0 {
		t.Errorf("calls = %v: want one teardown and no evaluation", f.calls)
	}
	if len(f.finished) != 1 || f.finished[0].Status != models.TraceCancelled {
		t.Errorf("finished = %+v, want cancelled", f.finished)
	}
}

func TestRolloutOfManyStepsContinuesAsNewWithItsSandbox(t *testing.T) {
	f := newFakeEngine()
	f.plan.MaxSteps = 10000
	f.modelStep = neverDone
	_, _, err := runRollout(t, f, RolloutInput{StepsPerRun: 50})
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	if f.count("ModelStep") != 50 || f.count("Teardown") != 0 || f.count("Evaluate") != 0 {
		t.Fatalf("calls = %v: want 50 steps and the sandbox kept", f.calls)
	}
	var next RolloutInput
	if err := decodeArgs(can, &next); err != nil {
		t.Fatal(err)
	}
	if next.Resume == nil || next.Resume.Step != 50 || next.Resume.HostQueue != "host/a/1" || next.Resume.Try != 1 || next.StepsPerRun != 50 {
		t.Fatalf("next run's input = %+v, resume %+v", next, next.Resume)
	}

	// The next run goes on from step 50 in the same sandbox, with the same deadline, until max_steps.
	g := newFakeEngine()
	g.plan = next.Resume.Plan
	g.plan.MaxSteps = 120
	next.Resume.Plan = g.plan
	g.modelStep = f.modelStep
	env := newTestEnv()
	g.register(env)
	env.SetStartTime(next.Resume.Deadline.Add(-time.Hour))
	env.ExecuteWorkflow(Rollout, next)
	err = env.GetWorkflowError()
	if !errors.As(err, &can) {
		t.Fatalf("second run: %v, want another continue-as-new", err)
	}
	if g.count("StartEnvironment") != 0 || g.count("PrepareRollout") != 0 || g.steps[0] != 50 || len(g.steps) != 50 {
		t.Fatalf("second run: calls %v, steps from %v", g.calls, g.steps[:1])
	}
	if err := decodeArgs(can, &next); err != nil {
		t.Fatal(err)
	}
	h := newFakeEngine()
	h.plan = next.Resume.Plan
	h.modelStep = f.modelStep
	env = newTestEnv()
	h.register(env)
	env.SetStartTime(next.Resume.Deadline.Add(-time.Hour))
	env.ExecuteWorkflow(Rollout, next)
	var res RolloutResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.StopReason != models.StopMaxSteps || len(h.steps) != 20 || h.steps[0] != 100 || h.queues["Evaluate"][0] != "host/a/1" {
		t.Fatalf("last run: %+v, steps %v, evaluate on %v", res, len(h.steps), h.queues["Evaluate"])
	}
}

// newTestEnv is a test environment that logs only warnings (the SDK's test logger prints every
// activity result).
func newTestEnv() *testsuite.TestWorkflowEnvironment {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	return s.NewTestWorkflowEnvironment()
}

func decodeArgs(can *workflow.ContinueAsNewError, out any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, out)
}

// TestRolloutOfTheLargestMaxStepsRunsInBoundedRuns drives an attempt of max_steps 10000 (the
// API's bound) through every continue-as-new to its end: each run holds at most
// DefaultStepsPerRun steps, and the last evaluates in the sandbox the first started.
func TestRolloutOfTheLargestMaxStepsRunsInBoundedRuns(t *testing.T) {
	const maxSteps = 10000
	in := RolloutInput{TraceID: uuid.New()}
	total, runs := 0, 0
	for {
		runs++
		f := newFakeEngine()
		f.plan.MaxSteps = maxSteps
		f.plan.RunTimeoutS = 7 * 24 * 3600
		f.modelStep = neverDone
		env := newTestEnv()
		f.register(env)
		if in.Resume != nil {
			env.SetStartTime(in.Resume.Deadline.Add(-time.Hour))
		}
		env.ExecuteWorkflow(Rollout, in)
		total += f.count("ModelStep")
		if n := f.count("ModelStep") + f.count("ToolStep"); n > 2*DefaultStepsPerRun {
			t.Fatalf("run %d scheduled %d activities, want at most %d", runs, n, 2*DefaultStepsPerRun)
		}
		var can *workflow.ContinueAsNewError
		if err := env.GetWorkflowError(); errors.As(err, &can) {
			if err := decodeArgs(can, &in); err != nil {
				t.Fatal(err)
			}
			// The next run is begun by this code: it asks for no version (see Revision).
			if in.Revision != Revision {
				t.Fatalf("run %d continued as new at revision %d, want %d", runs, in.Revision, Revision)
			}
			continue
		}
		var res RolloutResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.StopReason != models.StopMaxSteps || f.queues["Evaluate"][0] != "host/a/1" {
			t.Fatalf("last run: %+v, evaluated on %v", res, f.queues["Evaluate"])
		}
		break
	}
	if total != maxSteps || runs != maxSteps/DefaultStepsPerRun {
		t.Errorf("%d steps in %d runs, want %d in %d", total, runs, maxSteps, maxSteps/DefaultStepsPerRun)
	}
}

// A worker that drains signals the attempts whose sandboxes stop with it: the try ends at once,
// without waiting for the host to be taken for lost or asking it to tear down, and a new try
// completes the attempt. A signal about another host changes nothing.
func TestRolloutRestartsAtOnceWhenItsHostStops(t *testing.T) {
	f := newFakeEngine()
	hosts := []string{"host/a/1", "host/b/2"}
	f.start = func(in activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
		return activities.StartEnvironmentResult{HostQueue: hosts[min(in.Attempt, 2)-1], Tools: 3}, nil
	}
	f.toolDelay = 5 * time.Second
	var started time.Time
	env, res, err := runRollout(t, f, RolloutInput{}, func(env *testsuite.TestWorkflowEnvironment) {
		env.RegisterDelayedCallback(func() {
			started = env.Now()
			env.SignalWorkflow(names.SignalHostStopped, "host/z/9") // another worker's
		}, time.Second)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(names.SignalHostStopped, "host/a/1") }, 2*time.Second)
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || f.count("StartEnvironment") != 2 || len(f.superseded) != 1 || f.superseded[0] != 1 {
		t.Fatalf("result %+v, calls %v, superseded %v: want a second try that completes", res, f.calls, f.superseded)
	}
	if f.count("Teardown") != 0 {
		t.Errorf("the stopped host was asked to tear down %d times", f.count("Teardown"))
	}
	// The second try's two tool steps take 5 s each: the first try ended when the signal came,
	// not after the 20 s a lost host is waited for.
	if took := env.Now().Sub(started); took > 15*time.Second {
		t.Errorf("the attempt took %s after the stop, want the new try at once", took)
	}
}
