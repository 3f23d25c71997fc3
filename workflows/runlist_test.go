package workflows

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// fakeJob is a job's store as RunList sees it: its traces in launch order, the pages read, the
// statuses written.
type fakeJob struct {
	mu       sync.Mutex
	traces   []uuid.UUID
	pages    []activities.JobTracesPageInput
	statuses []string
	// cancelledPending counts CancelPendingTraces calls.
	cancelledPending int
	// open, when set, answers OpenTraces (by default every trace asked about is open).
	open func(ids []uuid.UUID) []uuid.UUID
	// reconciles counts OpenTraces calls.
	reconciles int
	// paused, when set, answers AdmitJob (by default the job may start attempts); admits counts
	// its calls.
	paused func() bool
	admits int
	// noCeiling answers AdmitJob that the job has no ceiling.
	noCeiling bool
	// gone are the attempts whose Rollouts are no longer running (EndVanished ends those still
	// open); askedVanished are the attempts EndVanished was asked about, endedVanished those it
	// ended.
	gone          map[uuid.UUID]bool
	askedVanished []uuid.UUID
	endedVanished []uuid.UUID
}

func newFakeJob(n int) *fakeJob {
	j := &fakeJob{}
	for range n {
		j.traces = append(j.traces, uuid.New())
	}
	return j
}

func (j *fakeJob) register(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(a.JobTracesPage, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.JobTracesPageInput) (activities.JobTracesPageResult, error) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.pages = append(j.pages, in)
			from, to := min(in.Offset, len(j.traces)), min(in.Offset+in.Limit, len(j.traces))
			return activities.JobTracesPageResult{TraceIDs: append([]uuid.UUID{}, j.traces[from:to]...)}, nil
		})
	env.OnActivity(a.SetJobStatus, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.SetJobStatusInput) error {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.statuses = append(j.statuses, in.Status)
			return nil
		})
	env.OnActivity(a.CancelPendingTraces, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.JobInput) error {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.cancelledPending++
			return nil
		})
	env.OnActivity(a.AdmitJob, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.JobInput) (activities.AdmitJobResult, error) {
			j.mu.Lock()
			j.admits++
			j.mu.Unlock()
			return activities.AdmitJobResult{Paused: j.paused != nil && j.paused(), NoCeiling: j.noCeiling}, nil
		})
	openOf := func(ids []uuid.UUID) []uuid.UUID {
		j.mu.Lock()
		j.reconciles++
		j.mu.Unlock()
		if j.open != nil {
			return j.open(ids)
		}
		return ids
	}
	env.OnActivity(a.OpenTraces, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.OpenTracesInput) (activities.OpenTracesResult, error) {
			return activities.OpenTracesResult{TraceIDs: openOf(in.TraceIDs)}, nil
		}).Maybe()
	// EndVanished, as the worker answers it: the traces closed, and those it ends because their
	// Rollouts are gone (j.gone) while they read open.
	env.OnActivity(a.EndVanished, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EndVanishedInput) (activities.EndVanishedResult, error) {
			still := map[uuid.UUID]bool{}
			if len(in.TraceIDs) > 0 {
				for _, id := range openOf(in.TraceIDs) {
					still[id] = true
				}
			}
			j.mu.Lock()
			defer j.mu.Unlock()
			j.askedVanished = append(j.askedVanished, in.TraceIDs...)
			res := activities.EndVanishedResult{Ended: []uuid.UUID{}}
			for _, id := range in.TraceIDs {
				switch {
				case !still[id]:
					res.Ended = append(res.Ended, id)
				case j.gone[id]:
					j.endedVanished = append(j.endedVanished, id)
					res.Ended, res.Vanished = append(res.Ended, id), append(res.Vanished, id)
				}
			}
			return res, nil
		}).Maybe()
}

// runListEnv runs RunList over a job whose attempts are real Rollout children with scripted
// activities (each model step takes a second of the test clock); each child signals the run when
// it ends, as in production.
func runListEnv(f *fakeEngine, j *fakeJob) *testsuite.TestWorkflowEnvironment {
	env := newTestEnv()
	f.toolDelay = time.Second
	f.register(env)
	j.register(env)
	env.RegisterWorkflow(Rollout)
	// A RunList that is cancelled asks each attempt it still counts live to cancel; one that
	// ended a moment before (its end not yet read) is no running child any more, and the test
	// suite asks its mock about such a target, panicking without one. The server answers that
	// the workflow is not running, which cancelAll ignores: so does this mock.
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, mock.Anything).Return(errors.New("workflow not running")).Maybe()
	// So is a run that continues as new and tells its live attempts so: one that ended is no
	// running child, and the server answers that it is not found.
	env.OnSignalExternalWorkflow(mock.Anything, mock.Anything, mock.Anything, names.SignalParentMoved, mock.Anything).
		Return(&temporal.UnknownExternalWorkflowExecutionError{}).Maybe()
	return env
}

