package workflows

import (
	"errors"
	"slices"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// RunListInput names the job whose traces to run, and where an earlier run of the workflow left
// off.
type RunListInput struct {
	JobID uuid.UUID `json:"job_id"`
	// MaxConcurrent bounds the attempts live at once.
	MaxConcurrent int `json:"max_concurrent"`
	// MaxTries is each attempt's RolloutInput.MaxTries.
	MaxTries int `json:"max_tries,omitempty"`
	// StepsPerRun is each attempt's RolloutInput.StepsPerRun.
	StepsPerRun int `json:"steps_per_run,omitempty"`
	// PageSize is how many trace ids one store read loads. Default 500.
	PageSize int `json:"page_size,omitempty"`
	// ChildrenPerRun is how many attempts one run starts before it continues as new, which
	// keeps its history bounded (about 10 events per child, and one more for the admission of a
	// job with a ceiling: about 5,500 events a run, near half Temporal's warning threshold).
	// Default 500.
	ChildrenPerRun int `json:"children_per_run,omitempty"`
	// Started counts the job's traces started by earlier runs: the next one is at this offset
	// in launch order.
	Started int `json:"started,omitempty"`
	// Live are the attempts earlier runs started that had not ended.
	Live []uuid.UUID `json:"live,omitempty"`
	// Revision is the revision of the workflows' code (the constant Revision) the run
	// began under. Zero (a run from before it, or a starter that leaves it out) reads its
	// changes with workflow.GetVersion.
	Revision int `json:"revision,omitempty"`
}

// RunListResult counts the attempts started.
type RunListResult struct {
	Started int `json:"started"`
}

// reconcileEvery is how often RunList checks its live set against the store while it waits.
const reconcileEvery = time.Minute

// RunList runs every trace of a job as a child Rollout, at most MaxConcurrent at once, reading
// the traces a page at a time and continuing as new every ChildrenPerRun children, so a job of
// any size runs with bounded histories. Children are abandoned rather than owned (they outlive
// a continue-as-new). A run learns of the ends of the children it started from their
// completion, and of those an earlier run started from names.SignalRolloutDone, which each
// sends once told that run moved on (see moveOn). Cancelling the workflow
// (CancelJob) cancels every live child and marks the traces that never started cancelled.
func RunList(ctx workflow.Context, in RunListInput) (RunListResult, error) {
	if in.MaxConcurrent <= 0 {
		in.MaxConcurrent = 1
	}
	if in.PageSize <= 0 {
		in.PageSize = 500
	}
	if in.ChildrenPerRun <= 0 {
		in.ChildrenPerRun = 500
	}
	l := &runList{in: in, live: map[uuid.UUID]bool{}, done: workflow.GetSignalChannel(ctx, names.SignalRolloutDone),
		resumed: workflow.GetSignalChannel(ctx, names.SignalJobResumed)}
	// Runs that began before the reconcile schedule was kept across waits replay as they ran, and
	// those that began before jobs had budgets never ask for admission. A run of Revision 1 or
	// later has all four changes without asking; one from before asks for the four versions, in
	// the order it always did.
	rev := in.Revision >= 1
	l.keptSchedule = rev || workflow.GetVersion(ctx, "reconcile-schedule-kept", workflow.DefaultVersion, 1) == 1
	l.budgeted = rev || workflow.GetVersion(ctx, "job-budget", workflow.DefaultVersion, 1) == 1
	// Runs that began before they watched their children's completion hear of every end by
	// signal, and replay so.
	if rev || workflow.GetVersion(ctx, "parent-watches-children", workflow.DefaultVersion, 1) == 1 {
		l.children = map[uuid.UUID]workflow.ChildWorkflowFuture{}
	}
	// Runs that began before the reconcile's timer was kept across waits started and cancelled
	// one in each wait, and replay so.
	l.keptTimer = rev || workflow.GetVersion(ctx, "reconcile-timer-kept", workflow.DefaultVersion, 1) == 1
	// Runs that began before attempts ended outside Proctor were noticed read only the store.
	l.endsVanished = in.Revision >= 2 || workflow.GetVersion(ctx, "end-vanished", workflow.DefaultVersion, 1) == 1
	for _, id := range in.Live {
		l.live[id] = true
	}
	return l.run(ctx)
}

type runList struct {
	in   RunListInput
	live map[uuid.UUID]bool
	done workflow.ReceiveChannel
	// page holds trace ids read but not started yet; exhausted is set after the last page.
	page      []uuid.UUID
	exhausted bool
	// nextReconcile is when the live set is next checked against the store. It is kept across
	// waits: a timer restarted by every wait would never fire while attempts keep ending, and a
	// lost signal would hold its slot until the job went quiet for a whole reconcileEvery.
	nextReconcile time.Time
	keptSchedule  bool
	// reconcileTimer fires at nextReconcile; once keptTimer, one timer serves every wait until it
	// fires (two events fewer a wait than a timer started and cancelled in each).
	reconcileTimer workflow.Future
	keptTimer      bool
	// budgeted: the run asks AdmitJob before it starts attempts; paused is its last answer.
	// resumed receives SignalJobResumed.
	budgeted bool
	paused   bool
	resumed  workflow.ReceiveChannel
	// children are the live attempts this run started, whose completion it watches: they signal
	// their end only once told the run moved on (see moveOn). Nil in runs from before that, which
	// hear of every end by signal.
	children map[uuid.UUID]workflow.ChildWorkflowFuture
	// endsVanished: an attempt whose Rollout ended without recording its end (terminated or timed
	// out through Temporal's API) is ended here (activities.EndVanished): a watched child that
	// ended in error is put in vanished until then, and the reconcile asks about the others.
	endsVanished bool
	vanished     []uuid.UUID
}

// pausedRecheck is how often a paused RunList with no live attempt reads its job's budget again
// without being told (a resume's signal lost to an outage); a resume's signal wakes it at once.
const pausedRecheck = 5 * time.Minute

// pausedHistoryLimit is the history length past which a paused RunList continues as new, so that a
// job paused for months keeps a small history.
const pausedHistoryLimit = 10000

func (l *runList) run(ctx workflow.Context) (RunListResult, error) {
	sctx := storeActivity(ctx)
	if l.in.Started == 0 && len(l.in.Live) == 0 {
		if err := workflow.ExecuteLocalActivity(sctx, a.SetJobStatus, activities.SetJobStatusInput{JobID: l.in.JobID, Status: models.JobRunning}).Get(ctx, nil); err != nil {
			return RunListResult{}, err
		}
	}
	startedHere := 0
	for ctx.Err() == nil {
		l.drain(ctx)
		l.endVanished(ctx)
		if err := l.admit(ctx, startedHere); err != nil {
			return RunListResult{Started: l.in.Started}, err
		}
		n, err := l.startChildren(ctx, startedHere)
		startedHere += n
		if err != nil {
			return RunListResult{Started: l.in.Started}, err
		}
		if ctx.Err() != nil {
			break
		}
		if l.exhausted && len(l.page) == 0 && len(l.live) == 0 {
			break
		}
		if (startedHere >= l.in.ChildrenPerRun && len(l.live) < l.in.MaxConcurrent) ||
			(l.paused && len(l.live) == 0 && workflow.GetInfo(ctx).GetCurrentHistoryLength() > pausedHistoryLimit) {
			l.moveOn(ctx)
			if ctx.Err() != nil {
				// Cancelled while telling the attempts: a cancel does not carry over a
				// continue-as-new, so this run ends the job.
				break
			}
			next := l.in
			next.Live, next.Revision = l.liveIDs(), Revision
			return RunListResult{Started: l.in.Started}, workflow.NewContinueAsNewError(ctx, RunList, next)
		}
		if l.paused && len(l.live) == 0 {
			l.awaitResume(ctx)
			continue
		}
		l.wait(ctx)
	}

	dctx, _ := workflow.NewDisconnectedContext(ctx)
	status := models.JobCompleted
	if ctx.Err() != nil {
		status = models.JobCancelled
		l.cancelLive(dctx)
		// Traces that never started are cancelled here; started ones cancelled themselves.
		_ = workflow.ExecuteLocalActivity(storeActivity(dctx), a.CancelPendingTraces, activities.JobInput{JobID: l.in.JobID}).Get(dctx, nil)
	}
	err := workflow.ExecuteLocalActivity(storeActivity(dctx), a.SetJobStatus, activities.SetJobStatusInput{JobID: l.in.JobID, Status: status}).Get(dctx, nil)
	return RunListResult{Started: l.in.Started}, err
}

// startChildren starts attempts up to the run's limits, then waits for all of them to be
// started: a run never continues as new with a start in flight. It answers how many it started.
func (l *runList) startChildren(ctx workflow.Context, startedHere int) (int, error) {
	type start struct {
		id uuid.UUID
		f  workflow.ChildWorkflowFuture
	}
	var starting []start
	n := 0
	for !l.paused && len(l.live) < l.in.MaxConcurrent && startedHere+n < l.in.ChildrenPerRun {
		id, ok, err := l.next(ctx)
		if err != nil {
			return n, err
		}
		if !ok {
			break
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:        names.RolloutWorkflowID(id),
			TaskQueue:         names.QueueWorkflows,
			ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_ABANDON,
			// Cancelling the run cancels the children it started; each tears its sandbox
			// down and records cancelled before it ends.
			WaitForCancellation: true,
		})
		f := workflow.ExecuteChildWorkflow(cctx, Rollout, RolloutInput{TraceID: id, MaxTries: l.in.MaxTries, StepsPerRun: l.in.StepsPerRun, ParentWatches: l.children != nil, Revision: Revision})
		starting = append(starting, start{id, f})
		l.live[id] = true
		if l.children != nil {
			l.children[id] = f
		}
		l.in.Started++
		n++
	}
	for _, s := range starting {
		// A child that cannot start (its workflow id is taken: it is running already) is
		// not counted; its own end arrives as a signal all the same.
		if err := s.f.GetChildWorkflowExecution().Get(ctx, nil); err != nil && ctx.Err() == nil {
			l.ended(s.id)
		}
	}
	return n, nil
}

