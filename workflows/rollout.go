package workflows

import (
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// RolloutInput names the attempt to run; everything else is read by activities from the store.
type RolloutInput struct {
	// TraceID is the attempt's trace; the workflow id is "rollout/<trace id>".
	TraceID uuid.UUID `json:"trace_id"`
	// MaxTries bounds how often an infrastructure failure (sandbox lost, worker died, provision
	// timeout) restarts the attempt in a fresh sandbox. Default 3.
	MaxTries int `json:"max_tries,omitempty"`
	// StepsPerRun is how many agent steps one workflow run holds before it continues as new, so
	// that the history of an attempt of any allowed max_steps stays small. Default
	// DefaultStepsPerRun.
	StepsPerRun int `json:"steps_per_run,omitempty"`
	// Resume carries a live try into the next run after a continue-as-new; nil on the first.
	Resume *RolloutResume `json:"resume,omitempty"`
	// ParentWatches is set by a RunList that learns this attempt's end from the child's
	// completion: the Rollout then signals its end only once told the parent's run moved on
	// (names.SignalParentMoved). Without it (a parent from before, or none) it always signals.
	ParentWatches bool `json:"parent_watches,omitempty"`
	// Revision is the revision of the workflows' code (the constant Revision) the attempt
	// began under. Zero (an attempt from before it, or a starter that leaves it out) reads
	// its changes with workflow.GetVersion.
	Revision int `json:"revision,omitempty"`
}

// RolloutResume is the state of a live try handed from one run of a long attempt to the next.
type RolloutResume struct {
	Plan      activities.PrepareRolloutResult `json:"plan"`
	Try       int                             `json:"try"`
	HostQueue string                          `json:"host_queue"`
	Step      int                             `json:"step"`
	Deadline  time.Time                       `json:"deadline"`
}

// RolloutResult is how the attempt ended.
type RolloutResult struct {
	Status     string   `json:"status"`
	StopReason string   `json:"stop_reason"`
	Reward     *float64 `json:"reward,omitempty"`
}

// DefaultStepsPerRun keeps a run's history near 6,000 events: each step is a ModelStep and a
// ToolStep of about six events each, far below Temporal's limit of 51,200.
const DefaultStepsPerRun = 500

// Timeouts of the sandbox activities that are not set by the task.
const (
	// HostLostTimeout is how long a sandbox activity waits for its host to pick it up, and how
	// long a running one may go without a heartbeat: past it, the host is taken for dead and the
	// try restarts in a fresh sandbox. It is the largest part of the bound on restarting an
	// attempt whose host was killed (see README, "Running it in production").
	HostLostTimeout = 20 * time.Second
	// ModelHeartbeatTimeout is how long a model step may go without a heartbeat (it sends one
	// every 3 s); the SDK sends them at most every 80% of it, so a cancel reaches a step within
	// 8 s, and a step whose worker died is retried on another after it.
	ModelHeartbeatTimeout = 10 * time.Second
	// teardownTimeout bounds stopping a sandbox.
	teardownTimeout = time.Minute
)

// Rollout runs one attempt: plan it → start the environment in a sandbox (on the queue its
// resources pick; the host that takes it answers with its own queue) → the agent loop (ModelStep
// on any worker, ToolStep on the sandbox's host) until the agent is done, max_steps or
// run_timeout_s → Evaluate, which records the reward and stops the sandbox. Teardown runs on
// every other path. An attempt of many steps continues as new every StepsPerRun steps, carrying
// its live sandbox along.
func Rollout(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
	r := &rollout{in: in, log: workflow.GetLogger(ctx), moved: workflow.GetSignalChannel(ctx, names.SignalParentMoved)}
	if r.in.MaxTries <= 0 {
		r.in.MaxTries = 3
	}
	if r.in.StepsPerRun <= 0 {
		r.in.StepsPerRun = DefaultStepsPerRun
	}
	res, err := r.run(ctx)
	// Every sandbox this run started is stopped (or its host given up on) before it ends, on
	// every path, a continue-as-new included.
	r.awaitTeardowns(ctx)
	// Whether the parent still watches is read only now, after the last wait, in the task that
	// closes the run: a parent-moved that came during the teardowns counts.
	if errors.Is(err, errHandOver) {
		return RolloutResult{}, workflow.NewContinueAsNewError(ctx, Rollout, RolloutInput{TraceID: r.in.TraceID, MaxTries: r.in.MaxTries,
			StepsPerRun: r.in.StepsPerRun, Resume: r.handOver, ParentWatches: r.watched(), Revision: Revision})
	}
	if r.untold && !r.watched() {
		r.signalParent(ctx)
	}
	return res, err
}

// errHandOver is how run says the attempt goes on in the next run (see rollout.handOver).
var errHandOver = errors.New("the attempt continues as new")

type rollout struct {
	in RolloutInput
	// moved receives names.SignalParentMoved.
	moved workflow.ReceiveChannel
	plan  activities.PrepareRolloutResult
	log   interface{ Info(string, ...any) }
	// handOver is the live try the next run takes over, once run answered errHandOver.
	handOver *RolloutResume
	// untold: the attempt ended without signalling its parent, which watched its completion;
	// it signals after all should the parent's run move on before this one closes.
	untold bool
	// teardowns are the lost tries' Teardowns still on their way: the next try does not wait
	// for them (a dead host's takes HostLostTimeout to give up on), the workflow's end does.
	teardowns []workflow.Future
}

var a *activities.Activities

// storeActivity is for short database writes, run as local activities on the workflow's worker:
// retried freely, they are idempotent. They are retried through a store outage of any length up
// to storeOutage: without a ScheduleToCloseTimeout the SDK would bound all tries together by the
// 30 s StartToCloseTimeout, and a database that is away for longer (a failover, a restart) would
// fail the workflow and leave its trace (and its job) open for ever.
func storeActivity(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: storeOutage,
		// Past the workflow task timeout (10 s) the SDK waits between tries on a server timer
		// rather than inside one long workflow task, so a long outage costs a few events a minute.
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: time.Minute},
	})
}

