package activities

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// FinishTraceInput is how an attempt ended.
type FinishTraceInput struct {
	TraceID          uuid.UUID                `json:"trace_id"`
	Status           string                   `json:"status"`
	StopReason       string                   `json:"stop_reason"`
	Error            string                   `json:"error,omitempty"`
	Reward           *float64                 `json:"reward,omitempty"`
	EvaluationResult *models.EvaluationResult `json:"evaluation_result,omitempty"`
	// Infrastructure marks an error the infrastructure caused (no host, a sandbox lost on every
	// try): such an attempt may be retried in its job (rollouts.RetryInfra).
	Infrastructure bool `json:"infrastructure,omitempty"`
}

// FinishTrace writes how an attempt ended, and completes a single-run job whose traces all
// ended. An error ends at reward 0.
func (a *Activities) FinishTrace(ctx context.Context, f FinishTraceInput) error {
	now := time.Now().UTC()
	u := rollouts.TraceUpdate{Status: f.Status, StopReason: f.StopReason, Error: f.Error, Reward: f.Reward, EvaluationResult: f.EvaluationResult, EndTime: &now,
		InfraFailure: f.Infrastructure && f.Status == models.TraceError}
	if f.Status == models.TraceError && f.Reward == nil {
		zero := 0.0
		u.Reward = &zero
	}
	changed, err := a.rollouts().TransitionTrace(ctx, f.TraceID, u)
	if err != nil {
		return err
	}
	if changed {
		a.Metrics.AttemptEnded(f.Status)
	}
	if !changed && f.Status != models.TraceCancelled {
		// The trace was marked cancelling while its attempt ended (the cancel request may reach
		// the workflow only after it closed): it ends cancelled rather than stay cancelling.
		cancelled, err := a.rollouts().TransitionTrace(ctx, f.TraceID, rollouts.TraceUpdate{Status: models.TraceCancelled, StopReason: models.StopCancelled, EndTime: &now})
		if err != nil {
			return err
		}
		if cancelled {
			a.Metrics.AttemptEnded(models.TraceCancelled)
		}
	}
	a.conversations().forget(f.TraceID, nil)
	a.workerLog(ctx, f.TraceID, "finished: %s (%s) %s", f.Status, f.StopReason, f.Error)
	// A single-run job completes with its last trace; a RunList learns of the end from the
	// Rollout, which tells it once this has returned.
	_, err = a.rollouts().SettleSingleRunJob(ctx, f.TraceID)
	return err
}

// SupersedeTryInput names a try that failed on infrastructure.
type SupersedeTryInput struct {
	TraceID uuid.UUID `json:"trace_id"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason"`
}

// SupersedeTryResult says whether the attempt had already finished: the failed try's
// evaluation recorded its outcome before the workflow heard back (its host was lost right
// after), and the outcome stands.
type SupersedeTryResult struct {
	Finished   bool     `json:"finished"`
	Status     string   `json:"status,omitempty"`
	StopReason string   `json:"stop_reason,omitempty"`
	Reward     *float64 `json:"reward,omitempty"`
}

// SupersedeTry marks a failed try's events superseded: they stay, for the record, but no longer
// count in the trajectory. An attempt that had finished keeps them, and says so.
func (a *Activities) SupersedeTry(ctx context.Context, in SupersedeTryInput) (SupersedeTryResult, error) {
	tr, err := a.rollouts().SupersedeAttempt(ctx, in.TraceID, in.Attempt)
	if err != nil {
		return SupersedeTryResult{}, err
	}
	if tr != nil {
		a.workerLog(ctx, in.TraceID, "try %d lost its host (%s) after recording the outcome (%s): it stands", in.Attempt, in.Reason, tr.Status)
		return SupersedeTryResult{Finished: true, Status: tr.Status, StopReason: tr.StopReason, Reward: tr.Reward}, nil
	}
	a.workerLog(ctx, in.TraceID, "try %d failed on infrastructure (%s): retrying in a fresh sandbox", in.Attempt, in.Reason)
	return SupersedeTryResult{}, nil
}

// JobTracesPageInput names a page of a job's traces in launch order.
type JobTracesPageInput struct {
	JobID  uuid.UUID `json:"job_id"`
	Offset int       `json:"offset"`
	Limit  int       `json:"limit"`
}

// JobTracesPageResult is a page of trace ids; fewer than the limit means the last page.
type JobTracesPageResult struct {
	TraceIDs []uuid.UUID `json:"trace_ids"`
}

// JobTracesPage lists a page of a job's traces in launch order.
func (a *Activities) JobTracesPage(ctx context.Context, in JobTracesPageInput) (JobTracesPageResult, error) {
	ids, err := a.rollouts().JobTraceIDsPage(ctx, in.JobID, in.Offset, in.Limit)
	return JobTracesPageResult{TraceIDs: ids}, err
}

// OpenTracesInput lists traces to check.
type OpenTracesInput struct {
	TraceIDs []uuid.UUID `json:"trace_ids"`
}

// OpenTracesResult lists those of the traces that have not ended.
type OpenTracesResult struct {
	TraceIDs []uuid.UUID `json:"trace_ids"`
}

// OpenTraces reports which of the traces have not ended: RunList reconciles its live set with it
// in case a child's completion signal never arrived (a child terminated by an operator).
func (a *Activities) OpenTraces(ctx context.Context, in OpenTracesInput) (OpenTracesResult, error) {
	ids, err := a.rollouts().OpenTraceIDs(ctx, in.TraceIDs)
	return OpenTracesResult{TraceIDs: ids}, err
}

