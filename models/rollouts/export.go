package rollouts

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ExportFilter selects a job's attempts for an export.
type ExportFilter struct {
	// ValidOnly leaves out invalidated attempts.
	ValidOnly bool
	// MinReward and MaxReward bound the reward (an attempt without one is left out when either
	// is set).
	MinReward, MaxReward *float64
	// Statuses keeps attempts in one of them (none: any).
	Statuses []string
	// Category keeps one category (Category*; "" or all: any).
	Category string
}

// ExportCursor is where an export resumes: after the attempt created at CreatedAt with ID, in
// the order attempts were launched.
type ExportCursor struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// ExportedAttempt is one attempt as an export writes it.
type ExportedAttempt struct {
	Trace     models.Trace
	TaskName  string
	ModelName string
	// Digest is the environment build its last try ran ("" without an environment).
	Digest string
	// Events are its last try's, in order (superseded tries left out).
	Events []models.TraceEvent
}

// ExportPage reads up to limit attempts of a job after the cursor (nil: from the first), in
// launch order, with their events: two queries.
func (s *Store) ExportPage(ctx context.Context, jobID uuid.UUID, f ExportFilter, after *ExportCursor, limit int) ([]ExportedAttempt, error) {
	var rows []struct {
		models.Trace `bun:",extend"`
		TaskName     string `bun:"task_name,scanonly"`
		ModelName    string `bun:"model_name,scanonly"`
		Digest       string `bun:"digest,scanonly"`
	}
	q := s.DB.NewSelect().Model(&rows).
		Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").Join("LEFT JOIN llm_models AS lm ON lm.id = tr.model_id").
		ColumnExpr("tr.*, COALESCE(tk.name, '') AS task_name, COALESCE(lm.model_name, '') AS model_name").
		ColumnExpr(models.LastBuildDigestExpr+" AS digest").
		Where("tr.job_id = ?", jobID)
	if after != nil {
		q = q.Where("(tr.created_at > ? OR (tr.created_at = ? AND tr.id > ?))", after.CreatedAt, after.CreatedAt, after.ID)
	}
	if f.ValidOnly {
		q = q.Where("tr.is_valid")
	}
	if f.MinReward != nil {
		q = q.Where("tr.reward >= ?", *f.MinReward)
	}
	if f.MaxReward != nil {
		q = q.Where("tr.reward <= ?", *f.MaxReward)
	}
	if len(f.Statuses) > 0 {
		q = q.Where("tr.status IN (?)", bun.In(f.Statuses))
	}
	if f.Category != "" && f.Category != CategoryAll {
		q = q.Where(categoryExpr()+" = ?", f.Category)
	}
	if err := q.OrderExpr("tr.created_at ASC, tr.id ASC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	out := make([]ExportedAttempt, len(rows))
	if len(rows) == 0 {
		return out, nil
	}
	ids := make([]uuid.UUID, len(rows))
	at := make(map[uuid.UUID]int, len(rows))
	for i, r := range rows {
		out[i] = ExportedAttempt{Trace: r.Trace, TaskName: r.TaskName, ModelName: r.ModelName, Digest: r.Digest}
		ids[i], at[r.ID] = r.ID, i
	}
	var evs []models.TraceEvent
	if err := s.DB.NewSelect().Model(&evs).Where("trace_id IN (?) AND NOT superseded", bun.In(ids)).
		OrderExpr("trace_id, seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("export events: %w", err)
	}
	for _, e := range evs {
		out[at[e.TraceID]].Events = append(out[at[e.TraceID]].Events, e)
	}
	return out, nil
}