// storeOutage is how long the engine's store writes keep being retried: past it an operator has
// long been paged, and the workflow fails rather than retry for ever.
const storeOutage = 24 * time.Hour

// ending is how a try ended: fin to record, or infra set for a failure to retry in a fresh
// sandbox, or next set to continue as new.
type ending struct {
	fin activities.FinishTraceInput
	// recorded: Evaluate already wrote fin.
	recorded bool
	infra    error
	next     error
}

func (r *rollout) run(ctx workflow.Context) (RolloutResult, error) {
	try := 0
	if res := r.in.Resume; res != nil {
		r.plan, try = res.Plan, res.Try
	} else {
		err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.PrepareRollout, activities.PrepareRolloutInput{TraceID: r.in.TraceID}).Get(ctx, &r.plan)
		if err != nil {
			return r.finish(ctx, ending{fin: activities.FinishTraceInput{Status: models.TraceError, StopReason: models.StopError, Error: errorText(err)}})
		}
		if r.plan.Done {
			// Already finished (a launch replayed, or cancelled before it started): nothing to
			// run, and no FinishTrace to tell a RunList parent, so tell it here.
			r.notifyParent(ctx)
			return RolloutResult{Status: r.plan.Status}, nil
		}
		try = r.plan.Attempt + 1
	}
	for ; ; try++ {
		end := r.attempt(ctx, try)
		if end.next != nil {
			return RolloutResult{}, end.next
		}
		if end.infra == nil {
			return r.finish(ctx, end)
		}
		if ctx.Err() != nil {
			return r.cancelled(ctx)
		}
		// The failed try's events stay, marked superseded, and the attempt starts over, unless
		// the try had recorded the outcome before its host was lost (an evaluation that
		// answered, with the answer lost on the way back): that outcome stands.
		var sup activities.SupersedeTryResult
		_ = workflow.ExecuteLocalActivity(storeActivity(ctx), a.SupersedeTry,
			activities.SupersedeTryInput{TraceID: r.in.TraceID, Attempt: try, Reason: end.infra.Error()}).Get(ctx, &sup)
		if sup.Finished {
			r.notifyParent(ctx)
			return RolloutResult{Status: sup.Status, StopReason: sup.StopReason, Reward: sup.Reward}, nil
		}
		if try >= r.in.MaxTries {
			return r.finish(ctx, ending{fin: activities.FinishTraceInput{Status: models.TraceError, StopReason: models.StopError,
				Error: fmt.Sprintf("infrastructure failure on %d tries; last: %v", try, end.infra), Infrastructure: true}})
		}
		r.log.Info("retrying the attempt in a fresh sandbox", "trace", r.in.TraceID, "try", try, "error", end.infra)
	}
}