func TestRunListRunsEveryTraceAtMostMaxConcurrentAtOnce(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(7)
	env := runListEnv(f, j)
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 3, PageSize: 2})
	var res RunListResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Started != 7 || f.count("Evaluate") != 7 {
		t.Fatalf("started %d, evaluated %d, want 7", res.Started, f.count("Evaluate"))
	}
	if f.most > 3 || f.most < 2 {
		t.Errorf("%d attempts were live at once, want up to max_concurrent 3", f.most)
	}
	// Pages of two, read as needed: offsets 0, 2, 4, 6 (the last one short).
	if len(j.pages) != 4 || j.pages[3].Offset != 6 {
		t.Errorf("pages read: %+v", j.pages)
	}
	if len(j.statuses) != 2 || j.statuses[0] != models.JobRunning || j.statuses[1] != models.JobCompleted {
		t.Errorf("job statuses = %v, want running then completed", j.statuses)
	}
	// Each Rollout told the run it ended, once its outcome was recorded: the run never had to
	// ask the store which attempts were still open.
	if j.reconciles != 0 {
		t.Errorf("the run reconciled %d times: the attempts' signals did not free their slots", j.reconciles)
	}
}

// TestRunListHealsALostSignalWhileAttemptsKeepEnding: one attempt's end never reaches the run (an
// attempt that a previous run handed over as live, whose signal was lost), while the others keep
// ending every few seconds. The reconcile still comes a minute after the first wait, not after a
// whole quiet minute that a busy job never has, and the lost attempt's slot is free again while
// the job still runs.
func TestRunListHealsALostSignalWhileAttemptsKeepEnding(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(50)
	env := runListEnv(f, j)
	lost := uuid.New()
	var mu sync.Mutex
	ended := map[uuid.UUID]bool{lost: true}
	reconciledAt := -1
	f.onFinish = func(id uuid.UUID) {
		mu.Lock()
		ended[id] = true
		mu.Unlock()
	}
	j.open = func(ids []uuid.UUID) []uuid.UUID {
		mu.Lock()
		defer mu.Unlock()
		if reconciledAt < 0 {
			reconciledAt = len(ended) - 1
		}
		var open []uuid.UUID
		for _, id := range ids {
			if !ended[id] {
				open = append(open, id)
			}
		}
		return open
	}
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2, Live: []uuid.UUID{lost}})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.count("Evaluate") != 50 {
		t.Fatalf("evaluated %d, want 50", f.count("Evaluate"))
	}
	// Attempts take about 2 s of the test clock each; one slot runs them 50 × 2 s = 100 s.
	if reconciledAt < 0 || reconciledAt >= 50 {
		t.Errorf("the first reconcile came after %d of 50 attempts had ended: a lost signal held its slot until the job went quiet", reconciledAt)
	}
}

func TestRunListContinuesAsNewWithItsLiveAttempts(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(10)
	env := runListEnv(f, j)
	in := RunListInput{JobID: uuid.New(), MaxConcurrent: 2, PageSize: 3, ChildrenPerRun: 4}
	env.ExecuteWorkflow(RunList, in)
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow error = %v, want continue-as-new", err)
	}
	var next RunListInput
	if err := decodeArgs(can, &next); err != nil {
		t.Fatal(err)
	}
	if next.Started != 4 || next.JobID != in.JobID || next.MaxConcurrent != 2 || next.ChildrenPerRun != 4 || len(next.Live) > 1 ||
		next.Revision != Revision {
		t.Fatalf("next run's input = %+v", next)
	}
	for _, id := range next.Live {
		if !slices.Contains(j.traces[:4], id) {
			t.Errorf("live attempt %s is not one of the four this run started", id)
		}
	}

	// The next run reads on from offset 4 and does not set the job running again.
	g, k := newFakeEngine(), &fakeJob{traces: j.traces}
	env = runListEnv(g, k)
	env.ExecuteWorkflow(RunList, next)
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("second run: %v, want continue-as-new", err)
	}
	if len(k.pages) == 0 || k.pages[0].Offset != 4 || len(k.statuses) != 0 {
		t.Errorf("second run read pages %+v and wrote statuses %v", k.pages, k.statuses)
	}
}

