package workflows

import (
	"github.com/google/uuid"
	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/workflows/names"
	"go.temporal.io/sdk/workflow"
)

// CancelJobInput names the job to cancel.
type CancelJobInput struct {
	JobID uuid.UUID `json:"job_id"`
}

// CancelJobResult counts the live attempts asked to cancel.
type CancelJobResult struct {
	Cancelled int `json:"cancelled"`
}

// CancelJob cancels every live attempt of a job: traces that never started read cancelled at
// once, live ones cancelling; the job's RunList (if any) and every live Rollout are asked to
// cancel, and each tears its sandbox down before it writes cancelled; one whose Rollout is gone
// ends at once (activities.EndVanished).
func CancelJob(ctx workflow.Context, in CancelJobInput) (CancelJobResult, error) {
	var marked activities.MarkJobCancellingResult
	if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.MarkJobCancelling, activities.JobInput{JobID: in.JobID}).Get(ctx, &marked); err != nil {
		return CancelJobResult{}, err
	}
	// Absent workflows (no RunList for single-run jobs, rollouts that already ended) are not errors.
	_ = workflow.RequestCancelExternalWorkflow(ctx, names.RunListWorkflowID(in.JobID), "").Get(ctx, nil)
	_ = workflow.RequestCancelExternalWorkflow(ctx, names.RunListRetryWorkflowID(in.JobID), "").Get(ctx, nil)
	cancelAll(ctx, marked.Live)
	// An attempt whose Rollout is gone (terminated outside Proctor) hears no cancel: it ends here.
	if len(marked.Live) > 0 && workflow.GetVersion(ctx, "cancel-ends-vanished", workflow.DefaultVersion, 1) == 1 {
		_ = workflow.ExecuteLocalActivity(storeActivity(ctx), a.EndVanished, activities.EndVanishedInput{TraceIDs: marked.Live}).Get(ctx, nil)
	}
	return CancelJobResult{Cancelled: len(marked.Live)}, nil
}

// cancelAll asks the attempts' workflows to cancel, all at once; one that already ended is not
// an error.
func cancelAll(ctx workflow.Context, traceIDs []uuid.UUID) {
	fs := make([]workflow.Future, len(traceIDs))
	for i, id := range traceIDs {
		fs[i] = workflow.RequestCancelExternalWorkflow(ctx, names.RolloutWorkflowID(id), "")
	}
	for _, f := range fs {
		_ = f.Get(ctx, nil)
	}
}