func (r *rollout) startFailed(ctx workflow.Context, err error) ending {
	if ctx.Err() != nil {
		return ending{infra: ctx.Err()}
	}
	var te *temporal.TimeoutError
	if errors.As(err, &te) && (te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START || te.TimeoutType() == enumspb.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE) {
		return ending{fin: activities.FinishTraceInput{Status: models.TraceError, StopReason: models.StopError, Infrastructure: true,
			Error: fmt.Sprintf("no sandbox host on task queue %s started the environment within startup_timeout_s (%gs): %s",
				r.plan.Queue, r.plan.StartupTimeoutS, errorText(err))}}
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrTraceClosed {
		return ending{fin: activities.FinishTraceInput{Status: models.TraceCancelled, StopReason: models.StopCancelled}}
	}
	return r.classify(ctx, err)
}

// classify turns an activity failure into an infrastructure failure (retry the try), an error of
// the agent or the environment (the attempt ends as error, reward 0), or a model call its job's
// budget refused (cancelled, stop reason budget).
func (r *rollout) classify(ctx workflow.Context, err error) ending {
	if ctx.Err() != nil {
		return ending{infra: ctx.Err()}
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrBudget {
		// The job may spend no more: the attempt stops where it is, unscored (it is not the
		// agent's doing), and a retry of the job runs it again.
		return ending{fin: activities.FinishTraceInput{Status: models.TraceCancelled, StopReason: models.StopBudget, Error: errorText(appErr)}}
	}
	if errors.As(err, &appErr) && (appErr.Type() == activities.ErrEnvironment || appErr.Type() == activities.ErrModel || appErr.Type() == activities.ErrAgent) {
		zero := 0.0
		return ending{fin: activities.FinishTraceInput{Status: models.TraceError, StopReason: models.StopError, Error: errorText(appErr), Reward: &zero}}
	}
	// Timeouts (a host that stopped heartbeating or never picked the task up), a lost sandbox.
	return ending{infra: err}
}

func (r *rollout) finish(ctx workflow.Context, end ending) (RolloutResult, error) {
	if ctx.Err() != nil {
		return r.cancelled(ctx)
	}
	fin := end.fin
	fin.TraceID = r.in.TraceID
	if !end.recorded {
		if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.FinishTrace, fin).Get(ctx, nil); err != nil {
			return RolloutResult{}, err
		}
	}
	r.tellParent(ctx)
	return RolloutResult{Status: fin.Status, StopReason: fin.StopReason, Reward: fin.Reward}, nil
}

// awaitTeardowns waits, past a cancel, for the lost tries' teardowns still on their way.
func (r *rollout) awaitTeardowns(ctx workflow.Context) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	for _, f := range r.teardowns {
		_ = f.Get(dctx, nil)
	}
	r.teardowns = nil
}

func (r *rollout) cancelled(ctx workflow.Context) (RolloutResult, error) {
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	// A cancelled attempt reads cancelled once every sandbox it started is stopped, a lost try's
	// included.
	r.awaitTeardowns(ctx)
	fin := activities.FinishTraceInput{TraceID: r.in.TraceID, Status: models.TraceCancelled, StopReason: models.StopCancelled}
	if err := workflow.ExecuteLocalActivity(storeActivity(dctx), a.FinishTrace, fin).Get(dctx, nil); err != nil {
		return RolloutResult{}, err
	}
	r.tellParent(dctx)
	return RolloutResult{Status: fin.Status, StopReason: fin.StopReason}, temporal.NewCanceledError()
}

// tellParent tells a RunList parent that this attempt ended, once its outcome is recorded: the
// one place the parent hears it from (histories from before this version had FinishTrace signal
// the parent instead, and replay them without a signal here).
func (r *rollout) tellParent(ctx workflow.Context) {
	if r.in.Revision < 1 && workflow.GetVersion(ctx, "rollout-tells-parent", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return
	}
	r.notifyParent(ctx)
}

// notifyParent tells a RunList parent that this attempt ended (best effort: the parent
// reconciles its live set with the store if a signal is lost). A parent that watches the
// child's completion is not told while its run still does (see Rollout for the last look, and
// the server refuses to close a workflow that has a signal it has not seen): a signal that
// reaches a closed run is dropped.
func (r *rollout) notifyParent(ctx workflow.Context) {
	if r.watched() {
		r.untold = true
		return
	}
	r.signalParent(ctx)
}

// signalParent sends names.SignalRolloutDone to the parent's current run, if there is a parent.
func (r *rollout) signalParent(ctx workflow.Context) {
	parent := workflow.GetInfo(ctx).ParentWorkflowExecution
	if parent == nil {
		return
	}
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	// The empty run id reaches the parent's current run, across its continue-as-new.
	_ = workflow.SignalExternalWorkflow(dctx, parent.ID, "", names.SignalRolloutDone, r.in.TraceID).Get(dctx, nil)
}

// watched reports whether the run of the parent that started this attempt still watches its
// completion: it said so, and has not said since that it moved on.
func (r *rollout) watched() bool {
	for r.moved.ReceiveAsync(nil) {
		r.in.ParentWatches = false
	}
	return r.in.ParentWatches
}

// errorText is an activity error's own message, as people read it: without the SDK's wrapping
// ("(type: ModelError, retryable: false)") and the chain of causes, which the worker's log
// keeps. Proctor's activities put what the reader needs in the message itself.
func errorText(err error) string {
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) {
		if m := appErr.Message(); m != "" {
			return m
		}
		return appErr.Error()
	}
	if u := errors.Unwrap(err); u != nil {
		return u.Error()
	}
	return err.Error()
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
