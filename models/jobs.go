package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Job is one batch run. Its status is derived from its traces as they finish.
type Job struct {
	bun.BaseModel `bun:"table:jobs,alias:j"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	CreatedBy     *uuid.UUID `bun:"created_by,type:uuid"`
	// APIKeyID is the key that launched the job (nil when a session did).
	APIKeyID      *uuid.UUID `bun:"api_key_id,type:uuid"`
	TasksetID     *uuid.UUID `bun:"taskset_id,type:uuid"`
	Name          string     `bun:"name"`
	Description   string     `bun:"description"`
	Status        string     `bun:"status"`
	MaxSteps      int        `bun:"max_steps"`
	GroupSize     int        `bun:"group_size"`
	MaxConcurrent int        `bun:"max_concurrent"`
	IsRemote      bool       `bun:"is_remote"`
	// Kind is how it was launched: JobSingle, JobRemote or JobBatch.
	Kind        string      `bun:"kind,nullzero,notnull,default:'batch'"`
	Metadata    JobMetadata `bun:"metadata"`
	PublishedAt *time.Time  `bun:"published_at"`
	CreatedAt   time.Time   `bun:"created_at"`
	UpdatedAt   time.Time   `bun:"updated_at"`
	// FinishSeq is the last number given to one of its ended attempts (see FinishedAttempts);
	// only that numbering writes it.
	FinishSeq int64 `bun:"finish_seq,scanonly"`
	// MaxCostUSD is the job's ceiling on its spend (run_list's max_cost_usd); nil for none. See
	// Store.AdmitJob.
	MaxCostUSD *float64 `bun:"max_cost_usd"`
	// SpentInferenceUSD and SpentEnvironmentUSD are the running sums of its attempts' model calls
	// and of its ended instances; only RecordInference and an instance's end add to them.
	SpentInferenceUSD   float64 `bun:"spent_inference_usd,scanonly"`
	SpentEnvironmentUSD float64 `bun:"spent_environment_usd,scanonly"`
}

// JobMetadata is what a job records of how it was launched (spec: Job › metadata), one record
// for the column and the API.
type JobMetadata struct {
	// ParentJobID is the job this one follows up (run_list's parent_job_id: a re-run of it, or
	// of some of its attempts); nil for a job launched on its own.
	ParentJobID *uuid.UUID `json:"parent_job_id" doc:"The job this one follows up (a re-run of it or of some of its attempts), as run_list's parent_job_id named it; null for a job launched on its own"`
	// ResolvedAgents are the models the job runs, as its launch resolved them.
	ResolvedAgents []ResolvedAgent `json:"resolved_agents" nullable:"false" doc:"The models the job runs, as its launch resolved them"`
	// SDKAgentParams is the agent an SDK submitted (POST /v2/rollouts/submit); nil otherwise.
	SDKAgentParams *SDKAgentParams `json:"sdk_agent_params,omitempty" doc:"The agent an SDK submitted (rollouts/submit)"`
}

// ResolvedAgent names a model a job runs.
type ResolvedAgent struct {
	ModelID   uuid.UUID `json:"model_id"`
	ModelName string    `json:"model_name"`
	Name      string    `json:"name"`
	Provider  string    `json:"provider"`
	Adapter   string    `json:"adapter"`
}

// ResolvedAgentOf is how a job's metadata names model m.
func ResolvedAgentOf(m *LLMModel) ResolvedAgent {
	return ResolvedAgent{ModelID: m.ID, ModelName: m.ModelName, Name: m.Name, Provider: m.Provider, Adapter: m.Adapter}
}

// SDKAgentParams are the agent of a submitted attempt as the SDK gave it: the model it named and
// the agent config merged over the task's.
type SDKAgentParams struct {
	Type   string       `json:"type" doc:"The model_name or model id the SDK named"`
	Config *AgentConfig `json:"config,omitempty"`
}

// Listed is m with its lists present (empty rather than null), as the API shows it.
func (m JobMetadata) Listed() JobMetadata {
	m.ResolvedAgents = nonNil(m.ResolvedAgents)
	return m
}

// Job statuses.
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobCancelled = "cancelled"
	// JobPaused is a run_list job whose spend reached its max_cost_usd: it starts no attempt until
	// its ceiling is raised or lifted (Store.SetJobCeiling), then goes on where it stopped.
	JobPaused = "paused"
)

// JobEnded reports whether a job status is final.
func JobEnded(status string) bool { return status == JobCompleted || status == JobCancelled }

// Job kinds: how a job was launched.
const (
	JobSingle = "single" // POST /v2/rollouts/run
	JobRemote = "remote" // POST /v2/rollouts/submit
	JobBatch  = "batch"  // POST /v2/rollouts/run_list
)

// JobRow is a job as one caller sees it.
type JobRow struct {
	Job     `bun:",extend"`
	IsOwner bool `bun:"-"`
	CanEdit bool `bun:"-"`
}

func (r *JobRow) fill(c *Caller) {
	r.IsOwner = c != nil && r.TeamID == c.TeamID
	r.CanEdit = r.IsOwner
}

// GetJob reads a job of the caller's team, or a published one (the only kind an anonymous caller
// sees).
func (s *Store) GetJob(ctx context.Context, c *Caller, id uuid.UUID) (*JobRow, error) {
	var row JobRow
	if err := s.DB.NewSelect().Model(&row).Where("j.id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "get job")
	}
	if row.PublishedAt == nil && (c == nil || row.TeamID != c.TeamID) {
		return nil, fmt.Errorf("get job: %w", ErrNotFound)
	}
	row.fill(c)
	return &row, nil
}

// ListJobs pages the caller's team's jobs, newest first.
func (s *Store) ListJobs(ctx context.Context, c *Caller, tasksetID *uuid.UUID, limit, offset int) ([]JobRow, int, error) {
	var rows []JobRow
	q := s.DB.NewSelect().Model(&rows).Where("j.team_id = ?", c.TeamID)
	if tasksetID != nil {
		q = q.Where("j.taskset_id = ?", *tasksetID)
	}
	total, err := q.OrderExpr("j.created_at DESC, j.id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list jobs: %w", err)
	}
	for i := range rows {
		rows[i].fill(c)
	}
	return rows, int(total), nil
}

// ActiveJobs lists the caller's team's jobs that have not ended (pending, running, or paused at
// their ceiling: live all the same, and cancelled with the rest), newest first.
func (s *Store) ActiveJobs(ctx context.Context, c *Caller) ([]JobRow, error) {
	var rows []JobRow
	if err := s.DB.NewSelect().Model(&rows).Where("j.team_id = ? AND j.status IN (?)", c.TeamID, bun.In([]string{JobPending, JobRunning, JobPaused})).
		OrderExpr("j.created_at DESC, j.id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("active jobs: %w", err)
	}
	for i := range rows {
		rows[i].fill(c)
	}
	return rows, nil
}

// editableJob checks that the caller's team owns a job it can see.
func (s *Store) editableJob(ctx context.Context, c *Caller, id uuid.UUID) (*JobRow, error) {
	j, err := s.GetJob(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !j.CanEdit {
		return nil, fmt.Errorf("job %s: read-only for the caller: %w", id, ErrForbidden)
	}
	return j, nil
}

// UpdateJob renames or redescribes a job; nil leaves a field as it is.
func (s *Store) UpdateJob(ctx context.Context, c *Caller, id uuid.UUID, name, description *string) (*JobRow, error) {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return nil, err
	}
	q := s.DB.NewUpdate().Model((*Job)(nil)).Set("updated_at = ?", now()).Where("id = ?", id)
	if name != nil {
		q = q.Set("name = ?", *name)
	}
	if description != nil {
		q = q.Set("description = ?", *description)
	}
	if _, err := q.Exec(ctx); err != nil {
		return nil, fmt.Errorf("update job: %w", err)
	}
	return s.GetJob(ctx, c, id)
}

// PublishJob makes a job and its traces readable without credentials.
func (s *Store) PublishJob(ctx context.Context, c *Caller, id uuid.UUID) error {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return err
	}
	_, err := s.DB.NewUpdate().Model((*Job)(nil)).Set("published_at = COALESCE(published_at, ?)", now()).Set("updated_at = ?", now()).Where("id = ?", id).Exec(ctx)
	return err
}

// SetJobValidity marks every trace of a job valid or invalid and returns how many changed.
func (s *Store) SetJobValidity(ctx context.Context, c *Caller, id uuid.UUID, valid bool) (int, error) {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return 0, err
	}
	q := s.DB.NewUpdate().Model((*Trace)(nil)).Set("is_valid = ?", valid).Set("updated_at = ?", now()).
		Where("job_id = ? AND is_valid = ?", id, !valid)
	if valid {
		// An attempt retried in the job (RetryJob) stays replaced: its retry counts instead.
		q = q.Where(notReplaced)
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("set job validity: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// JobSummary counts a job's traces per status; AvgReward is over valid graded traces.
type JobSummary struct {
	Counts      map[string]int
	TotalTraces int
	TotalTasks  int
	AvgReward   *float64
}

// SummarizeJob counts a job's traces.
func (s *Store) SummarizeJob(ctx context.Context, c *Caller, id uuid.UUID) (*JobSummary, error) {
	if _, err := s.GetJob(ctx, c, id); err != nil {
		return nil, err
	}
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	if err := s.DB.NewSelect().Model((*Trace)(nil)).ColumnExpr("status, COUNT(*) AS n").Where("job_id = ?", id).GroupExpr("status").Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("job summary: %w", err)
	}
	sum := &JobSummary{Counts: map[string]int{}}
	for _, st := range TraceStatuses {
		sum.Counts[st] = 0
	}
	for _, r := range rows {
		sum.Counts[r.Status] = r.N
		sum.TotalTraces += r.N
	}
	var agg struct {
		Tasks int      `bun:"tasks"`
		Avg   *float64 `bun:"avg"`
	}
	if err := s.DB.NewSelect().Model((*Trace)(nil)).
		ColumnExpr("COUNT(DISTINCT task_id) AS tasks").
		ColumnExpr("AVG(CASE WHEN is_valid AND reward IS NOT NULL AND status = ? THEN reward END) AS avg", TraceCompleted).
		Where("job_id = ?", id).Scan(ctx, &agg); err != nil {
		return nil, fmt.Errorf("job summary: %w", err)
	}
	sum.TotalTasks, sum.AvgReward = agg.Tasks, agg.Avg
	return sum, nil
}

// SetJobStatus records a job's status.
func (s *Store) SetJobStatus(ctx context.Context, jobID uuid.UUID, status string) error {
	_, err := s.DB.NewUpdate().Model((*Job)(nil)).Set("status = ?", status).Set("updated_at = ?", now()).Where("id = ?", jobID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("set job status: %w", err)
	}
	return nil
}

// JobTraceIDsPage lists a page of a job's trace ids in launch order.
func (s *Store) JobTraceIDsPage(ctx context.Context, jobID uuid.UUID, offset, limit int) ([]uuid.UUID, error) {
	ids := []uuid.UUID{}
	if err := s.DB.NewSelect().Model((*Trace)(nil)).Column("id").Where("job_id = ?", jobID).OrderExpr("created_at ASC, id ASC").
		Offset(int64(offset)).Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("job traces page: %w", err)
	}
	return ids, nil
}

// CancelPendingTraces cancels a job's traces that never started (pending or marked cancelling
// before any work) and returns how many.
func (s *Store) CancelPendingTraces(ctx context.Context, jobID uuid.UUID) (int, error) {
	res, err := s.DB.NewUpdate().Model((*Trace)(nil)).Set("status = ?", TraceCancelled).Set("stop_reason = ?", StopCancelled).
		Set("end_time = ?", now()).Set("updated_at = ?", now()).
		Where("job_id = ? AND (status = ? OR (status = ? AND start_time IS NULL))", jobID, TracePending, TraceCancelling).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("cancel pending traces: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// MarkJobCancelling cancels the job's traces that never started, moves live ones to cancelling,
// and returns the live ones.
func (s *Store) MarkJobCancelling(ctx context.Context, jobID uuid.UUID) ([]uuid.UUID, error) {
	var live []uuid.UUID
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := tx.NewSelect().Model((*Trace)(nil)).Column("id").
			Where("job_id = ? AND status IN (?)", jobID, bun.In([]string{TraceInitializing, TraceRunning, TraceCancelling})).Scan(ctx, &live); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Trace)(nil)).Set("status = ?", TraceCancelling).Set("updated_at = ?", now()).
			Where("job_id = ? AND status IN (?)", jobID, bun.In([]string{TraceInitializing, TraceRunning})).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Trace)(nil)).Set("status = ?", TraceCancelled).Set("stop_reason = ?", StopCancelled).
			Set("end_time = ?", now()).Set("updated_at = ?", now()).Where("job_id = ? AND status = ?", jobID, TracePending).Exec(ctx); err != nil {
			return err
		}
		// A job that no RunList is running (a single-run job, or one whose attempts all ended)
		// is cancelled here and stays so; a RunList marks its job cancelled once its live
		// attempts have ended.
		var job Job
		if err := tx.NewSelect().Model(&job).Where("id = ?", jobID).Scan(ctx); err != nil {
			return err
		}
		if JobEnded(job.Status) || (job.IsRunList() && (job.Status == JobRunning || job.Status == JobPaused) && len(live) > 0) {
			return nil
		}
		_, err := tx.NewUpdate().Model((*Job)(nil)).Set("status = ?", JobCancelled).Set("updated_at = ?", now()).Where("id = ?", jobID).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark job cancelling: %w", err)
	}
	return live, nil
}

// SettleSingleRunJob marks a single-run job running while it has unfinished traces and completed
// once all have ended. Jobs driven by a RunList are left alone. It returns the trace's job.
func (s *Store) SettleSingleRunJob(ctx context.Context, traceID uuid.UUID) (*Job, error) {
	var job Job
	if err := s.DB.NewSelect().Model(&job).Where("id = (SELECT job_id FROM traces WHERE id = ?)", traceID).Scan(ctx); err != nil {
		return nil, notFound(err, "settle job")
	}
	if job.IsRunList() || job.Status == JobCancelled {
		return &job, nil
	}
	open, err := s.DB.NewSelect().Model((*Trace)(nil)).Where("job_id = ? AND status NOT IN (?)", job.ID, bun.In([]string{TraceCompleted, TraceError, TraceCancelled})).Count(ctx)
	if err != nil {
		return nil, fmt.Errorf("settle job: %w", err)
	}
	status := JobRunning
	if open == 0 {
		status = JobCompleted
	}
	return &job, s.SetJobStatus(ctx, job.ID, status)
}

// IsRunList reports whether a RunList workflow drives the job (a single-run job, from
// rollouts/run or rollouts/submit, completes when its last trace ends).
func (j *Job) IsRunList() bool { return j.Kind == JobBatch }
