package workflows

import (
	"cmp"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// attempt runs one try in one sandbox, or goes on with the try a previous run handed over:
// start the sandbox, the agent loop, then Evaluate; Teardown on every other path.
func (r *rollout) attempt(ctx workflow.Context, try int) (end ending) {
	t := &liveTry{r: r, n: try}
	if res := r.in.Resume; res != nil && res.Try == try {
		t.host, t.deadline, t.first = res.HostQueue, res.Deadline, res.Step
	} else if failed, ok := t.start(ctx); !ok {
		return failed
	}
	wctx, endWatch := workflow.WithCancel(ctx)
	defer endWatch()
	t.watchHost(ctx, wctx)
	defer func() { t.teardown(ctx, end) }()

	// The plan says whether a brought agent runs (branching on the recorded plan keeps older
	// histories, whose plans never say so, replaying the built-in loop).
	steps := t.steps
	if t.r.plan.Agent {
		steps = t.runAgent
	}
	stop, end, ok := steps(ctx)
	if !ok {
		return end
	}
	if ctx.Err() != nil {
		end.infra = ctx.Err()
		return end
	}
	return t.evaluate(ctx, stop)
}

// liveTry is one try of an attempt while its sandbox lives.
type liveTry struct {
	r *rollout
	n int
	// host is the sandbox host's own queue; deadline ends the agent loop (run_timeout_s); first
	// is the step this run starts at.
	host     string
	deadline time.Time
	first    int
	// hctx is the context of the activities on the host, cancelled when the host stops.
	hctx workflow.Context
	// hostStopped: the host said it stopped with the sandbox. tornDown: Evaluate stopped the
	// sandbox. handedOver: the sandbox goes on in the next run.
	hostStopped, tornDown, handedOver bool
}

// start starts the try's sandbox on a host of the plan's queue; it answers how the try ended
// when it could not.
func (t *liveTry) start(ctx workflow.Context) (ending, bool) {
	startup := seconds(t.r.plan.StartupTimeoutS)
	var started activities.StartEnvironmentResult
	sctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue: t.r.plan.Queue,
		// No host of the queue (e.g. no GPU worker of that type), or none with a free
		// sandbox slot, within startup_timeout_s ends the attempt with a clear error.
		ScheduleToStartTimeout: startup,
		ScheduleToCloseTimeout: startup + 30*time.Second,
		StartToCloseTimeout:    startup + 30*time.Second,
		HeartbeatTimeout:       HostLostTimeout,
		// A cancelled attempt waits for its start to stop: a sandbox that started anyway is
		// then known, and torn down.
		WaitForCancellation: true,
		// A host at capacity answers ErrCapacity, and the start is offered again (to any
		// host); a failed start cleaned up after itself, so retrying it is safe too.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, BackoffCoefficient: 1.5, MaximumInterval: 2 * time.Second,
			NonRetryableErrorTypes: []string{activities.ErrEnvironment, activities.ErrModel, activities.ErrTraceClosed}},
	})
	err := workflow.ExecuteActivity(sctx, a.StartEnvironment, activities.StartEnvironmentInput{TraceID: t.r.in.TraceID, Attempt: t.n}).Get(ctx, &started)
	if err != nil {
		return t.r.startFailed(ctx, err), false
	}
	t.host, t.deadline = started.HostQueue, workflow.Now(ctx).Add(seconds(t.r.plan.RunTimeoutS))
	return ending{}, true
}

// watchHost sets up the host activities' context, cancelled when the host signals that it
// stopped. A worker that drains signals the attempts whose sandboxes stop with it: the try ends at
// once (its running host activity is cancelled) and a new one starts, rather than waiting for the
// host to be taken for lost. The watcher ends with wctx; a signal about another host (an earlier
// try's) is dropped.
func (t *liveTry) watchHost(ctx, wctx workflow.Context) {
	hctx, stopHostWork := workflow.WithCancel(ctx)
	t.hctx = hctx
	signals := workflow.GetSignalChannel(ctx, names.SignalHostStopped)
	workflow.Go(wctx, func(gctx workflow.Context) {
		for {
			var stopped string
			if !signals.Receive(gctx, &stopped) {
				return
			}
			if stopped == t.host {
				t.hostStopped = true
				stopHostWork()
				return
			}
		}
	})
}

func (t *liveTry) lostHost() ending {
	return ending{infra: fmt.Errorf("the worker of host queue %s stopped with the sandbox", t.host)}
}

// teardown runs on every path that did not end in Evaluate, cancel included, in a context that
// outlives cancellation; a host that is gone is not waited for past HostLostTimeout, and one that
// stopped (it stopped the sandbox) is not asked. A try lost to infrastructure does not wait for
// it: the next try starts at once, and the workflow's end waits instead.
func (t *liveTry) teardown(ctx workflow.Context, end ending) {
	if t.tornDown || t.handedOver || t.hostStopped {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	tctx := workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
		TaskQueue:              t.host,
		ScheduleToStartTimeout: HostLostTimeout,
		StartToCloseTimeout:    teardownTimeout,
		RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 2},
	})
	f := workflow.ExecuteActivity(tctx, a.Teardown, activities.TeardownInput{TraceID: t.r.in.TraceID, Attempt: t.n})
	if end.infra != nil && ctx.Err() == nil {
		t.r.teardowns = append(t.r.teardowns, f)
		return
	}
	_ = f.Get(dctx, nil)
}