func TestRunListLastRunCompletesTheJob(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(10)
	env := runListEnv(f, j)
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2, PageSize: 3, ChildrenPerRun: 4, Started: 8})
	var res RunListResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Started != 10 || f.count("StartEnvironment") != 2 || len(j.statuses) != 1 || j.statuses[0] != models.JobCompleted {
		t.Fatalf("res %+v, calls %v, statuses %v", res, f.calls, j.statuses)
	}
}

func TestRunListCancelCancelsLiveAttemptsAndPendingTraces(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(20)
	env := runListEnv(f, j)
	// Each attempt blocks at its third model step; once all four are there the run list is
	// cancelled (the cancel is queued before the steps are released, so it is seen first).
	var mu sync.Mutex
	blocked := 0
	release := make(chan struct{})
	f.modelStep = func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
		if in.Step == 2 {
			mu.Lock()
			blocked++
			if blocked == 4 {
				env.CancelWorkflow()
				close(release)
			}
			mu.Unlock()
			<-release
		}
		return neverDone(in)
	}
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 4})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); err != nil && !errors.As(err, &canceled) {
		t.Fatalf("workflow error = %v", err)
	}
	if f.count("StartEnvironment") != 4 || f.most != 4 {
		t.Errorf("%d attempts started, %d at once; want max_concurrent 4", f.count("StartEnvironment"), f.most)
	}
	if f.count("Teardown") != 4 || f.count("Evaluate") != 0 {
		t.Errorf("calls = %v: want every live attempt torn down, none evaluated", f.calls)
	}
	cancelled := 0
	for _, fin := range f.finished {
		if fin.Status == models.TraceCancelled {
			cancelled++
		}
	}
	if cancelled != 4 || j.cancelledPending != 1 {
		t.Errorf("%d attempts recorded cancelled, pending cancelled %d times", cancelled, j.cancelledPending)
	}
	if last := j.statuses[len(j.statuses)-1]; last != models.JobCancelled {
		t.Errorf("job statuses %v, want cancelled last", j.statuses)
	}
}

// budgetJob is a job of six attempts, two at once, whose budget is reached as its third attempt
// starts: the attempts live then (one or two, as the test clock falls) stop at their next model
// step (ErrBudget), and AdmitJob pauses the job until resume is called.
type budgetJob struct {
	f       *fakeEngine
	j       *fakeJob
	env     *testsuite.TestWorkflowEnvironment
	mu      sync.Mutex
	reached bool
	resumed bool
}

func newBudgetJob() *budgetJob {
	b := &budgetJob{f: newFakeEngine(), j: newFakeJob(6)}
	b.env = runListEnv(b.f, b.j)
	start, step := b.f.start, b.f.modelStep
	b.f.start = func(in activities.StartEnvironmentInput) (activities.StartEnvironmentResult, error) {
		// Starts run concurrently: the count may have moved past 3 when this one looks.
		if b.f.count("StartEnvironment") >= 3 {
			b.mu.Lock()
			b.reached = b.reached || !b.resumed
			b.mu.Unlock()
		}
		return start(in)
	}
	b.f.modelStep = func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
		if b.isReached() {
			return activities.ModelStepResult{}, temporal.NewNonRetryableApplicationError("job has spent $1 of its max_cost_usd $1", activities.ErrBudget, nil)
		}
		return step(in)
	}
	b.j.paused = b.isReached
	return b
}

func (b *budgetJob) isReached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reached
}

// resume raises the ceiling after a while (the store's side of a resume), and signals the run
// when signal is set.
func (b *budgetJob) resume(after time.Duration, signal bool) {
	b.env.RegisterDelayedCallback(func() {
		b.mu.Lock()
		b.reached, b.resumed = false, true
		b.mu.Unlock()
		if signal {
			b.env.SignalWorkflow(names.SignalJobResumed, nil)
		}
	}, after)
}

