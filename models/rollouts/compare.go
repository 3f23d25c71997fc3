package rollouts

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// ScoredAttempt is an attempt of a job as a comparison reads it: its task, the task's version,
// the environment build it ran on and its reward.
type ScoredAttempt struct {
	TraceID       uuid.UUID
	TaskID        uuid.UUID
	TaskName      string
	TaskVersionID uuid.UUID
	// Digest is the digest of the build its last try ran ("" without an environment).
	Digest string
	Reward float64
}

// JobAttempts is what a comparison reads of one job.
type JobAttempts struct {
	Job *JobRow
	// Scored are its completed, valid attempts with a reward (the attempts every result counts);
	// Unscored counts the others (running, failed, cancelled, invalidated or unrewarded).
	Scored   []ScoredAttempt
	Unscored int
}

// JobAttemptsForComparison reads a job the caller can see (its team's, or a published one) and
// its attempts, in two queries.
func (s *Store) JobAttemptsForComparison(ctx context.Context, c *models.Caller, jobID uuid.UUID) (*JobAttempts, error) {
	job, err := s.GetJob(ctx, c, jobID)
	if err != nil {
		return nil, err
	}
	var rows []struct {
		ID            uuid.UUID  `bun:"id,type:uuid"`
		TaskID        *uuid.UUID `bun:"task_id,type:uuid"`
		TaskName      string     `bun:"task_name"`
		TaskVersionID *uuid.UUID `bun:"task_version_id,type:uuid"`
		Digest        string     `bun:"digest"`
		Reward        *float64   `bun:"reward"`
		Scored        bool       `bun:"scored"`
	}
	err = s.DB.NewSelect().TableExpr("traces AS tr").Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").
		ColumnExpr("tr.id, tr.task_id, COALESCE(tk.name, '') AS task_name, tr.task_version_id, tr.reward").
		ColumnExpr("(tr.status = ? AND tr.is_valid AND tr.reward IS NOT NULL AND tr.task_id IS NOT NULL AND tr.task_version_id IS NOT NULL) AS scored", models.TraceCompleted).
		ColumnExpr(models.LastBuildDigestExpr+" AS digest").
		Where("tr.job_id = ?", jobID).OrderExpr("tr.created_at ASC, tr.id ASC").Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("job attempts: %w", err)
	}
	out := &JobAttempts{Job: job, Scored: make([]ScoredAttempt, 0, len(rows))}
	for _, r := range rows {
		if !r.Scored {
			out.Unscored++
			continue
		}
		out.Scored = append(out.Scored, ScoredAttempt{TraceID: r.ID, TaskID: *r.TaskID, TaskName: r.TaskName,
			TaskVersionID: *r.TaskVersionID, Digest: r.Digest, Reward: *r.Reward})
	}
	return out, nil
}
