package httpapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

type statusOutput struct {
	Body struct {
		Status string `json:"status" enum:"accepted"`
	}
}

type cancelJobOutput struct {
	Body struct {
		Cancelled int    `json:"cancelled" doc:"Live attempts asked to cancel (attempts that never started are cancelled at once)"`
		Status    string `json:"status" enum:"accepted"`
	}
}

// JobCancelled is one job of cancel_user_jobs.
type JobCancelled struct {
	JobID     uuid.UUID `json:"job_id"`
	Cancelled int       `json:"cancelled"`
}

type cancelUserJobsOutput struct {
	Body struct {
		JobsCancelled       int            `json:"jobs_cancelled"`
		TotalTasksCancelled int            `json:"total_tasks_cancelled"`
		JobDetails          []JobCancelled `json:"job_details" nullable:"false"`
		Status              string         `json:"status" enum:"accepted"`
	}
}

// registerRolloutCancels registers the cancellation of an attempt, of a job, and of all the caller runs.
func (s *Server) registerRolloutCancels() {
	tags := []string{"Rollouts"}
	errs := []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-rollout", Method: http.MethodPost, Path: "/rollouts/cancel", Tags: tags, Summary: "Cancel an attempt",
		Description: "The attempt reads cancelling, tears its sandbox down, then reads cancelled.", Errors: errs,
	}, authKeyOrSession), s.cancelRollout)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-job", Method: http.MethodPost, Path: "/rollouts/cancel_job", Tags: tags, Summary: "Cancel every attempt of a job",
		Errors: errs,
	}, authKeyOrSession), s.cancelJob)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-user-jobs", Method: http.MethodPost, Path: "/rollouts/cancel_user_jobs", Tags: tags, Summary: "Cancel everything the caller has running",
		Description: "Cancels every pending or running job the caller launched.", Errors: []int{http.StatusServiceUnavailable},
	}, authKeyOrSession), s.cancelUserJobs)
}

type cancelTraceInput struct {
	Body struct {
		TraceID uuid.UUID `json:"trace_id"`
	}
}

// cancelRollout serves POST /v2/rollouts/cancel: cancel an attempt.
func (s *Server) cancelRollout(ctx context.Context, in *cancelTraceInput) (*statusOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.Body.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	if !t.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the trace is read-only for the caller")
	}
	if !rollouts.Terminal(t.Status) {
		// The workflow settles it: it tears the sandbox down, then writes cancelled.
		s.rollouts.TransitionTrace(ctx, t.ID, rollouts.TraceUpdate{Status: models.TraceCancelling}) //nolint:errcheck // informational
		if err := s.workflows.CancelTrace(ctx, t.ID); err != nil {
			return nil, err
		}
	}
	out := &statusOutput{}
	out.Body.Status = "accepted"
	return out, nil
}

type cancelJobInput struct {
	Body struct {
		JobID uuid.UUID `json:"job_id"`
	}
}

// cancelJob serves POST /v2/rollouts/cancel_job: cancel every attempt of a job.
func (s *Server) cancelJob(ctx context.Context, in *cancelJobInput) (*cancelJobOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	j, err := s.rollouts.GetJob(ctx, callerFrom(ctx), in.Body.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	if !j.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the job is read-only for the caller")
	}
	n, err := s.workflows.CancelJob(ctx, j.ID)
	if err != nil {
		return nil, err
	}
	out := &cancelJobOutput{}
	out.Body.Cancelled, out.Body.Status = n, "accepted"
	return out, nil
}

// cancelUserJobs serves POST /v2/rollouts/cancel_user_jobs: cancel everything the caller has running.
func (s *Server) cancelUserJobs(ctx context.Context, _ *struct{}) (*cancelUserJobsOutput, error) {
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	jobs, err := s.rollouts.ActiveJobs(ctx, c)
	if err != nil {
		return nil, err
	}
	out := &cancelUserJobsOutput{}
	out.Body.JobDetails, out.Body.Status = []JobCancelled{}, "accepted"
	for _, j := range jobs {
		if j.CreatedBy == nil || *j.CreatedBy != c.UserID {
			continue
		}
		n, err := s.workflows.CancelJob(ctx, j.ID)
		if err != nil {
			return nil, err
		}
		out.Body.JobsCancelled++
		out.Body.TotalTasksCancelled += n
		out.Body.JobDetails = append(out.Body.JobDetails, JobCancelled{JobID: j.ID, Cancelled: n})
	}
	return out, nil
}