// admit asks the store, when the run is about to start attempts, whether the job may: a job
// whose spend reached its max_cost_usd is paused (AdmitJob marks it so), and starts none until
// its ceiling is raised or lifted. Its live attempts go on until their next model call, which the
// budget refuses.
func (l *runList) admit(ctx workflow.Context, startedHere int) error {
	if !l.budgeted {
		return nil
	}
	for l.resumed.ReceiveAsync(nil) {
	}
	if len(l.live) >= l.in.MaxConcurrent || startedHere >= l.in.ChildrenPerRun {
		return nil
	}
	// Only a run with an attempt left to start asks (and a paused one learns there is none).
	if err := l.fill(ctx); err != nil || len(l.page) == 0 {
		l.paused = false
		return err
	}
	var adm activities.AdmitJobResult
	if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.AdmitJob, activities.JobInput{JobID: l.in.JobID}).Get(ctx, &adm); err != nil {
		return err
	}
	// A job with no ceiling never gets one: this run asks no more.
	l.paused, l.budgeted = adm.Paused, !adm.NoCeiling
	return nil
}

// awaitResume waits, while the job is paused and none of its attempts is live, for a resume's
// signal, or pausedRecheck, or the workflow's cancel.
func (l *runList) awaitResume(ctx workflow.Context) {
	_, _ = workflow.AwaitWithTimeout(ctx, pausedRecheck, func() bool { return l.resumed.Len() > 0 })
}

