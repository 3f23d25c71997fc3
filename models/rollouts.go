package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// LLMModel is a catalog entry an agent runs on: which adapter drives it and where it is served.
// Provider keys are never stored: APIKeyEnv names the environment variable that holds the key on
// the workers.
type LLMModel struct {
	bun.BaseModel     `bun:"table:llm_models,alias:m"`
	ID                uuid.UUID      `bun:"id,pk,type:uuid"`
	TeamID            *uuid.UUID     `bun:"team_id,type:uuid"`
	ModelName         string         `bun:"model_name"`
	Name              string         `bun:"name"`
	Provider          string         `bun:"provider"`
	Adapter           string         `bun:"adapter"`
	SDKAgentType      string         `bun:"sdk_agent_type"`
	BaseURL           string         `bun:"base_url"`
	APIKeyEnv         string         `bun:"api_key_env"`
	ContextWindow     int            `bun:"context_window"`
	Hidden            bool           `bun:"hidden"`
	InputCostPerToken float64        `bun:"input_cost_per_token"`
	RequestDefaults   map[string]any `bun:"request_defaults"`
	CreatedAt         time.Time      `bun:"created_at"`
	UpdatedAt         time.Time      `bun:"updated_at"`
}

// Model adapters.
const (
	AdapterOracle    = "oracle"
	AdapterOpenAI    = "openai"
	AdapterAnthropic = "anthropic"
)

// UpsertModel adds a catalog entry or updates the one of the same model_name (seeding is
// idempotent).
func (s *Store) UpsertModel(ctx context.Context, m *LLMModel) error {
	if m.ID == uuid.Nil {
		m.ID = uuid.New()
	}
	if m.RequestDefaults == nil {
		m.RequestDefaults = map[string]any{}
	}
	m.CreatedAt, m.UpdatedAt = now(), now()
	_, err := s.DB.NewInsert().Model(m).On("CONFLICT (model_name) DO UPDATE").
		Set("name = EXCLUDED.name, provider = EXCLUDED.provider, adapter = EXCLUDED.adapter, base_url = EXCLUDED.base_url, api_key_env = EXCLUDED.api_key_env, context_window = EXCLUDED.context_window, updated_at = EXCLUDED.updated_at").
		Returning("id").Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert model %s: %w", m.ModelName, err)
	}
	return nil
}

func visibleModels(q *bun.SelectQuery, c *Caller) *bun.SelectQuery {
	if c == nil {
		return q.Where("m.team_id IS NULL")
	}
	return q.Where("m.team_id IS NULL OR m.team_id = ?", c.TeamID)
}

// ListModels pages the catalog entries the caller may use (shared ones and its team's), hidden
// ones excluded, by name.
func (s *Store) ListModels(ctx context.Context, c *Caller, limit, offset int) ([]LLMModel, int, error) {
	var ms []LLMModel
	total, err := visibleModels(s.DB.NewSelect().Model(&ms), c).Where("NOT m.hidden").
		OrderExpr("m.model_name ASC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list models: %w", err)
	}
	return ms, int(total), nil
}

// GetModel reads a catalog entry the caller may use.
func (s *Store) GetModel(ctx context.Context, c *Caller, id uuid.UUID) (*LLMModel, error) {
	m := new(LLMModel)
	if err := visibleModels(s.DB.NewSelect().Model(m), c).Where("m.id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "get model")
	}
	return m, nil
}

// ResolveModel turns a model_name (or an id) into the catalog entry.
func (s *Store) ResolveModel(ctx context.Context, c *Caller, nameOrID string) (*LLMModel, error) {
	if id, err := uuid.Parse(nameOrID); err == nil {
		return s.GetModel(ctx, c, id)
	}
	m := new(LLMModel)
	if err := visibleModels(s.DB.NewSelect().Model(m), c).Where("m.model_name = ?", nameOrID).Scan(ctx); err != nil {
		return nil, notFound(err, fmt.Sprintf("model %q", nameOrID))
	}
	return m, nil
}

