package workflows

import (
	"github.com/google/uuid"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

// ReplayCheckInput names the replay check to run and its job (rollouts.Store.StartReplayCheck
// launched both).
type ReplayCheckInput struct {
	CheckID       uuid.UUID `json:"check_id"`
	JobID         uuid.UUID `json:"job_id"`
	MaxConcurrent int       `json:"max_concurrent"`
	// MaxTries is each attempt's RolloutInput.MaxTries.
	MaxTries int `json:"max_tries,omitempty"`
}

// ReplayCheckResult is the check's status once recorded.
type ReplayCheckResult struct {
	Status string `json:"status"`
}

// ReplayCheck runs a regression replay of a build: its job's attempts (each a recorded attempt
// of the job checked against, replayed by the replay model on the build) as a child RunList under
// the job's own id, as Certify does; then, however the job ended, FinishReplayCheck compares
// each replay with what it replays and records the status.
func ReplayCheck(ctx workflow.Context, in ReplayCheckInput) (ReplayCheckResult, error) {
	dctx := runJobToItsEnd(ctx, RunListInput{JobID: in.JobID, MaxConcurrent: in.MaxConcurrent, MaxTries: in.MaxTries, Revision: Revision})
	var out activities.FinishReplayCheckResult
	err := workflow.ExecuteLocalActivity(storeActivity(dctx), a.FinishReplayCheck, activities.ReplayCheckInput{CheckID: in.CheckID}).Get(dctx, &out)
	return ReplayCheckResult{Status: out.Status}, err
}