// fill reads the next page of trace ids when the last one is used up.
func (l *runList) fill(ctx workflow.Context) error {
	if len(l.page) > 0 || l.exhausted {
		return nil
	}
	var page activities.JobTracesPageResult
	err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.JobTracesPage,
		activities.JobTracesPageInput{JobID: l.in.JobID, Offset: l.in.Started, Limit: l.in.PageSize}).Get(ctx, &page)
	if err != nil {
		return err
	}
	l.page = page.TraceIDs
	l.exhausted = len(page.TraceIDs) < l.in.PageSize
	return nil
}

// next is the next trace to start, reading a page when the last one is used up.
func (l *runList) next(ctx workflow.Context) (uuid.UUID, bool, error) {
	if err := l.fill(ctx); err != nil {
		return uuid.Nil, false, err
	}
	if len(l.page) == 0 {
		return uuid.Nil, false, nil
	}
	id := l.page[0]
	l.page = l.page[1:]
	return id, true, nil
}

// wait blocks until a child ends, the workflow is cancelled, or it is time to reconcile the live
// set with the store.
func (l *runList) wait(ctx workflow.Context) {
	tctx, cancelTimer := workflow.WithCancel(ctx)
	defer cancelTimer()
	sel := workflow.NewSelector(ctx)
	sel.AddReceive(l.done, func(c workflow.ReceiveChannel, _ bool) {
		var id uuid.UUID
		c.Receive(ctx, &id)
		l.ended(id)
	})
	for _, id := range l.watchedIDs() {
		sel.AddFuture(l.children[id], func(f workflow.Future) { l.watchedEnded(ctx, id, f) })
	}
	sel.AddReceive(ctx.Done(), func(workflow.ReceiveChannel, bool) {})
	if l.budgeted && l.paused {
		// A paused run with attempts still live goes on at once when resumed.
		sel.AddReceive(l.resumed, func(c workflow.ReceiveChannel, _ bool) { c.Receive(ctx, nil) })
	}
	now := workflow.Now(ctx)
	if l.nextReconcile.IsZero() || !l.keptSchedule {
		l.nextReconcile = now.Add(reconcileEvery)
	}
	reconcile := !now.Before(l.nextReconcile)
	if !reconcile {
		timer := l.reconcileTimer
		switch {
		case timer != nil:
		case l.keptTimer:
			// Not cancelled when this wait ends: the next waits share it.
			timer = workflow.NewTimer(ctx, l.nextReconcile.Sub(now))
			l.reconcileTimer = timer
		default:
			timer = workflow.NewTimer(tctx, l.nextReconcile.Sub(now))
		}
		sel.AddFuture(timer, func(workflow.Future) { reconcile = true })
		sel.Select(ctx)
	}
	if reconcile && ctx.Err() == nil {
		l.reconcileTimer = nil
		l.nextReconcile = workflow.Now(ctx).Add(reconcileEvery)
		if l.endsVanished {
			l.reconcileVanished(ctx)
			return
		}
		var open activities.OpenTracesResult
		if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.OpenTraces, activities.OpenTracesInput{TraceIDs: l.liveIDs()}).Get(ctx, &open); err == nil {
			still := map[uuid.UUID]bool{}
			for _, id := range open.TraceIDs {
				still[id] = true
			}
			for id := range l.live {
				if !still[id] {
					l.ended(id)
				}
			}
		}
	}
}

