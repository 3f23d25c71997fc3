package rollouts

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ResolvedAgentOf is how a job's metadata names model m.
func ResolvedAgentOf(m *models.LLMModel) models.ResolvedAgent {
	return models.ResolvedAgent{ModelID: m.ID, ModelName: m.ModelName, Name: m.Name, Provider: m.Provider, Adapter: m.Adapter}
}

// JobEnded reports whether a job status is final.
func JobEnded(status string) bool {
	return status == models.JobCompleted || status == models.JobCancelled
}

// JobRow is a job as one caller sees it.
type JobRow struct {
	models.Job `bun:",extend"`
	IsOwner    bool `bun:"-"`
	CanEdit    bool `bun:"-"`
}

func (r *JobRow) fill(c *models.Caller) {
	r.IsOwner = c != nil && r.TeamID == c.TeamID
	r.CanEdit = r.IsOwner
}

// GetJob reads a job of the caller's team, or a published one (the only kind an anonymous caller
// sees).
func (s *Store) GetJob(ctx context.Context, c *models.Caller, id uuid.UUID) (*JobRow, error) {
	var row JobRow
	if err := s.DB.NewSelect().Model(&row).Where("j.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get job")
	}
	if row.PublishedAt == nil && (c == nil || row.TeamID != c.TeamID) {
		return nil, fmt.Errorf("get job: %w", models.ErrNotFound)
	}
	row.fill(c)
	return &row, nil
}

