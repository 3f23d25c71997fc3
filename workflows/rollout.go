package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

// RolloutInput names the attempt to run; everything else is read by activities from the store.
type RolloutInput struct {
	// TraceID is the attempt's trace; the workflow id is "rollout/<trace id>".
	TraceID uuid.UUID `json:"trace_id"`
	// MaxTries bounds how often an infrastructure failure (sandbox lost, worker died, provision
	// timeout) restarts the attempt in a fresh sandbox. Default 3.
	MaxTries int `json:"max_tries,omitempty"`
}

// RolloutResult is how the attempt ended.
type RolloutResult struct {
	Status     string   `json:"status"`
	StopReason string   `json:"stop_reason"`
	Reward     *float64 `json:"reward,omitempty"`
}

// RolloutWorkflowID is the workflow id of an attempt.
func RolloutWorkflowID(traceID uuid.UUID) string { return "rollout/" + traceID.String() }

// Rollout runs one attempt: provision a sandbox → start the environment and initialize it → run
// the task's setup → the agent loop (ModelStep on any worker, ToolStep in the sandbox) until the
// agent is done, max_steps or run_timeout_s → evaluate → reward → teardown. The sandbox activities
// run in a Temporal session, pinned to the host that holds the sandbox.
func Rollout(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
	r := &rollout{in: in, log: workflow.GetLogger(ctx)}
	if r.in.MaxTries <= 0 {
		r.in.MaxTries = 3
	}
	return r.run(ctx)
}

type rollout struct {
	in   RolloutInput
	plan activities.RolloutPlan
	log  interface{ Info(string, ...any) }
}

var a *activities.Activities

// storeActivity is for short database activities: retried freely, they are idempotent.
func storeActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           activities.QueueWorkflows,
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 10 * time.Second},
	})
}

func (r *rollout) run(ctx workflow.Context) (RolloutResult, error) {
	if err := workflow.ExecuteActivity(storeActivity(ctx), a.PrepareRollout, r.in.TraceID).Get(ctx, &r.plan); err != nil {
		return r.finish(ctx, activities.FinishTrace{TraceID: r.in.TraceID, Status: "error", StopReason: "error", Error: err.Error()})
	}
	if r.plan.Done {
		// Already finished (a launch replayed): nothing to run.
		return RolloutResult{Status: r.plan.Status}, nil
	}
	for try := r.plan.Attempt + 1; ; try++ {
		fin, infra := r.attempt(ctx, try)
		if infra == nil {
			return r.finish(ctx, fin)
		}
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		// The failed try's events stay, marked superseded, and the attempt starts over.
		sctx := storeActivity(ctx)
		_ = workflow.ExecuteActivity(sctx, a.SupersedeTry, activities.TryRef{TraceID: r.in.TraceID, Attempt: try, Reason: infra.Error()}).Get(ctx, nil)
		if try >= r.in.MaxTries {
			return r.finish(ctx, activities.FinishTrace{TraceID: r.in.TraceID, Status: "error", StopReason: "error",
				Error: fmt.Sprintf("infrastructure failure on %d tries; last: %v", try, infra)})
		}
		r.log.Info("retrying the attempt in a fresh sandbox", "trace", r.in.TraceID, "try", try, "error", infra)
	}
}