// reconcileVanished takes out of the live set the attempts that ended, and ends those whose
// Rollouts are no longer running without having recorded it.
func (l *runList) reconcileVanished(ctx workflow.Context) { l.endVanishedOf(ctx, l.liveIDs()) }

// endVanishedOf asks activities.EndVanished about ids, and takes those that are over out of the
// live set.
func (l *runList) endVanishedOf(ctx workflow.Context, ids []uuid.UUID) {
	var res activities.EndVanishedResult
	if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.EndVanished, activities.EndVanishedInput{TraceIDs: ids}).Get(ctx, &res); err == nil {
		for _, id := range res.Ended {
			l.ended(id)
		}
	}
}

// drain takes every completion signal already received, and every watched child's end.
func (l *runList) drain(ctx workflow.Context) {
	var id uuid.UUID
	for l.done.ReceiveAsync(&id) {
		l.ended(id)
	}
	for _, id := range l.watchedIDs() {
		if f := l.children[id]; f.IsReady() {
			l.watchedEnded(ctx, id, f)
		}
	}
}

// watchedEnded takes a watched child that ended out of the live set. One that ended in error
// (terminated or timed out through Temporal's API, say) may not have recorded its end: it is
// put in vanished for endVanished.
func (l *runList) watchedEnded(ctx workflow.Context, id uuid.UUID, f workflow.Future) {
	l.ended(id)
	if l.endsVanished && f.Get(ctx, nil) != nil {
		l.vanished = append(l.vanished, id)
	}
}