// SetJobStatusInput sets a job's status.
type SetJobStatusInput struct {
	JobID  uuid.UUID `json:"job_id"`
	Status string    `json:"status"`
}

// SetJobStatus records a job's status.
func (a *Activities) SetJobStatus(ctx context.Context, in SetJobStatusInput) error {
	return a.rollouts().SetJobStatus(ctx, in.JobID, in.Status)
}

// AdmitJobResult says whether a job may start attempts: not when its budget is reached (it is
// paused then).
type AdmitJobResult struct {
	Paused bool `json:"paused"`
	// NoCeiling: the job has no max_cost_usd, and never will again (a ceiling is set at launch):
	// the run need not ask any more.
	NoCeiling bool `json:"no_ceiling,omitempty"`
}

// AdmitJob is asked by a RunList before it starts attempts (billing.Store.AdmitJob).
func (a *Activities) AdmitJob(ctx context.Context, in JobInput) (AdmitJobResult, error) {
	b, err := a.billing().AdmitJob(ctx, in.JobID)
	return AdmitJobResult{Paused: b.Reached(), NoCeiling: b.MaxCostUSD == nil && b.Status != models.JobPaused}, err
}

// checkBudget refuses a model call of an attempt whose job's budget is reached: a non-retryable
// ErrBudget, which ends the attempt cancelled with stop reason budget.
func (a *Activities) checkBudget(ctx context.Context, traceID uuid.UUID) error {
	b, err := a.billing().TraceBudget(ctx, traceID)
	if err != nil {
		return err
	}
	if b.Reached() {
		return temporal.NewNonRetryableApplicationError(b.String()+": the attempt stops before its next model call", ErrBudget, nil)
	}
	return nil
}

// CertificationInput names a certification of a build.
type CertificationInput struct {
	CertificationID uuid.UUID `json:"certification_id"`
}

// FinishCertificationResult is a certification's status once recorded.
type FinishCertificationResult struct {
	Status string `json:"status"`
}

// FinishCertification records the figures of a certification whose job has ended
// (rollouts.Store.FinishCertification).
func (a *Activities) FinishCertification(ctx context.Context, in CertificationInput) (FinishCertificationResult, error) {
	cert, err := a.rollouts().FinishCertification(ctx, in.CertificationID)
	if err != nil {
		return FinishCertificationResult{}, err
	}
	return FinishCertificationResult{Status: cert.Status}, nil
}

// ReplayCheckInput names a replay check of a build.
type ReplayCheckInput struct {
	CheckID uuid.UUID `json:"check_id"`
}

// FinishReplayCheckResult is a replay check's status once recorded.
type FinishReplayCheckResult struct {
	Status string `json:"status"`
}

// FinishReplayCheck compares each replay of a check whose job has ended with the attempt it
// replays and records the check (rollouts.Store.FinishReplayCheck).
func (a *Activities) FinishReplayCheck(ctx context.Context, in ReplayCheckInput) (FinishReplayCheckResult, error) {
	chk, err := a.rollouts().FinishReplayCheck(ctx, in.CheckID)
	if err != nil {
		return FinishReplayCheckResult{}, err
	}
	return FinishReplayCheckResult{Status: chk.Status}, nil
}

// JobInput names a job.
type JobInput struct {
	JobID uuid.UUID `json:"job_id"`
}

// CancelPendingTraces cancels the traces of a job that never started.
func (a *Activities) CancelPendingTraces(ctx context.Context, in JobInput) error {
	_, err := a.rollouts().CancelPendingTraces(ctx, in.JobID)
	return err
}

// MarkJobCancellingResult lists the job's live traces, whose workflows must be cancelled.
type MarkJobCancellingResult struct {
	Live []uuid.UUID `json:"live"`
}

// MarkJobCancelling cancels a job's traces that never started and marks live ones cancelling.
func (a *Activities) MarkJobCancelling(ctx context.Context, in JobInput) (MarkJobCancellingResult, error) {
	live, err := a.rollouts().MarkJobCancelling(ctx, in.JobID)
	return MarkJobCancellingResult{Live: live}, err
}

// event is a new event of the try, its data the payload of its kind (models/eventrows.go).
func (a *Activities) event(in TryInput, seq int, kind, text string, data any) models.TraceEvent {
	return models.TraceEvent{TraceID: in.TraceID, Seq: seq, Attempt: in.Attempt, Kind: kind, Text: text, Data: models.EventData(data), StartedAt: time.Now().UTC()}
}

func (a *Activities) nextSeq(ctx context.Context, traceID uuid.UUID) (int, error) {
	seq, err := a.rollouts().LatestSeq(ctx, traceID)
	return seq + 1, err
}

// workerLog appends a line to the attempt's worker log (best effort: a log line never fails an
// activity).
func (a *Activities) workerLog(ctx context.Context, traceID uuid.UUID, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	a.log().InfoContext(ctx, line, "trace", traceID)
	if err := a.rollouts().AppendLogLine(ctx, traceID, rollouts.LogWorker, "worker", line, time.Now().UTC()); err != nil {
		a.log().WarnContext(ctx, "write worker log", "trace", traceID, "error", err)
	}
}
