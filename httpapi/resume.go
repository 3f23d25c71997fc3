package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/billing"
)

// registerResume registers the resume of a job paused at its ceiling (a Proctor extension).
func (s *Server) registerResume() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "resume-job", Method: http.MethodPost, Path: "/jobs/{job_id}/resume", Tags: []string{"Jobs"},
		Summary: "Go on with a job paused at its max_cost_usd (Proctor extension)",
		Description: "A run_list job whose spend reached its max_cost_usd is paused: it starts no attempt, and its running attempts stopped at " +
			"their next model call (cancelled, stop_reason budget). Resuming it with a higher max_cost_usd, or with lift_ceiling, " +
			"starts the attempts that never started; nothing that ended runs again (POST /v2/jobs/{job_id}/retry runs the stopped ones again " +
			"once the job has ended). Its launcher or an owner only (403). 409 for a job that is not paused; 422 for a ceiling not above " +
			"what the job has spent, or for neither field.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.resumeJob)
}

type resumeJobInput struct {
	JobID uuid.UUID      `path:"job_id"`
	Body  *resumeJobBody `required:"false"`
}

// resumeJobBody is the new ceiling of a paused job, or none.
type resumeJobBody struct {
	MaxCostUSD  *float64 `json:"max_cost_usd,omitempty" exclusiveMinimum:"0" maximum:"1000000000" doc:"the new ceiling in USD, above what the job has spent"`
	LiftCeiling bool     `json:"lift_ceiling,omitempty" doc:"go on with no ceiling at all"`
}

// Resumed is a job's budget after a resume.
type Resumed struct {
	JobID      uuid.UUID `json:"job_id"`
	Status     string    `json:"status" enum:"running,paused,pending" doc:"running once resumed"`
	MaxCostUSD *float64  `json:"max_cost_usd" doc:"the job's ceiling now; null for none"`
	SpentUSD   float64   `json:"spent_usd" doc:"what the job has spent, priced as its usage prices it"`
}

type resumeJobOutput struct{ Body Resumed }

// resumeJob serves POST /v2/jobs/{job_id}/resume.
func (s *Server) resumeJob(ctx context.Context, in *resumeJobInput) (*resumeJobOutput, error) {
	ch := billing.CeilingChange{Resume: true}
	if b := in.Body; b != nil {
		if b.LiftCeiling && b.MaxCostUSD != nil {
			return nil, validation("body.lift_ceiling", "give max_cost_usd or lift_ceiling, not both", true)
		}
		ch.MaxCostUSD, ch.Lift = b.MaxCostUSD, b.LiftCeiling
	}
	b, err := s.setCeiling(ctx, in.JobID, ch)
	if err != nil {
		return nil, err
	}
	return &resumeJobOutput{Body: Resumed{JobID: in.JobID, Status: b.Status, MaxCostUSD: b.MaxCostUSD, SpentUSD: b.SpentUSD}}, nil
}

// setCeiling changes a job's ceiling and, when that resumed it, tells its RunLists. The store
// says the job runs whether or not they hear it now: a paused RunList reads its job again every
// few minutes, so a signal lost to an outage delays the resume, and loses nothing.
func (s *Server) setCeiling(ctx context.Context, jobID uuid.UUID, ch billing.CeilingChange) (billing.JobBudget, error) {
	res, err := s.billing.SetJobCeiling(ctx, callerFrom(ctx), jobID, ch)
	if err != nil {
		return billing.JobBudget{}, storeError(err, "job")
	}
	if res.Resumed && s.workflows != nil {
		if err := s.workflows.ResumeJob(context.WithoutCancel(ctx), jobID); err != nil {
			s.log.WarnContext(ctx, "tell a resumed job's run lists (they find it at their next check)", "request_id", requestIDFrom(ctx), "job", jobID, "error", err)
		}
	}
	return res.Budget, nil
}