// endVanished ends the attempts in vanished that had not recorded their ends.
func (l *runList) endVanished(ctx workflow.Context) {
	if len(l.vanished) == 0 {
		return
	}
	ids := l.vanished
	l.vanished = nil
	l.endVanishedOf(ctx, ids) // already out of the live set
}

// ended takes an attempt out of the live set.
func (l *runList) ended(id uuid.UUID) {
	delete(l.live, id)
	delete(l.children, id)
}

// moveOn readies the live set for the next run: each live attempt this run watches (at most
// ChildrenPerRun) is told (SignalParentMoved) that the watch ends, so that it signals its end
// to the next run; those earlier runs started were told by them, or signal anyway. An attempt
// the server cannot find (closed, or absent) has ended and is not handed on; one not told for
// another reason is, and the next run's reconcile finds out when it ends.
func (l *runList) moveOn(ctx workflow.Context) {
	l.drain(ctx)
	ids := l.watchedIDs()
	told := make([]workflow.Future, len(ids))
	for i, id := range ids {
		told[i] = workflow.SignalExternalWorkflow(ctx, names.RolloutWorkflowID(id), "", names.SignalParentMoved, nil)
	}
	for i, f := range told {
		var gone *temporal.UnknownExternalWorkflowExecutionError
		if err := f.Get(ctx, nil); errors.As(err, &gone) {
			l.ended(ids[i])
		}
	}
	l.drain(ctx)
	l.endVanished(ctx)
}

// cancelLive asks every live child to cancel and waits (bounded) for them to end, so the job
// reads cancelled only once its attempts did.
func (l *runList) cancelLive(dctx workflow.Context) {
	cancelAll(dctx, l.liveIDs())
	if l.endsVanished {
		// An attempt whose Rollout is gone would hold the cancel for the whole wait below.
		l.drain(dctx)
		l.endVanished(dctx)
		l.reconcileVanished(dctx)
	}
	deadline := workflow.Now(dctx).Add(5 * time.Minute)
	for len(l.live) > 0 {
		left := deadline.Sub(workflow.Now(dctx))
		if left <= 0 {
			return
		}
		ok, _ := workflow.AwaitWithTimeout(dctx, left, func() bool { return l.done.Len() > 0 || l.childEnded() })
		if !ok {
			return
		}
		l.drain(dctx)
		l.endVanished(dctx)
	}
}

// childEnded reports whether a watched child has ended.
func (l *runList) childEnded() bool {
	for _, f := range l.children {
		if f.IsReady() {
			return true
		}
	}
	return false
}

// liveIDs lists the live set in a stable order (workflow code must be deterministic).
func (l *runList) liveIDs() []uuid.UUID { return sortedIDs(l.live) }

// watchedIDs lists the live attempts this run watches (a subset of the live set), in a stable
// order.
func (l *runList) watchedIDs() []uuid.UUID { return sortedIDs(l.children) }

// sortedIDs lists m's keys in a stable order.
func sortedIDs[V any](m map[uuid.UUID]V) []uuid.UUID {
	ids := make([]uuid.UUID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y uuid.UUID) int { return slices.Compare(x[:], y[:]) })
	return ids
}