// check asserts that every attempt ran once: those live at the pause stopped unscored with stop
// reason budget, the others were evaluated, and the job completed.
func (b *budgetJob) check(t *testing.T) {
	t.Helper()
	if err := b.env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	f := b.f
	stoppedN := len(f.finished)
	if f.count("PrepareRollout") != 6 || f.count("StartEnvironment") != 6 || stoppedN < 1 || stoppedN > 2 || f.count("Evaluate") != 6-stoppedN {
		t.Fatalf("calls %v: want each of the 6 attempts started once, those live at the pause (1 or 2) stopped, the others evaluated", f.calls)
	}
	stopped := map[uuid.UUID]bool{}
	for _, fin := range f.finished {
		if fin.Status != models.TraceCancelled || fin.StopReason != models.StopBudget || fin.Reward != nil || !strings.Contains(fin.Error, "max_cost_usd") {
			t.Errorf("finished %+v: want cancelled, stop reason budget, no reward, the budget's message", fin)
		}
		stopped[fin.TraceID] = true
	}
	if len(stopped) != stoppedN || f.count("Teardown") != stoppedN {
		t.Errorf("finished %+v, teardowns %d: want each attempt live at the pause stopped once and torn down", f.finished, f.count("Teardown"))
	}
	for _, ev := range f.evaluated {
		if stopped[ev.TraceID] {
			t.Errorf("attempt %s was stopped by the budget and evaluated too", ev.TraceID)
		}
	}
	if !slices.Equal(b.j.statuses, []string{models.JobRunning, models.JobCompleted}) {
		t.Errorf("job statuses %v, want running then completed (AdmitJob writes paused)", b.j.statuses)
	}
}

// TestRunListPausesAtItsBudgetAndAResumeGoesOnAtOnce: a job whose budget is reached starts no
// attempt while paused, and a resume's signal starts the rest at once, running nothing twice.
func TestRunListPausesAtItsBudgetAndAResumeGoesOnAtOnce(t *testing.T) {
	b := newBudgetJob()
	b.resume(7*time.Minute, true)
	begin := b.env.Now()
	b.env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2})
	b.check(t)
	// Attempts of about 2 s each after the 7 minutes paused: not the next check's 10 minutes.
	if took := b.env.Now().Sub(begin); took < 7*time.Minute || took > 8*time.Minute {
		t.Errorf("the job took %s of the test clock: the resume's signal did not wake the paused run", took)
	}
}

// TestRunListPausedRechecksItsBudgetWithoutASignal: a resume whose signal was lost (an outage
// between the store's write and the signal) is found by the paused run's next check.
func TestRunListPausedRechecksItsBudgetWithoutASignal(t *testing.T) {
	b := newBudgetJob()
	b.resume(7*time.Minute, false)
	begin := b.env.Now()
	b.env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2})
	b.check(t)
	// Paused at about 2 s, checked at 5 min and 10 min: the second check finds the resume.
	if took := b.env.Now().Sub(begin); took < 2*pausedRecheck || took > 2*pausedRecheck+time.Minute {
		t.Errorf("the job took %s of the test clock, want its second paused check (%s) to find the resume", took, 2*pausedRecheck)
	}
}

// TestRunListAsksAdmissionOnlyWhenItWouldStartAnAttempt: a run asks the store for admission once
// per attempt it could start, and never while its slots are full or nothing is left to start; of
// a job with no ceiling, once.
func TestRunListAsksAdmissionOnlyWhenItWouldStartAnAttempt(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(5)
	env := runListEnv(f, j)
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if j.admits != 5 || f.count("Evaluate") != 5 {
		t.Errorf("%d admissions for 5 attempts run one at a time (calls %v), want 5", j.admits, f.calls)
	}
	// A job with no ceiling is asked once: it never gets one.
	f, j = newFakeEngine(), newFakeJob(5)
	j.noCeiling = true
	env = runListEnv(f, j)
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 1})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if j.admits != 1 || f.count("Evaluate") != 5 {
		t.Errorf("%d admissions for a job with no ceiling (calls %v), want 1", j.admits, f.calls)
	}
}

