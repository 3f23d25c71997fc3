package rollouts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/uptrace/bun"
)

// TraceStatuses lists every status, in lifecycle order.
var TraceStatuses = []string{models.TracePending, models.TraceInitializing, models.TraceRunning, models.TraceCompleted, models.TraceError, models.TraceCancelling, models.TraceCancelled}

// terminalStatuses are the final statuses.
var terminalStatuses = []string{models.TraceCompleted, models.TraceError, models.TraceCancelled}

// Terminal reports whether a trace status is final.
func Terminal(status string) bool { return slices.Contains(terminalStatuses, status) }

// SetTracesValidity marks the listed traces of the caller's team valid or invalid.
func (s *Store) SetTracesValidity(ctx context.Context, c *models.Caller, ids []uuid.UUID, valid bool) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := s.DB.NewUpdate().Model((*models.Trace)(nil)).Set("is_valid = ?", valid).Set("updated_at = ?", models.Now()).
		Where("team_id = ? AND id IN (?) AND is_valid = ?", c.TeamID, bun.In(ids), !valid).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("set traces validity: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// TraceRow is a trace as one caller sees it.
type TraceRow struct {
	models.Trace `bun:",extend"`
	Published    bool   `bun:"published,scanonly"`
	JobName      string `bun:"job_name,scanonly"`
	CanEdit      bool   `bun:"-"`
}

func traceSelect(s *Store, dest any) *bun.SelectQuery {
	return s.DB.NewSelect().Model(dest).ColumnExpr("tr.*").
		ColumnExpr("(j.published_at IS NOT NULL) AS published").ColumnExpr("j.name AS job_name").
		Join("JOIN jobs AS j ON j.id = tr.job_id")
}

// GetTrace reads a trace of the caller's team, or one of a published job.
func (s *Store) GetTrace(ctx context.Context, c *models.Caller, id uuid.UUID) (*TraceRow, error) {
	var row TraceRow
	if err := traceSelect(s, &row).Where("tr.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get trace")
	}
	if !row.Published && (c == nil || row.TeamID != c.TeamID) {
		return nil, fmt.Errorf("get trace: %w", models.ErrNotFound)
	}
	row.CanEdit = c != nil && row.TeamID == c.TeamID
	return &row, nil
}