// ListJobs pages the caller's team's jobs, newest first.
func (s *Store) ListJobs(ctx context.Context, c *models.Caller, tasksetID *uuid.UUID, limit, offset int) ([]JobRow, int, error) {
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
func (s *Store) ActiveJobs(ctx context.Context, c *models.Caller) ([]JobRow, error) {
	var rows []JobRow
	if err := s.DB.NewSelect().Model(&rows).Where("j.team_id = ? AND j.status IN (?)", c.TeamID, bun.In([]string{models.JobPending, models.JobRunning, models.JobPaused})).
		OrderExpr("j.created_at DESC, j.id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("active jobs: %w", err)
	}
	for i := range rows {
		rows[i].fill(c)
	}
	return rows, nil
}

// editableJob checks that the caller's team owns a job it can see.
func (s *Store) editableJob(ctx context.Context, c *models.Caller, id uuid.UUID) (*JobRow, error) {
	j, err := s.GetJob(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !j.CanEdit {
		return nil, fmt.Errorf("job %s: read-only for the caller: %w", id, models.ErrForbidden)
	}
	return j, nil
}

// UpdateJob renames or redescribes a job; nil leaves a field as it is.
func (s *Store) UpdateJob(ctx context.Context, c *models.Caller, id uuid.UUID, name, description *string) (*JobRow, error) {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return nil, err
	}
	q := s.DB.NewUpdate().Model((*models.Job)(nil)).Set("updated_at = ?", models.Now()).Where("id = ?", id)
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
func (s *Store) PublishJob(ctx context.Context, c *models.Caller, id uuid.UUID) error {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return err
	}
	_, err := s.DB.NewUpdate().Model((*models.Job)(nil)).Set("published_at = COALESCE(published_at, ?)", models.Now()).Set("updated_at = ?", models.Now()).Where("id = ?", id).Exec(ctx)
	return err
}

// SetJobValidity marks every trace of a job valid or invalid and returns how many changed.
func (s *Store) SetJobValidity(ctx context.Context, c *models.Caller, id uuid.UUID, valid bool) (int, error) {
	if _, err := s.editableJob(ctx, c, id); err != nil {
		return 0, err
	}
	q := s.DB.NewUpdate().Model((*models.Trace)(nil)).Set("is_valid = ?", valid).Set("updated_at = ?", models.Now()).
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
func (s *Store) SummarizeJob(ctx context.Context, c *models.Caller, id uuid.UUID) (*JobSummary, error) {
	if _, err := s.GetJob(ctx, c, id); err != nil {
		return nil, err
	}
	var rows []struct {
		Status string `bun:"status"`
		N      int    `bun:"n"`
	}
	if err := s.DB.NewSelect().Model((*models.Trace)(nil)).ColumnExpr("status, COUNT(*) AS n").Where("job_id = ?", id).GroupExpr("status").Scan(ctx, &rows); err != nil {
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
	if err := s.DB.NewSelect().Model((*models.Trace)(nil)).
		ColumnExpr("COUNT(DISTINCT task_id) AS tasks").
		ColumnExpr("AVG(CASE WHEN is_valid AND reward IS NOT NULL AND status = ? THEN reward END) AS avg", models.TraceCompleted).
		Where("job_id = ?", id).Scan(ctx, &agg); err != nil {
		return nil, fmt.Errorf("job summary: %w", err)
	}
	sum.TotalTasks, sum.AvgReward = agg.Tasks, agg.Avg
	return sum, nil
}

// SetJobStatus records a job's status.
func (s *Store) SetJobStatus(ctx context.Context, jobID uuid.UUID, status string) error {
	_, err := s.DB.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", status).Set("updated_at = ?", models.Now()).Where("id = ?", jobID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("set job status: %w", err)
	}
	return nil
}

// JobTraceIDsPage lists a page of a job's trace ids in launch order.
func (s *Store) JobTraceIDsPage(ctx context.Context, jobID uuid.UUID, offset, limit int) ([]uuid.UUID, error) {
	ids := []uuid.UUID{}
	if err := s.DB.NewSelect().Model((*models.Trace)(nil)).Column("id").Where("job_id = ?", jobID).OrderExpr("created_at ASC, id ASC").
		Offset(int64(offset)).Limit(int64(limit)).Scan(ctx, &ids); err != nil {
		return nil, fmt.Errorf("job traces page: %w", err)
	}
	return ids, nil
}

// CancelPendingTraces cancels a job's traces that never started (pending or marked cancelling
// before any work) and returns how many.
func (s *Store) CancelPendingTraces(ctx context.Context, jobID uuid.UUID) (int, error) {
	res, err := s.DB.NewUpdate().Model((*models.Trace)(nil)).Set("status = ?", models.TraceCancelled).Set("stop_reason = ?", models.StopCancelled).
		Set("end_time = ?", models.Now()).Set("updated_at = ?", models.Now()).
		Where("job_id = ? AND (status = ? OR (status = ? AND start_time IS NULL))", jobID, models.TracePending, models.TraceCancelling).Exec(ctx)
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
		if err := tx.NewSelect().Model((*models.Trace)(nil)).Column("id").
			Where("job_id = ? AND status IN (?)", jobID, bun.In([]string{models.TraceInitializing, models.TraceRunning, models.TraceCancelling})).Scan(ctx, &live); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("status = ?", models.TraceCancelling).Set("updated_at = ?", models.Now()).
			Where("job_id = ? AND status IN (?)", jobID, bun.In([]string{models.TraceInitializing, models.TraceRunning})).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("status = ?", models.TraceCancelled).Set("stop_reason = ?", models.StopCancelled).
			Set("end_time = ?", models.Now()).Set("updated_at = ?", models.Now()).Where("job_id = ? AND status = ?", jobID, models.TracePending).Exec(ctx); err != nil {
			return err
		}
		// A job that no RunList is running (a single-run job, or one whose attempts all ended)
		// is cancelled here and stays so; a RunList marks its job cancelled once its live
		// attempts have ended.
		var job models.Job
		if err := tx.NewSelect().Model(&job).Where("id = ?", jobID).Scan(ctx); err != nil {
			return err
		}
		if JobEnded(job.Status) || (job.IsRunList() && (job.Status == models.JobRunning || job.Status == models.JobPaused) && len(live) > 0) {
			return nil
		}
		_, err := tx.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", models.JobCancelled).Set("updated_at = ?", models.Now()).Where("id = ?", jobID).Exec(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("mark job cancelling: %w", err)
	}
	return live, nil
}

// SettleSingleRunJob marks a single-run job running while it has unfinished traces and completed
// once all have ended. Jobs driven by a RunList are left alone. It returns the trace's job.
//
// Each caller has committed its own trace's end before it settles, and settles under the job's
// lock (SQLite: the one writer), so the last to settle counts every end: attempts ending together
// can no longer leave the job running, which a count made before another's end and written after
// its settle did.
func (s *Store) SettleSingleRunJob(ctx context.Context, traceID uuid.UUID) (*models.Job, error) {
	var job models.Job
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		q := tx.NewSelect().Model(&job).Where("id = (SELECT job_id FROM traces WHERE id = ?)", traceID)
		if s.Dialect == models.Postgres {
			q = q.For("UPDATE")
		}
		if err := q.Scan(ctx); err != nil {
			return models.NotFound(err, "settle job")
		}
		if job.IsRunList() || job.Status == models.JobCancelled {
			return nil
		}
		open, err := tx.NewSelect().Model((*models.Trace)(nil)).Where("job_id = ? AND status NOT IN (?)", job.ID, bun.In([]string{models.TraceCompleted, models.TraceError, models.TraceCancelled})).Count(ctx)
		if err != nil {
			return fmt.Errorf("settle job: %w", err)
		}
		status := models.JobRunning
		if open == 0 {
			status = models.JobCompleted
		}
		if status == job.Status {
			return nil
		}
		if _, err := tx.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", status).Set("updated_at = ?", models.Now()).Where("id = ?", job.ID).Exec(ctx); err != nil {
			return fmt.Errorf("settle job: %w", err)
		}
		job.Status = status
		return nil
	})
	return &job, err
}