// onHost is the context of an activity on the sandbox's host.
func (t *liveTry) onHost(timeout time.Duration) workflow.Context {
	return workflow.WithActivityOptions(t.hctx, workflow.ActivityOptions{
		TaskQueue:              t.host,
		ScheduleToStartTimeout: HostLostTimeout,
		StartToCloseTimeout:    timeout,
		HeartbeatTimeout:       HostLostTimeout,
		// A sandbox activity is not retried on its own: its state lives in the sandbox, and
		// a lost sandbox restarts the whole try.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	})
}

// steps is the agent loop: a model step, then its tool calls on the host, until the agent is
// done, max_steps or the deadline; it answers why it stopped, or (not ok) how the try ended
// without evaluation: a failure, a lost host, or a hand-over to the next run.
func (t *liveTry) steps(ctx workflow.Context) (stop string, end ending, ok bool) {
	r := t.r
	for step := t.first; ; step++ {
		if step >= r.plan.MaxSteps {
			return models.StopMaxSteps, end, true
		}
		if step > t.first && (step-t.first)%r.in.StepsPerRun == 0 {
			t.handedOver = true
			resume := RolloutResume{Plan: r.plan, Try: t.n, HostQueue: t.host, Step: step, Deadline: t.deadline}
			r.handOver = &resume
			end.next = errHandOver
			return "", end, false
		}
		left := t.deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			return models.StopTimeout, end, true
		}
		var ms activities.ModelStepResult
		mctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           names.QueueWorkflows,
			StartToCloseTimeout: min(left, 10*time.Minute),
			// The step heartbeats: a cancel reaches it (and its model call) within seconds, and
			// a dead worker's step is retried elsewhere without waiting out the call.
			HeartbeatTimeout: ModelHeartbeatTimeout,
			// The run deadline bounds the step and all its retries together.
			ScheduleToCloseTimeout: left,
			// Rate limits and 5xx are retried with backoff; the adapter marks others non-retryable.
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
				NonRetryableErrorTypes: []string{activities.ErrModel}},
		})
		err := workflow.ExecuteActivity(mctx, a.ModelStep, activities.ModelStepInput{TraceID: r.in.TraceID, Attempt: t.n, Step: step}).Get(ctx, &ms)
		if err != nil {
			if temporal.IsTimeoutError(err) && !workflow.Now(ctx).Before(t.deadline) {
				return models.StopTimeout, end, true
			}
			return "", r.classify(ctx, err), false
		}
		if t.hostStopped {
			return "", t.lostHost(), false
		}
		if ms.Done {
			return models.StopDone, end, true
		}
		err = workflow.ExecuteActivity(t.onHost(max(t.deadline.Sub(workflow.Now(ctx)), time.Second)), a.ToolStep,
			activities.ToolStepInput{TraceID: r.in.TraceID, Attempt: t.n, Step: step, AssistantSeq: ms.Seq}).Get(ctx, nil)
		if t.hostStopped {
			return "", t.lostHost(), false
		}
		if err != nil {
			if isStartToClose(err) && !workflow.Now(ctx).Before(t.deadline) {
				return models.StopTimeout, end, true
			}
			return "", r.classify(ctx, err), false
		}
	}
}

// runAgent runs the try's brought agent on the sandbox's host until it exits, reaches
// max_steps or the deadline; it answers why it stopped, or (not ok) how the try ended without
// evaluation: the agent's failure, the environment's, or a lost host. A brought agent's run is
// one activity: it never hands over to a next run.
func (t *liveTry) runAgent(ctx workflow.Context) (stop string, end ending, ok bool) {
	left := t.deadline.Sub(workflow.Now(ctx))
	if left <= 0 {
		return models.StopTimeout, end, true
	}
	var res activities.RunAgentResult
	// The activity ends the agent at the deadline itself; the minute past it is for stopping it.
	err := workflow.ExecuteActivity(t.onHost(left+time.Minute), a.RunAgent,
		activities.RunAgentInput{TraceID: t.r.in.TraceID, Attempt: t.n, Deadline: t.deadline}).Get(ctx, &res)
	if t.hostStopped {
		return "", t.lostHost(), false
	}
	if err != nil {
		return "", t.r.classify(ctx, err), false
	}
	return res.StopReason, end, true
}

// evaluate scores the try where the sandbox lives; timeouts and step limits evaluate too.
// Evaluate records the outcome and stops the sandbox, whatever it answers.
func (t *liveTry) evaluate(ctx workflow.Context, stop string) ending {
	if t.hostStopped {
		return t.lostHost()
	}
	var ev activities.EvaluateResult
	err := workflow.ExecuteActivity(t.onHost(seconds(t.r.plan.StartupTimeoutS)+time.Minute), a.Evaluate,
		activities.EvaluateInput{TraceID: t.r.in.TraceID, Attempt: t.n, StopReason: stop}).Get(ctx, &ev)
	if err != nil && t.hostStopped {
		// An evaluation that answered has recorded the outcome: only one the stop cut short
		// starts the try again.
		return t.lostHost()
	}
	var appErr *temporal.ApplicationError
	if err == nil || errors.As(err, &appErr) {
		t.tornDown = true
	}
	if err != nil {
		return t.r.classify(ctx, err)
	}
	return ending{fin: activities.FinishTraceInput{Status: cmp.Or(ev.Status, models.TraceCompleted), StopReason: stop, Reward: ev.Reward}, recorded: true}
}

// isStartToClose reports a timeout of a started activity (not a host that never picked it up).
func isStartToClose(err error) bool {
	var te *temporal.TimeoutError
	return errors.As(err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE
}
