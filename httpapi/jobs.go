package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/rollouts"
)

// Job is one batch run (spec: Resources › Job).
type Job struct {
	ID            uuid.UUID          `json:"id"`
	Name          string             `json:"name"`
	Description   string             `json:"description"`
	Status        string             `json:"status" enum:"pending,running,paused,completed,cancelled" doc:"paused (Proctor extension): a run_list job whose spend reached its max_cost_usd; it starts no attempt until resumed"`
	TasksetID     *uuid.UUID         `json:"taskset_id"`
	MaxSteps      int                `json:"max_steps"`
	GroupSize     int                `json:"group_size"`
	MaxConcurrent int                `json:"max_concurrent"`
	IsRemote      bool               `json:"is_remote"`
	CanEdit       bool               `json:"can_edit"`
	IsOwner       bool               `json:"is_owner"`
	Published     bool               `json:"published" doc:"Readable without credentials"`
	MaxCostUSD    *float64           `json:"max_cost_usd" doc:"Proctor extension: the job's ceiling on its spend in USD (run_list's max_cost_usd); null for none"`
	Metadata      models.JobMetadata `json:"metadata"`
	CreatedAt     time.Time          `json:"created_at"`
	UpdatedAt     time.Time          `json:"updated_at"`
}

func jobFrom(r *rollouts.JobRow) Job {
	return Job{ID: r.ID, Name: r.Name, Description: r.Description, Status: r.Status, TasksetID: r.TasksetID, MaxSteps: r.MaxSteps,
		GroupSize: r.GroupSize, MaxConcurrent: r.MaxConcurrent, IsRemote: r.IsRemote, CanEdit: r.CanEdit, IsOwner: r.IsOwner,
		Published: r.PublishedAt != nil, MaxCostUSD: r.MaxCostUSD, Metadata: r.Metadata.Listed(), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

type jobPath struct {
	JobID uuid.UUID `path:"job_id"`
}

type jobOutput struct{ Body Job }

// JobSummary counts a job's traces per status (spec: GET /v2/jobs/{job_id}/summary).
type JobSummary struct {
	JobID        uuid.UUID `json:"job_id"`
	AvgReward    *float64  `json:"avg_reward" doc:"Mean reward over valid, completed traces; null before any"`
	Cancelled    int       `json:"cancelled"`
	Cancelling   int       `json:"cancelling"`
	Completed    int       `json:"completed"`
	Error        int       `json:"error"`
	Initializing int       `json:"initializing"`
	Pending      int       `json:"pending"`
	Running      int       `json:"running"`
	TotalTasks   int       `json:"total_tasks"`
	TotalTraces  int       `json:"total_traces"`
}

type summaryOutput struct{ Body JobSummary }

type updatedCount struct {
	Body struct {
		UpdatedCount int `json:"updated_count"`
	}
}

// Published answers POST /v2/jobs/{job_id}/publish.
type Published struct {
	Message   string    `json:"message"`
	PublicURL string    `json:"public_url" doc:"Where the job reads without credentials"`
	JobID     uuid.UUID `json:"job_id"`
	Success   bool      `json:"success"`
}

func (s *Server) registerJobs() {
	tags := []string{"Jobs"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-jobs", Method: http.MethodGet, Path: "/jobs", Tags: tags, Summary: "List jobs",
		Description: "The caller's team's jobs, newest first.", Errors: []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.listJobs)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-active-jobs", Method: http.MethodGet, Path: "/jobs/active", Tags: tags, Summary: "Jobs that are pending or running",
		Description: "Jobs that have not ended: pending or running, and (Proctor extension) paused at their max_cost_usd.",
	}, authKeyOrSession), s.listActiveJobs)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job", Method: http.MethodGet, Path: "/jobs/{job_id}", Tags: tags, Summary: "Get a job",
		Description: "A published job needs no credentials.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getJob)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-job", Method: http.MethodPatch, Path: "/jobs/{job_id}", Tags: tags, Summary: "Rename or describe a job",
		Description: "max_cost_usd (Proctor extension) sets the ceiling of a run_list job that has not ended: its launcher or an owner only (403); " +
			"a paused job whose new ceiling is above its spend goes on (422 for one that is not), 409 for another kind of job or one that ended.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.updateJob)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-summary", Method: http.MethodGet, Path: "/jobs/{job_id}/summary", Tags: tags, Summary: "A job's counts per status",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getJobSummary)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-job-traces", Method: http.MethodGet, Path: "/jobs/{job_id}/traces", Tags: tags, Summary: "A job's traces",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.listJobTraces)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "invalidate-job", Method: http.MethodPost, Path: "/jobs/{job_id}/invalidate", Tags: tags, Summary: "Mark every trace of a job invalid",
		Description: "Invalid traces do not count toward scores.", Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.invalidateJob)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "revalidate-job", Method: http.MethodPost, Path: "/jobs/{job_id}/revalidate", Tags: tags, Summary: "Mark every trace of a job valid",
		Description: "Invalid traces do not count toward scores.", Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.revalidateJob)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "publish-job", Method: http.MethodPost, Path: "/jobs/{job_id}/publish", Tags: tags, Summary: "Publish a job",
		Description: "The job and its traces become readable without credentials.", Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.publishJob)
}

type listJobsInput struct {
	Limit     int    `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset    int    `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
	TasksetID string `query:"taskset_id" format:"uuid" doc:"Only jobs of this taskset"`
}

