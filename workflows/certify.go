package workflows

import (
	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/workflows/names"
)

// CertifyInput names the certification to run and its job (rollouts.Store.StartCertification
// launched both).
type CertifyInput struct {
	CertificationID uuid.UUID `json:"certification_id"`
	JobID           uuid.UUID `json:"job_id"`
	MaxConcurrent   int       `json:"max_concurrent"`
	// MaxTries is each attempt's RolloutInput.MaxTries.
	MaxTries int `json:"max_tries,omitempty"`
}

// CertifyResult is the certification's status once recorded.
type CertifyResult struct {
	Status string `json:"status"`
}

// Certify runs a certification of an environment build: its job's attempts (the oracle k times
// and the idle agent once per task, pinned to the build) as a child RunList under the job's own
// RunList id, so that cancelling the job (CancelJob) cancels it as any job's; then, however the
// job ended, FinishCertification records the figures per task and the status. Cancelling the
// certification cancels its job's RunList first.
func Certify(ctx workflow.Context, in CertifyInput) (CertifyResult, error) {
	dctx := runJobToItsEnd(ctx, RunListInput{JobID: in.JobID, MaxConcurrent: in.MaxConcurrent, MaxTries: in.MaxTries, Revision: Revision})
	var out activities.FinishCertificationResult
	err := workflow.ExecuteLocalActivity(storeActivity(dctx), a.FinishCertification, activities.CertificationInput{CertificationID: in.CertificationID}).Get(dctx, &out)
	return CertifyResult{Status: out.Status}, err
}

// runJobToItsEnd runs a job's attempts as a child RunList under the job's own RunList id, so that
// cancelling the job (CancelJob) cancels it as any job's, and cancelling the parent cancels it
// first; it returns, however the job ended, a context that outlives a cancel of the parent, for
// recording what ran.
func runJobToItsEnd(ctx workflow.Context, in RunListInput) workflow.Context {
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:        names.RunListWorkflowID(in.JobID),
		TaskQueue:         names.QueueWorkflows,
		ParentClosePolicy: enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		// A cancel waits for the RunList to stop its attempts, as a job's cancel does.
		WaitForCancellation: true,
	})
	// Its end, completed or cancelled, is the job's; what is recorded after says what ran.
	_ = workflow.ExecuteChildWorkflow(cctx, RunList, in).Get(ctx, nil)
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	return dctx
}
