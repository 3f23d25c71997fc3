package workflows

import (
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

// RunListInput names the job whose pending traces to run.
type RunListInput struct {
	JobID uuid.UUID `json:"job_id"`
	// MaxConcurrent bounds the attempts live at once.
	MaxConcurrent int `json:"max_concurrent"`
	// MaxTries is each attempt's RolloutInput.MaxTries.
	MaxTries int `json:"max_tries,omitempty"`
}

// RunListResult counts how the job's attempts ended.
type RunListResult struct {
	Started int `json:"started"`
}

// RunListWorkflowID is the workflow id of a job's run.
func RunListWorkflowID(jobID uuid.UUID) string { return "runlist/" + jobID.String() }

// RunList runs every trace of a job as a child Rollout, at most MaxConcurrent at once. The job
// reads as running until every child has been started and has finished; cancelling the workflow
// (CancelJob) cancels every live child, and traces that never started are marked cancelled.
func RunList(ctx workflow.Context, in RunListInput) (RunListResult, error) {
	if in.MaxConcurrent <= 0 {
		in.MaxConcurrent = 1
	}
	sctx := storeActivity(ctx)
	var ids []uuid.UUID
	if err := workflow.ExecuteActivity(sctx, a.JobTraces, in.JobID).Get(ctx, &ids); err != nil {
		return RunListResult{}, err
	}
	if err := workflow.ExecuteActivity(sctx, a.SetJobStatus, activities.JobStatus{JobID: in.JobID, Status: "running"}).Get(ctx, nil); err != nil {
		return RunListResult{}, err
	}

	live := 0
	sel := workflow.NewSelector(ctx)
	res := RunListResult{}
	for _, id := range ids {
		for live >= in.MaxConcurrent && ctx.Err() == nil {
			sel.Select(ctx)
			live--
		}
		if ctx.Err() != nil {
			break
		}
		cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
			WorkflowID:          RolloutWorkflowID(id),
			TaskQueue:           activities.QueueWorkflows,
			ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
			WaitForCancellation: true,
		})
		f := workflow.ExecuteChildWorkflow(cctx, Rollout, RolloutInput{TraceID: id, MaxTries: in.MaxTries})
		sel.AddFuture(f, func(workflow.Future) {})
		live++
		res.Started++
	}
	for ; live > 0; live-- {
		sel.Select(ctx)
	}

	dctx, _ := workflow.NewDisconnectedContext(ctx)
	status := "completed"
	if ctx.Err() != nil {
		status = "cancelled"
		// Traces that never started are cancelled here; started ones cancelled themselves.
		_ = workflow.ExecuteActivity(storeActivity(dctx), a.CancelPendingTraces, in.JobID).Get(dctx, nil)
	}
	err := workflow.ExecuteActivity(storeActivity(dctx), a.SetJobStatus, activities.JobStatus{JobID: in.JobID, Status: status}).Get(dctx, nil)
	return res, err
}

// CancelJobInput names the job to cancel.
type CancelJobInput struct {
	JobID uuid.UUID `json:"job_id"`
}

// CancelJobWorkflowID is the workflow id of a job's cancellation.
func CancelJobWorkflowID(jobID uuid.UUID) string { return "canceljob/" + jobID.String() }

// CancelJob cancels every live attempt of a job: traces that never started read cancelled at
// once, live ones cancelling; the job's RunList (if any) and every live Rollout are asked to
// cancel, and each tears its sandbox down before it writes cancelled.
func CancelJob(ctx workflow.Context, in CancelJobInput) (int, error) {
	var live []uuid.UUID
	if err := workflow.ExecuteActivity(storeActivity(ctx), a.MarkJobCancelling, in.JobID).Get(ctx, &live); err != nil {
		return 0, err
	}
	// Absent workflows (no RunList for single-run jobs, rollouts that already ended) are not errors.
	_ = workflow.RequestCancelExternalWorkflow(ctx, RunListWorkflowID(in.JobID), "").Get(ctx, nil)
	for _, id := range live {
		_ = workflow.RequestCancelExternalWorkflow(ctx, RolloutWorkflowID(id), "").Get(ctx, nil)
	}
	return len(live), nil
}