// invalidateJob serves POST /v2/jobs/{job_id}/invalidate: mark every trace of a job invalid.
func (s *Server) invalidateJob(ctx context.Context, in *jobPath) (*updatedCount, error) {
	return s.setJobValidity(ctx, in.JobID, false)
}

// revalidateJob serves POST /v2/jobs/{job_id}/revalidate: mark every trace of a job valid.
func (s *Server) revalidateJob(ctx context.Context, in *jobPath) (*updatedCount, error) {
	return s.setJobValidity(ctx, in.JobID, true)
}

func (s *Server) setJobValidity(ctx context.Context, jobID uuid.UUID, valid bool) (*updatedCount, error) {
	n, err := s.rollouts.SetJobValidity(ctx, callerFrom(ctx), jobID, valid)
	if err != nil {
		return nil, storeError(err, "job")
	}
	out := &updatedCount{}
	out.Body.UpdatedCount = n
	return out, nil
}

// listJobs serves GET /v2/jobs: list jobs.
func (s *Server) listJobs(ctx context.Context, in *listJobsInput) (*struct{ Body Page[Job] }, error) {
	var taskset *uuid.UUID
	if in.TasksetID != "" {
		id := uuid.MustParse(in.TasksetID)
		taskset = &id
	}
	rows, total, err := s.rollouts.ListJobs(ctx, callerFrom(ctx), taskset, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	items := make([]Job, len(rows))
	for i := range rows {
		items[i] = jobFrom(&rows[i])
	}
	return &struct{ Body Page[Job] }{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

// listActiveJobs serves GET /v2/jobs/active: jobs that are pending, running or paused.
func (s *Server) listActiveJobs(ctx context.Context, _ *struct{}) (*struct{ Body []Job }, error) {
	rows, err := s.rollouts.ActiveJobs(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	out := &struct{ Body []Job }{Body: []Job{}}
	for i := range rows {
		out.Body = append(out.Body, jobFrom(&rows[i]))
	}
	return out, nil
}

// getJob serves GET /v2/jobs/{job_id}: get a job.
func (s *Server) getJob(ctx context.Context, in *jobPath) (*jobOutput, error) {
	j, err := s.rollouts.GetJob(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	return &jobOutput{Body: jobFrom(j)}, nil
}

type patchJobInput struct {
	JobID uuid.UUID `path:"job_id"`
	Body  struct {
		Name        *string  `json:"name,omitempty" maxLength:"200"`
		Description *string  `json:"description,omitempty" maxLength:"10000"`
		MaxCostUSD  *float64 `json:"max_cost_usd,omitempty" exclusiveMinimum:"0" maximum:"1000000000" doc:"Proctor extension: a new ceiling on the job's spend in USD (run_list's max_cost_usd); a paused job whose new ceiling is above its spend goes on"`
	}
}

// updateJob serves PATCH /v2/jobs/{job_id}: rename or describe a job, or change its ceiling.
func (s *Server) updateJob(ctx context.Context, in *patchJobInput) (*jobOutput, error) {
	if in.Body.MaxCostUSD != nil {
		if _, err := s.setCeiling(ctx, in.JobID, billing.CeilingChange{MaxCostUSD: in.Body.MaxCostUSD}); err != nil {
			return nil, err
		}
	}
	j, err := s.rollouts.UpdateJob(ctx, callerFrom(ctx), in.JobID, in.Body.Name, in.Body.Description)
	if err != nil {
		return nil, storeError(err, "job")
	}
	return &jobOutput{Body: jobFrom(j)}, nil
}

// getJobSummary serves GET /v2/jobs/{job_id}/summary: a job's counts per status.
func (s *Server) getJobSummary(ctx context.Context, in *jobPath) (*summaryOutput, error) {
	sum, err := s.rollouts.SummarizeJob(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	c := sum.Counts
	return &summaryOutput{Body: JobSummary{JobID: in.JobID, AvgReward: sum.AvgReward, Cancelled: c[models.TraceCancelled],
		Cancelling: c[models.TraceCancelling], Completed: c[models.TraceCompleted], Error: c[models.TraceError],
		Initializing: c[models.TraceInitializing], Pending: c[models.TracePending], Running: c[models.TraceRunning],
		TotalTasks: sum.TotalTasks, TotalTraces: sum.TotalTraces}}, nil
}

type jobTracesInput struct {
	JobID  uuid.UUID `path:"job_id"`
	Limit  int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// listJobTraces serves GET /v2/jobs/{job_id}/traces: a job's traces.
func (s *Server) listJobTraces(ctx context.Context, in *jobTracesInput) (*struct{ Body Page[Trace] }, error) {
	rows, total, err := s.rollouts.ListJobTraces(ctx, callerFrom(ctx), in.JobID, in.Limit, in.Offset)
	if err != nil {
		return nil, storeError(err, "job")
	}
	items := make([]Trace, len(rows))
	for i := range rows {
		items[i] = traceFrom(&rows[i])
	}
	return &struct{ Body Page[Trace] }{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

// publishJob serves POST /v2/jobs/{job_id}/publish: publish a job.
func (s *Server) publishJob(ctx context.Context, in *jobPath) (*struct{ Body Published }, error) {
	if err := s.rollouts.PublishJob(ctx, callerFrom(ctx), in.JobID); err != nil {
		return nil, storeError(err, "job")
	}
	return &struct{ Body Published }{Body: Published{Message: "published", PublicURL: s.publicURL + "/v2/jobs/" + in.JobID.String(),
		JobID: in.JobID, Success: true}}, nil
}