// Job is one batch run. Its status is derived from its traces as they finish.
type Job struct {
	bun.BaseModel `bun:"table:jobs,alias:j"`
	ID            uuid.UUID      `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID      `bun:"team_id,type:uuid"`
	CreatedBy     *uuid.UUID     `bun:"created_by,type:uuid"`
	TasksetID     *uuid.UUID     `bun:"taskset_id,type:uuid"`
	Name          string         `bun:"name"`
	Description   string         `bun:"description"`
	Status        string         `bun:"status"`
	MaxSteps      int            `bun:"max_steps"`
	GroupSize     int            `bun:"group_size"`
	MaxConcurrent int            `bun:"max_concurrent"`
	IsRemote      bool           `bun:"is_remote"`
	Metadata      map[string]any `bun:"metadata"`
	PublishedAt   *time.Time     `bun:"published_at"`
	CreatedAt     time.Time      `bun:"created_at"`
	UpdatedAt     time.Time      `bun:"updated_at"`
}

// Job statuses.
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobCancelled = "cancelled"
)

// Trace is the record of one attempt.
type Trace struct {
	bun.BaseModel    `bun:"table:traces,alias:tr"`
	ID               uuid.UUID      `bun:"id,pk,type:uuid"`
	TeamID           uuid.UUID      `bun:"team_id,type:uuid"`
	JobID            uuid.UUID      `bun:"job_id,type:uuid"`
	TaskID           *uuid.UUID     `bun:"task_id,type:uuid"`
	TaskVersionID    *uuid.UUID     `bun:"task_version_id,type:uuid"`
	ModelID          *uuid.UUID     `bun:"model_id,type:uuid"`
	GroupID          string         `bun:"group_id"`
	Name             string         `bun:"name"`
	Description      string         `bun:"description"`
	Status           string         `bun:"status"`
	StopReason       string         `bun:"stop_reason"`
	Error            string         `bun:"error"`
	Reward           *float64       `bun:"reward"`
	EvaluationResult map[string]any `bun:"evaluation_result"`
	Metadata         map[string]any `bun:"metadata"`
	RuntimeConfig    RuntimeConfig  `bun:"runtime_config"`
	MaxSteps         int            `bun:"max_steps"`
	IsValid          bool           `bun:"is_valid"`
	Attempt          int            `bun:"attempt"`
	InstanceID       *uuid.UUID     `bun:"instance_id,type:uuid"`
	StartTime        *time.Time     `bun:"start_time"`
	EndTime          *time.Time     `bun:"end_time"`
	CreatedAt        time.Time      `bun:"created_at"`
	UpdatedAt        time.Time      `bun:"updated_at"`
}

// Trace statuses and stop reasons.
const (
	TracePending      = "pending"
	TraceInitializing = "initializing"
	TraceRunning      = "running"
	TraceCompleted    = "completed"
	TraceError        = "error"
	TraceCancelling   = "cancelling"
	TraceCancelled    = "cancelled"

	StopDone      = "done"
	StopMaxSteps  = "max_steps"
	StopTimeout   = "timeout"
	StopCancelled = "cancelled"
	StopError     = "error"
)

// TraceStatuses lists every status, in lifecycle order.
var TraceStatuses = []string{TracePending, TraceInitializing, TraceRunning, TraceCompleted, TraceError, TraceCancelling, TraceCancelled}

// Terminal reports whether a trace status is final.
func Terminal(status string) bool {
	return status == TraceCompleted || status == TraceError || status == TraceCancelled
}

// TraceEvent is one step of a trajectory. (trace_id, seq) is unique: a retried writer that appends
// the same seq again writes nothing.
type TraceEvent struct {
	bun.BaseModel `bun:"table:trace_events,alias:ev"`
	TraceID       uuid.UUID      `bun:"trace_id,pk,type:uuid"`
	Seq           int            `bun:"seq,pk"`
	ID            string         `bun:"id"`
	Attempt       int            `bun:"attempt"`
	Kind          string         `bun:"kind"`
	Text          string         `bun:"text"`
	ParentID      string         `bun:"parent_id"`
	Data          map[string]any `bun:"data"`
	Superseded    bool           `bun:"superseded"`
	StartedAt     time.Time      `bun:"started_at"`
	EndedAt       *time.Time     `bun:"ended_at"`
}

// Trace event kinds.
const (
	EventSystem     = "system_message"
	EventUser       = "user_message"
	EventAssistant  = "assistant_message"
	EventToolCall   = "tool_call"
	EventToolResult = "tool_result"
	EventSetup      = "setup"
	EventEvaluate   = "evaluate"
	EventError      = "error"
)

// TraceLog is one line of an attempt's worker log or its environment's output.
type TraceLog struct {
	bun.BaseModel `bun:"table:trace_logs,alias:tl"`
	TraceID       uuid.UUID `bun:"trace_id,pk,type:uuid"`
	Source        string    `bun:"source,pk"`
	Seq           int       `bun:"seq,pk"`
	Stream        string    `bun:"stream"`
	Line          string    `bun:"line"`
	Time          time.Time `bun:"time"`
}

// Log sources.
const (
	LogWorker = "worker"
	LogEnv    = "env"
)

// LaunchTrace is one attempt to create.
type LaunchTrace struct {
	TraceID       uuid.UUID
	TaskVersionID uuid.UUID
	ModelID       uuid.UUID
	GroupID       string
	Name          string
	// RuntimeConfig overrides the task version's, field by field; nil runs the version's.
	RuntimeConfig *RuntimeConfig
	MaxSteps      int
	Metadata      map[string]any
}

// Launch creates a job (or adds to the caller's existing one) with its attempts, all pending.
type Launch struct {
	JobID         *uuid.UUID
	Name          string
	TasksetID     *uuid.UUID
	MaxSteps      int
	GroupSize     int
	MaxConcurrent int
	Metadata      map[string]any
	Traces        []LaunchTrace
}

// LaunchJob writes a job and its pending traces in one transaction, before any workflow starts,
// so that a poll right after launching finds them. A trace id the caller's team already has is
// not created again (launches are idempotent on client-minted trace ids); one another team has is
// a conflict.
func (s *Store) LaunchJob(ctx context.Context, c *Caller, l Launch) (*Job, []Trace, error) {
	job := &Job{}
	var traces []Trace
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if l.JobID != nil {
			err := tx.NewSelect().Model(job).Where("id = ?", *l.JobID).Scan(ctx)
			switch {
			case err == nil && job.TeamID != c.TeamID:
				return fmt.Errorf("job %s belongs to another team: %w", *l.JobID, ErrConflict)
			case err == nil:
			case isNoRows(err):
				job = nil
			default:
				return err
			}
		} else {
			job = nil
		}
		if job == nil {
			id := uuid.New()
			if l.JobID != nil {
				id = *l.JobID
			}
			if l.Metadata == nil {
				l.Metadata = map[string]any{}
			}
			job = &Job{ID: id, TeamID: c.TeamID, CreatedBy: &c.UserID, TasksetID: l.TasksetID, Name: l.Name, Status: JobPending,
				MaxSteps: l.MaxSteps, GroupSize: l.GroupSize, MaxConcurrent: l.MaxConcurrent, Metadata: l.Metadata,
				CreatedAt: now(), UpdatedAt: now()}
			if _, err := tx.NewInsert().Model(job).Exec(ctx); err != nil {
				return err
			}
		}
		var fresh []Trace
		for _, lt := range l.Traces {
			var existing Trace
			err := tx.NewSelect().Model(&existing).Where("id = ?", lt.TraceID).Scan(ctx)
			if err == nil {
				if existing.TeamID != c.TeamID {
					return fmt.Errorf("trace %s exists in another team: %w", lt.TraceID, ErrConflict)
				}
				traces = append(traces, existing)
				continue
			}
			if !isNoRows(err) {
				return err
			}
			var v TaskVersion
			if err := tx.NewSelect().Model(&v).Where("id = ?", lt.TaskVersionID).Scan(ctx); err != nil {
				return notFound(err, "task version "+lt.TaskVersionID.String())
			}
			rc := v.RuntimeConfig
			if lt.RuntimeConfig != nil {
				rc = lt.RuntimeConfig.Over(v.RuntimeConfig)
			}
			if lt.Metadata == nil {
				lt.Metadata = map[string]any{}
			}
			modelID := lt.ModelID
			t := Trace{ID: lt.TraceID, TeamID: c.TeamID, JobID: job.ID, TaskID: &v.TaskID, TaskVersionID: &v.ID, ModelID: &modelID,
				GroupID: lt.GroupID, Name: lt.Name, Status: TracePending, Metadata: lt.Metadata, RuntimeConfig: rc,
				MaxSteps: lt.MaxSteps, IsValid: true, CreatedAt: now(), UpdatedAt: now()}
			if t.Name == "" {
				t.Name = v.Name
			}
			traces = append(traces, t)
			fresh = append(fresh, t)
		}
		for start := 0; start < len(fresh); start += insertBatch {
			batch := fresh[start:min(start+insertBatch, len(fresh))]
			// Two launches racing with the same client-minted id: the second writes nothing.
			if _, err := tx.NewInsert().Model(&batch).On("CONFLICT (id) DO NOTHING").Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("launch job: %w", err)
	}
	return job, traces, nil
}

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

// ActiveJobs lists the caller's team's pending and running jobs, newest first.
func (s *Store) ActiveJobs(ctx context.Context, c *Caller) ([]JobRow, error) {
	var rows []JobRow
	if err := s.DB.NewSelect().Model(&rows).Where("j.team_id = ? AND j.status IN (?)", c.TeamID, bun.In([]string{JobPending, JobRunning})).
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
	res, err := s.DB.NewUpdate().Model((*Trace)(nil)).Set("is_valid = ?", valid).Set("updated_at = ?", now()).
		Where("job_id = ? AND is_valid = ?", id, !valid).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("set job validity: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// SetTracesValidity marks the listed traces of the caller's team valid or invalid.
func (s *Store) SetTracesValidity(ctx context.Context, c *Caller, ids []uuid.UUID, valid bool) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := s.DB.NewUpdate().Model((*Trace)(nil)).Set("is_valid = ?", valid).Set("updated_at = ?", now()).
		Where("team_id = ? AND id IN (?) AND is_valid = ?", c.TeamID, bun.In(ids), !valid).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("set traces validity: %w", err)
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

// TraceRow is a trace as one caller sees it.
type TraceRow struct {
	Trace     `bun:",extend"`
	Published bool   `bun:"published,scanonly"`
	JobName   string `bun:"job_name,scanonly"`
	CanEdit   bool   `bun:"-"`
}

func traceSelect(s *Store, dest any) *bun.SelectQuery {
	return s.DB.NewSelect().Model(dest).ColumnExpr("tr.*").
		ColumnExpr("(j.published_at IS NOT NULL) AS published").ColumnExpr("j.name AS job_name").
		Join("JOIN jobs AS j ON j.id = tr.job_id")
}

// GetTrace reads a trace of the caller's team, or one of a published job.
func (s *Store) GetTrace(ctx context.Context, c *Caller, id uuid.UUID) (*TraceRow, error) {
	var row TraceRow
	if err := traceSelect(s, &row).Where("tr.id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "get trace")
	}
	if !row.Published && (c == nil || row.TeamID != c.TeamID) {
		return nil, fmt.Errorf("get trace: %w", ErrNotFound)
	}
	row.CanEdit = c != nil && row.TeamID == c.TeamID
	return &row, nil
}

// ListJobTraces pages a job's traces, oldest first.
func (s *Store) ListJobTraces(ctx context.Context, c *Caller, jobID uuid.UUID, limit, offset int) ([]TraceRow, int, error) {
	if _, err := s.GetJob(ctx, c, jobID); err != nil {
		return nil, 0, err
	}
	var rows []TraceRow
	total, err := traceSelect(s, &rows).Where("tr.job_id = ?", jobID).OrderExpr("tr.created_at ASC, tr.id ASC").
		Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list job traces: %w", err)
	}
	for i := range rows {
		rows[i].CanEdit = c != nil && rows[i].TeamID == c.TeamID
	}
	return rows, int(total), nil
}

// UpdateTraceText renames or redescribes a trace of the caller's team.
func (s *Store) UpdateTraceText(ctx context.Context, c *Caller, id uuid.UUID, name, description *string) (*TraceRow, error) {
	t, err := s.GetTrace(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !t.CanEdit {
		return nil, fmt.Errorf("trace %s: %w", id, ErrForbidden)
	}
	q := s.DB.NewUpdate().Model((*Trace)(nil)).Set("updated_at = ?", now()).Where("id = ?", id)
	if name != nil {
		q = q.Set("name = ?", *name)
	}
	if description != nil {
		q = q.Set("description = ?", *description)
	}
	if _, err := q.Exec(ctx); err != nil {
		return nil, fmt.Errorf("update trace: %w", err)
	}
	return s.GetTrace(ctx, c, id)
}

// TraceUpdate is a transition written by the engine. Zero fields are left as they are.
type TraceUpdate struct {
	Status           string
	StopReason       string
	Error            string
	Reward           *float64
	EvaluationResult map[string]any
	Attempt          int
	StartTime        *time.Time
	EndTime          *time.Time
}

// TransitionTrace writes a status change. A trace in a terminal status stays as it is, and a
// cancelling trace only moves to cancelled: a late writer (a retried activity, a slow worker)
// cannot resurrect or overwrite a finished attempt. It reports whether the row changed.
func (s *Store) TransitionTrace(ctx context.Context, id uuid.UUID, u TraceUpdate) (bool, error) {
	q := s.DB.NewUpdate().Model((*Trace)(nil)).Set("updated_at = ?", now()).Where("id = ?", id).
		Where("status NOT IN (?)", bun.In([]string{TraceCompleted, TraceError, TraceCancelled}))
	if u.Status != "" {
		q = q.Set("status = ?", u.Status)
		if u.Status != TraceCancelled {
			q = q.Where("status <> ?", TraceCancelling)
		}
	}
	if u.StopReason != "" {
		q = q.Set("stop_reason = ?", u.StopReason)
	}
	if u.Error != "" {
		q = q.Set("error = ?", u.Error)
	}
	if u.Reward != nil {
		q = q.Set("reward = ?", *u.Reward)
	}
	if u.EvaluationResult != nil {
		q = q.Set("evaluation_result = ?", u.EvaluationResult)
	}
	if u.Attempt > 0 {
		q = q.Set("attempt = ?", u.Attempt)
	}
	if u.StartTime != nil {
		q = q.Set("start_time = COALESCE(start_time, ?)", *u.StartTime)
	}
	if u.EndTime != nil {
		q = q.Set("end_time = ?", *u.EndTime)
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("transition trace %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// MarkJobTracesCancelling moves every unfinished trace of a job to cancelling and returns how many.
func (s *Store) MarkJobTracesCancelling(ctx context.Context, jobID uuid.UUID) (int, error) {
	res, err := s.DB.NewUpdate().Model((*Trace)(nil)).Set("status = ?", TraceCancelling).Set("updated_at = ?", now()).
		Where("job_id = ? AND status IN (?)", jobID, bun.In([]string{TracePending, TraceInitializing, TraceRunning})).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("cancel job traces: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
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

// OpenTraceIDs returns those of ids whose traces have not ended.
func (s *Store) OpenTraceIDs(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	open := []uuid.UUID{}
	if len(ids) == 0 {
		return open, nil
	}
	if err := s.DB.NewSelect().Model((*Trace)(nil)).Column("id").Where("id IN (?)", bun.In(ids)).
		Where("status NOT IN (?)", bun.In([]string{TraceCompleted, TraceError, TraceCancelled})).OrderExpr("id ASC").Scan(ctx, &open); err != nil {
		return nil, fmt.Errorf("open traces: %w", err)
	}
	return open, nil
}

// AppendTraceEvents writes events; one whose (trace_id, seq) exists is skipped, so a retried
// writer never duplicates an event.
func (s *Store) AppendTraceEvents(ctx context.Context, events []TraceEvent) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		if events[i].Data == nil {
			events[i].Data = map[string]any{}
		}
		if events[i].ID == "" {
			events[i].ID = fmt.Sprintf("%s-%d", events[i].TraceID, events[i].Seq)
		}
	}
	if s.Dialect == Postgres {
		return s.appendTraceEventsPG(ctx, events)
	}
	for start := 0; start < len(events); start += insertBatch {
		batch := events[start:min(start+insertBatch, len(events))]
		if _, err := s.DB.NewInsert().Model(&batch).On("CONFLICT (trace_id, seq) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("append trace events: %w", err)
		}
	}
	return nil
}

// appendTraceEventsPG inserts events as one array per column (unnest): Postgres parses eleven
// array literals instead of a VALUES row per event, which doubles the ingest rate of large
// batches.
func (s *Store) appendTraceEventsPG(ctx context.Context, events []TraceEvent) error {
	n := len(events)
	traceIDs, seqs, ids, attempts := make([]uuid.UUID, n), make([]int, n), make([]string, n), make([]int, n)
	kinds, texts, parents, data := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	superseded, started, ended := make([]bool, n), make([]time.Time, n), make([]*time.Time, n)
	for i, e := range events {
		b, err := json.Marshal(e.Data)
		if err != nil {
			return fmt.Errorf("append trace events: data of seq %d: %w", e.Seq, err)
		}
		traceIDs[i], seqs[i], ids[i], attempts[i] = e.TraceID, e.Seq, e.ID, e.Attempt
		kinds[i], texts[i], parents[i], data[i] = e.Kind, e.Text, e.ParentID, string(b)
		superseded[i], started[i], ended[i] = e.Superseded, e.StartedAt, e.EndedAt
	}
	_, err := s.DB.NewRaw(`INSERT INTO trace_events (trace_id, seq, id, attempt, kind, text, parent_id, data, superseded, started_at, ended_at)
		SELECT * FROM unnest(?::uuid[], ?::int[], ?::text[], ?::int[], ?::text[], ?::text[], ?::text[], ?::jsonb[], ?::bool[], ?::timestamptz[], ?::timestamptz[])
		ON CONFLICT (trace_id, seq) DO NOTHING`,
		pgdialect.Array(traceIDs), pgdialect.Array(seqs), pgdialect.Array(ids), pgdialect.Array(attempts), pgdialect.Array(kinds),
		pgdialect.Array(texts), pgdialect.Array(parents), pgdialect.Array(data), pgdialect.Array(superseded), pgdialect.Array(started),
		pgdialect.Array(ended)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("append trace events: %w", err)
	}
	return nil
}

// TraceEvents lists a trace's events after sinceSeq, by seq; superseded events (of a failed try)
// are included only when asked for.
func (s *Store) TraceEvents(ctx context.Context, traceID uuid.UUID, sinceSeq int, withSuperseded bool) ([]TraceEvent, error) {
	var evs []TraceEvent
	q := s.DB.NewSelect().Model(&evs).Where("trace_id = ? AND seq > ?", traceID, sinceSeq)
	if !withSuperseded {
		q = q.Where("NOT superseded")
	}
	if err := q.Order("seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("trace events: %w", err)
	}
	return evs, nil
}

// LatestSeq is the highest seq written for a trace, -1 when none.
func (s *Store) LatestSeq(ctx context.Context, traceID uuid.UUID) (int, error) {
	var seq int
	if err := s.DB.NewSelect().Model((*TraceEvent)(nil)).ColumnExpr("COALESCE(MAX(seq), -1)").Where("trace_id = ?", traceID).Scan(ctx, &seq); err != nil {
		return 0, fmt.Errorf("latest seq: %w", err)
	}
	return seq, nil
}

// SupersedeAttempt marks the events of one try of an attempt as superseded: they stay, for the
// record, but no longer count in the trajectory.
func (s *Store) SupersedeAttempt(ctx context.Context, traceID uuid.UUID, attempt int) error {
	_, err := s.DB.NewUpdate().Model((*TraceEvent)(nil)).Set("superseded = ?", true).Where("trace_id = ? AND attempt = ?", traceID, attempt).Exec(ctx)
	if err != nil {
		return fmt.Errorf("supersede attempt: %w", err)
	}
	return nil
}

// AppendTraceLogs writes log lines idempotently on (trace, source, seq).
func (s *Store) AppendTraceLogs(ctx context.Context, logs []TraceLog) error {
	if len(logs) == 0 {
		return nil
	}
	for start := 0; start < len(logs); start += insertBatch {
		batch := logs[start:min(start+insertBatch, len(logs))]
		if _, err := s.DB.NewInsert().Model(&batch).On("CONFLICT (trace_id, source, seq) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("append trace logs: %w", err)
		}
	}
	return nil
}

// NextLogSeq is the seq the next log line of a source should take.
func (s *Store) NextLogSeq(ctx context.Context, traceID uuid.UUID, source string) (int, error) {
	var seq int
	if err := s.DB.NewSelect().Model((*TraceLog)(nil)).ColumnExpr("COALESCE(MAX(seq), -1) + 1").Where("trace_id = ? AND source = ?", traceID, source).Scan(ctx, &seq); err != nil {
		return 0, fmt.Errorf("next log seq: %w", err)
	}
	return seq, nil
}

// TraceLogs pages one source's lines of a trace after afterSeq; hasMore says a next page exists.
func (s *Store) TraceLogs(ctx context.Context, traceID uuid.UUID, source string, afterSeq, limit int) ([]TraceLog, bool, error) {
	var logs []TraceLog
	if err := s.DB.NewSelect().Model(&logs).Where("trace_id = ? AND source = ? AND seq > ?", traceID, source, afterSeq).
		Order("seq ASC").Limit(int64(limit + 1)).Scan(ctx); err != nil {
		return nil, false, fmt.Errorf("trace logs: %w", err)
	}
	if len(logs) > limit {
		return logs[:limit], true, nil
	}
	return logs, false, nil
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
		_, err := tx.NewUpdate().Model((*Trace)(nil)).Set("status = ?", TraceCancelled).Set("stop_reason = ?", StopCancelled).
			Set("end_time = ?", now()).Set("updated_at = ?", now()).Where("job_id = ? AND status = ?", jobID, TracePending).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark job cancelling: %w", err)
	}
	return live, nil
}

// Job kinds, in a job's metadata: a run_list job's status is driven by its RunList workflow; a
// single-run job (rollouts/run, rollouts/submit) completes when its last trace ends.
const (
	JobKindKey     = "kind"
	JobKindRunList = "run_list"
)

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

// IsRunList reports whether a RunList workflow drives the job.
func (j *Job) IsRunList() bool { return j.Metadata[JobKindKey] == JobKindRunList }

// RelatedRow is a trace in a related-traces list, with its job's name and its model.
type RelatedRow struct {
	TraceRow      `bun:",extend"`
	ModelName     *string `bun:"model_model_name,scanonly"`
	ModelLabel    *string `bun:"model_label,scanonly"`
	ModelProvider *string `bun:"model_provider,scanonly"`
}

// Related-trace kinds.
const (
	RelatedJob      = "job"
	RelatedTask     = "task"
	RelatedRecent   = "recent"
	RelatedDiscover = "discover"
)

// RelatedQuery selects traces related to an anchor trace.
type RelatedQuery struct {
	Kind       string
	ScopeToJob bool
	Statuses   []string
	Ascending  bool
	Limit      int
}

// RelatedTraces lists traces related to one the caller sees: of the same job, of any version of
// the same task, the caller's own recent ones, or the most recent visible ones. Only traces the
// caller may see are listed (its team's, and those of published jobs).
func (s *Store) RelatedTraces(ctx context.Context, c *Caller, anchor *TraceRow, q RelatedQuery) ([]RelatedRow, error) {
	var rows []RelatedRow
	sel := traceSelect(s, &rows).
		ColumnExpr("m.model_name AS model_model_name, m.name AS model_label, m.provider AS model_provider").
		Join("LEFT JOIN llm_models AS m ON m.id = tr.model_id")
	if c == nil {
		sel = sel.Where("j.published_at IS NOT NULL")
	} else {
		sel = sel.Where("(tr.team_id = ? OR j.published_at IS NOT NULL)", c.TeamID)
	}
	switch q.Kind {
	case RelatedJob:
		sel = sel.Where("tr.job_id = ?", anchor.JobID)
	case RelatedTask:
		if anchor.TaskID == nil {
			return []RelatedRow{}, nil
		}
		sel = sel.Where("tr.task_id = ?", *anchor.TaskID)
		if q.ScopeToJob {
			sel = sel.Where("tr.job_id = ?", anchor.JobID)
		}
	case RelatedRecent:
		if c == nil {
			return nil, fmt.Errorf("recent traces need a caller: %w", ErrInvalidCredentials)
		}
		sel = sel.Where("j.created_by = ?", c.UserID)
	case RelatedDiscover:
	default:
		return nil, ValidationError{{Location: "query.kind", Message: "kind must be job, task, recent or discover", Value: q.Kind}}
	}
	if len(q.Statuses) > 0 {
		sel = sel.Where("tr.status IN (?)", bun.In(q.Statuses))
	}
	order := "DESC"
	if q.Ascending {
		order = "ASC"
	}
	if err := sel.OrderExpr("tr.created_at " + order + ", tr.id " + order).Limit(int64(q.Limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("related traces: %w", err)
	}
	for i := range rows {
		rows[i].CanEdit = c != nil && rows[i].TeamID == c.TeamID
	}
	return rows, nil
}