// ListJobTraces pages a job's traces, oldest first.
func (s *Store) ListJobTraces(ctx context.Context, c *models.Caller, jobID uuid.UUID, limit, offset int) ([]TraceRow, int, error) {
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
func (s *Store) UpdateTraceText(ctx context.Context, c *models.Caller, id uuid.UUID, name, description *string) (*TraceRow, error) {
	t, err := s.GetTrace(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !t.CanEdit {
		return nil, fmt.Errorf("trace %s: %w", id, models.ErrForbidden)
	}
	q := s.DB.NewUpdate().Model((*models.Trace)(nil)).Set("updated_at = ?", models.Now()).Where("id = ?", id)
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
	EvaluationResult *models.EvaluationResult
	Attempt          int
	StartTime        *time.Time
	EndTime          *time.Time
	// InfraFailure marks an error the infrastructure caused (see Trace.InfraFailure).
	InfraFailure bool
}

// TransitionTrace writes a status change. A trace in a terminal status stays as it is, and a
// cancelling trace only moves to cancelled: a late writer (a retried activity, a slow worker)
// cannot resurrect or overwrite a finished attempt. It reports whether the row changed.
func (s *Store) TransitionTrace(ctx context.Context, id uuid.UUID, u TraceUpdate) (bool, error) {
	res, err := transition(s.DB, id, u).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("transition trace %s: %w", id, err)
	}
	n, _ := res.RowsAffected()
	if n > 0 && Terminal(u.Status) {
		// Its sandbox is gone by now (teardown runs before the end is written) or its worker is:
		// either way the attempt's environment time ends with it.
		if err := s.endTraceInstances(ctx, id, "the attempt ended "+u.Status); err != nil {
			return true, err
		}
	}
	return n > 0, nil
}

// TryStart is how [Store.BeginTry] found the trace.
type TryStart struct {
	// Began is false when the trace was closed (cancelled) before the try began: nothing runs.
	Began bool
	// EnvLogSeq is where the trace's environment log goes on (an earlier try's lines stay). Where
	// its events go on is read when they are written: a superseded try's straggling writer may
	// still append while this try's sandbox starts.
	EnvLogSeq int `bun:"env_log_seq"`
	// Env is the environment the try's sandbox launches with, when BeginTry was given whose it
	// is (nil otherwise, and when the try did not begin).
	Env map[string]string `bun:"-"`
	// Secrets are the values of the launching member's secrets that Env holds: what the try's
	// records must not show.
	Secrets []string `bun:"-"`
}

// BeginTry marks a trace initializing for try attempt (its start time is the first try's) and
// reads where the try's environment log goes on; given launch, it also reads the environment the
// try's sandbox launches with (see credentials.Store.LaunchEnv). One transaction: a try whose environment
// does not open leaves the trace as it was.
func (s *Store) BeginTry(ctx context.Context, id uuid.UUID, attempt int, at time.Time, launch *credentials.LaunchFor) (TryStart, error) {
	var try TryStart
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var rows []TryStart
		err := transition(tx, id, TraceUpdate{Status: models.TraceInitializing, Attempt: attempt, StartTime: &at}).
			Returning("(SELECT COALESCE(MAX(seq), -1) + 1 FROM trace_logs WHERE trace_id = ? AND source = ?) AS env_log_seq", id, LogEnv).
			Scan(ctx, &rows)
		if err != nil || len(rows) == 0 {
			return err
		}
		try = rows[0]
		try.Began = true
		if launch != nil {
			try.Env, try.Secrets, err = credentials.LaunchEnvIn(ctx, tx, *launch)
		}
		return err
	})
	if err != nil {
		var envErr *models.LaunchEnvError
		if errors.As(err, &envErr) {
			return TryStart{}, err
		}
		return TryStart{}, fmt.Errorf("begin try %d of trace %s: %w", attempt, id, err)
	}
	return try, nil
}

// transition is the statement of a TraceUpdate on db: see [Store.TransitionTrace].
func transition(db bun.IDB, id uuid.UUID, u TraceUpdate) *bun.UpdateQuery {
	q := db.NewUpdate().Model((*models.Trace)(nil)).Set("updated_at = ?", models.Now()).Where("id = ?", id).
		Where("status NOT IN (?)", bun.In(terminalStatuses))
	if u.Status != "" {
		q = q.Set("status = ?", u.Status)
		if u.Status != models.TraceCancelled {
			q = q.Where("status <> ?", models.TraceCancelling)
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
	if u.InfraFailure {
		q = q.Set("infra_failure = ?", true)
	}
	return q
}

// OpenTraceIDs returns those of ids whose traces have not ended.
func (s *Store) OpenTraceIDs(ctx context.Context, ids []uuid.UUID) ([]uuid.UUID, error) {
	open := []uuid.UUID{}
	if len(ids) == 0 {
		return open, nil
	}
	if err := s.DB.NewSelect().Model((*models.Trace)(nil)).Column("id").Where("id IN (?)", bun.In(ids)).
		Where("status NOT IN (?)", bun.In(terminalStatuses)).OrderExpr("id ASC").Scan(ctx, &open); err != nil {
		return nil, fmt.Errorf("open traces: %w", err)
	}
	return open, nil
}

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
func (s *Store) RelatedTraces(ctx context.Context, c *models.Caller, anchor *TraceRow, q RelatedQuery) ([]RelatedRow, error) {
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
			return nil, fmt.Errorf("recent traces need a caller: %w", models.ErrInvalidCredentials)
		}
		sel = sel.Where("j.created_by = ?", c.UserID)
	case RelatedDiscover:
	default:
		return nil, models.ValidationError{{Location: "kind", Message: "kind must be job, task, recent or discover", Value: q.Kind}}
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