// attempt runs one try in one sandbox. A non-nil infra error means the try should be retried in
// a fresh sandbox; otherwise fin says how the attempt ended.
func (r *rollout) attempt(ctx workflow.Context, try int) (fin activities.FinishTrace, infra error) {
	fin = activities.FinishTrace{TraceID: r.in.TraceID}
	startup := time.Duration(r.plan.StartupTimeoutS * float64(time.Second))
	runFor := time.Duration(r.plan.RunTimeoutS * float64(time.Second))

	qctx := workflow.WithTaskQueue(ctx, r.plan.Queue)
	sess, err := workflow.CreateSession(qctx, &workflow.SessionOptions{
		// No host of the queue (e.g. no GPU worker of that type) within startup_timeout_s ends the
		// attempt with a clear error instead of waiting forever.
		CreationTimeout:  startup,
		ExecutionTimeout: startup + runFor + 5*time.Minute,
		HeartbeatTimeout: 20 * time.Second,
	})
	if err != nil {
		if ctx.Err() != nil {
			return fin, ctx.Err()
		}
		fin.Status, fin.StopReason = "error", "error"
		fin.Error = fmt.Sprintf("no sandbox host on task queue %s within startup_timeout_s (%s): %v", r.plan.Queue, startup, err)
		return fin, nil
	}
	defer workflow.CompleteSession(sess)

	// Teardown runs on every path, cancel included, in a context that outlives cancellation.
	defer func() {
		dctx, _ := workflow.NewDisconnectedContext(sess)
		tctx := workflow.WithActivityOptions(dctx, workflow.ActivityOptions{
			StartToCloseTimeout: time.Minute,
			RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
		})
		_ = workflow.ExecuteActivity(tctx, a.Teardown, activities.TryRef{TraceID: r.in.TraceID, Attempt: try}).Get(dctx, nil)
	}()

	sandboxCtx := func(timeout time.Duration) workflow.Context {
		return workflow.WithActivityOptions(sess, workflow.ActivityOptions{
			StartToCloseTimeout: timeout,
			HeartbeatTimeout:    20 * time.Second,
			// A sandbox activity is not retried on its own: its state lives in the sandbox, and a
			// lost sandbox restarts the whole try.
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
		})
	}

	var started activities.Started
	err = workflow.ExecuteActivity(sandboxCtx(startup+30*time.Second), a.StartEnvironment, activities.TryRef{TraceID: r.in.TraceID, Attempt: try}).Get(ctx, &started)
	if err != nil {
		return r.classify(ctx, err, fin)
	}
	deadline := workflow.Now(ctx).Add(runFor)

	stop := "done"
	for step := 0; ; step++ {
		if step >= r.plan.MaxSteps {
			stop = "max_steps"
			break
		}
		left := deadline.Sub(workflow.Now(ctx))
		if left <= 0 {
			stop = "timeout"
			break
		}
		var ms activities.ModelStepResult
		mctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue:           activities.QueueWorkflows,
			StartToCloseTimeout: min(left, 10*time.Minute),
			// The run deadline bounds the step and all its retries together.
			ScheduleToCloseTimeout: left,
			// Rate limits and 5xx are retried with backoff; the adapter marks others non-retryable.
			RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
				NonRetryableErrorTypes: []string{activities.ErrModel}},
		})
		if err := workflow.ExecuteActivity(mctx, a.ModelStep, activities.StepRef{TraceID: r.in.TraceID, Attempt: try, Step: step}).Get(ctx, &ms); err != nil {
			if temporal.IsTimeoutError(err) && workflow.Now(ctx).After(deadline) {
				stop = "timeout"
				break
			}
			return r.classify(ctx, err, fin)
		}
		if ms.Done {
			break
		}
		err := workflow.ExecuteActivity(sandboxCtx(max(deadline.Sub(workflow.Now(ctx)), time.Second)), a.ToolStep,
			activities.StepRef{TraceID: r.in.TraceID, Attempt: try, Step: step}).Get(ctx, nil)
		if err != nil {
			if temporal.IsTimeoutError(err) && workflow.Now(ctx).After(deadline) {
				stop = "timeout"
				break
			}
			return r.classify(ctx, err, fin)
		}
	}
	if ctx.Err() != nil {
		return fin, ctx.Err()
	}

	// Timeouts and step limits still evaluate, where the sandbox lives.
	var ev activities.Evaluation
	if err := workflow.ExecuteActivity(sandboxCtx(startup+time.Minute), a.Evaluate, activities.TryRef{TraceID: r.in.TraceID, Attempt: try}).Get(ctx, &ev); err != nil {
		return r.classify(ctx, err, fin)
	}
	fin.Status, fin.StopReason, fin.Reward, fin.EvaluationResult, fin.Error = "completed", stop, ev.Reward, ev.Result, ev.Error
	return fin, nil
}

// classify turns an activity failure into an infrastructure failure (retry the try) or an
// error of the agent or the environment (the attempt ends as error, reward 0).
func (r *rollout) classify(ctx workflow.Context, err error, fin activities.FinishTrace) (activities.FinishTrace, error) {
	if ctx.Err() != nil {
		return fin, ctx.Err()
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && (appErr.Type() == activities.ErrEnvironment || appErr.Type() == activities.ErrModel) {
		fin.Status, fin.StopReason, fin.Error = "error", "error", appErr.Error()
		zero := 0.0
		fin.Reward = &zero
		return fin, nil
	}
	// Timeouts (a worker that stopped heartbeating), a failed session, a lost sandbox.
	return fin, err
}

func (r *rollout) finish(ctx workflow.Context, fin activities.FinishTrace) (RolloutResult, error) {
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	fin.TraceID = r.in.TraceID
	if err := workflow.ExecuteActivity(storeActivity(ctx), a.FinishTrace, fin).Get(ctx, nil); err != nil {
		return RolloutResult{}, err
	}
	return RolloutResult{Status: fin.Status, StopReason: fin.StopReason, Reward: fin.Reward}, nil
}

func (r *rollout) cancelled(ctx workflow.Context) (RolloutResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	fin := activities.FinishTrace{TraceID: r.in.TraceID, Status: "cancelled", StopReason: "cancelled"}
	if err := workflow.ExecuteActivity(storeActivity(dctx), a.FinishTrace, fin).Get(dctx, nil); err != nil {
		return RolloutResult{}, err
	}
	return RolloutResult{Status: fin.Status, StopReason: fin.StopReason}, temporal.NewCanceledError()
}