// watchingParent starts one attempt as a RunList does (it watches the child's completion) and
// waits for its end, telling it tellAfter in (never when negative) that its run moved on. It
// answers whether the attempt signalled its end.
func watchingParent(ctx workflow.Context, traceID uuid.UUID, tellAfter time.Duration) (bool, error) {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: names.RolloutWorkflowID(traceID), TaskQueue: names.QueueWorkflows})
	child := workflow.ExecuteChildWorkflow(cctx, Rollout, RolloutInput{TraceID: traceID, ParentWatches: true})
	if err := child.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		return false, err
	}
	if tellAfter >= 0 {
		if err := workflow.Sleep(ctx, tellAfter); err != nil {
			return false, err
		}
		if err := workflow.SignalExternalWorkflow(ctx, names.RolloutWorkflowID(traceID), "", names.SignalParentMoved, nil).Get(ctx, nil); err != nil {
			return false, err
		}
	}
	if err := child.Get(ctx, nil); err != nil {
		return false, err
	}
	var id uuid.UUID
	return workflow.GetSignalChannel(ctx, names.SignalRolloutDone).ReceiveAsync(&id) && id == traceID, nil
}

// watched runs one attempt of f under a watchingParent.
func watched(t *testing.T, f *fakeEngine, tellAfter time.Duration, during ...func(*testsuite.TestWorkflowEnvironment)) bool {
	t.Helper()
	env := newTestEnv()
	f.register(env)
	env.RegisterWorkflow(Rollout)
	env.RegisterWorkflow(watchingParent)
	for _, d := range during {
		d(env)
	}
	env.ExecuteWorkflow(watchingParent, uuid.New(), tellAfter)
	var signalled bool
	if err := env.GetWorkflowResult(&signalled); err != nil {
		t.Fatal(err)
	}
	return signalled
}

// An attempt whose parent watches its completion does not also signal its end (one event and
// one workflow task fewer on each side), unless the parent's run moved on: then the signal is
// how the next run hears of it.
func TestAWatchedAttemptSignalsItsEndOnlyOnceItsParentMovedOn(t *testing.T) {
	for _, tell := range []bool{false, true} {
		f := newFakeEngine()
		f.toolDelay = time.Second
		tellAfter := time.Duration(-1)
		if tell {
			tellAfter = 0
		}
		if signalled := watched(t, f, tellAfter); signalled != tell || f.count("Evaluate") != 1 {
			t.Errorf("told the parent moved on: %v; the attempt signalled its end: %v (evaluated %d times)", tell, signalled, f.count("Evaluate"))
		}
	}
}

// The parent's run moves on after the attempt was evaluated, while the attempt still waits for a
// lost try's teardown: the attempt signals all the same, for it decides only as it closes.
func TestAWatchedAttemptToldWhileItAwaitsATeardownSignals(t *testing.T) {
	f := newFakeEngine()
	f.teardownDelay = HostLostTimeout
	var env *testsuite.TestWorkflowEnvironment
	var evaluatedAt time.Time
	f.toolStep = func(in activities.ToolStepInput) error {
		if in.Attempt == 1 {
			return errors.New("activity Heartbeat timeout")
		}
		return nil
	}
	f.evaluate = func(activities.EvaluateInput) (activities.EvaluateResult, error) {
		evaluatedAt = env.Now()
		one := 1.0
		return activities.EvaluateResult{Reward: &one}, nil
	}
	start := time.Time{}
	signalled := watched(t, f, HostLostTimeout/2, func(e *testsuite.TestWorkflowEnvironment) { env, start = e, e.Now() })
	if evaluatedAt.IsZero() || evaluatedAt.Sub(start) >= HostLostTimeout/2 {
		t.Fatalf("evaluated %s after the start: the tell did not come while the teardown was awaited", evaluatedAt.Sub(start))
	}
	if !signalled || f.count("Teardown") != 1 {
		t.Errorf("signalled %v, teardowns %d: want the end signalled to the moved parent", signalled, f.count("Teardown"))
	}
}

// One reconcile timer serves every wait until it fires: a job whose attempts all end within
// reconcileEvery schedules one, however many times the run waits.
func TestRunListKeepsOneReconcileTimerAcrossWaits(t *testing.T) {
	f, j := newFakeEngine(), newFakeJob(20)
	env := runListEnv(f, j)
	var mu sync.Mutex
	var timers []time.Duration
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d > reconcileEvery/2 && d <= reconcileEvery { // the reconcile's (attempts set none)
			timers = append(timers, d)
		}
	})
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 4})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.count("Evaluate") != 20 {
		t.Fatalf("evaluated %d of 20", f.count("Evaluate"))
	}
	if len(timers) != 1 {
		t.Errorf("reconcile timers scheduled: %v, want one", timers)
	}
}
