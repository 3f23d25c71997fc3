package rollouts

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// FinishedAttempt is an ended attempt of a job as the job's stream of finished attempts gives it:
// numbered in the order the job's attempts were seen to end (Seq, from 1), and saying whether it
// was the last of its group to end.
type FinishedAttempt struct {
	Seq           int64      `bun:"finish_seq"`
	TraceID       uuid.UUID  `bun:"id,type:uuid"`
	TaskID        *uuid.UUID `bun:"task_id,type:uuid"`
	TaskVersionID *uuid.UUID `bun:"task_version_id,type:uuid"`
	ModelID       *uuid.UUID `bun:"model_id,type:uuid"`
	GroupID       string     `bun:"group_id"`
	Status        string     `bun:"status"`
	StopReason    string     `bun:"stop_reason"`
	Error         string     `bun:"error"`
	Reward        *float64   `bun:"reward"`
	IsValid       bool       `bun:"is_valid"`
	EndTime       *time.Time `bun:"end_time"`
	// RetryOf is the failed attempt this one runs again (proctor jobs retry), nil for others.
	RetryOf *uuid.UUID `bun:"retry_of,type:uuid"`
	// GroupSize is how many attempts the job has in the group (1 for an attempt of no group), and
	// GroupComplete whether every one of them had ended by this one: true on exactly one
	// attempt of each group, its last.
	GroupSize     int  `bun:"-"`
	GroupComplete bool `bun:"-"`
}

// FinishedAttempts numbers the job's ended attempts that have no number yet (see
// [Store.numberFinished]) and returns those numbered after after, at most limit, in order. The
// numbers are stored: the same call later, on any server, answers the same attempts in the same
// order, which is what lets a client that lost its stream resume from the last number it read.
func (s *Store) FinishedAttempts(ctx context.Context, jobID uuid.UUID, after int64, limit int) ([]FinishedAttempt, error) {
	if err := s.numberFinished(ctx, jobID); err != nil {
		return nil, err
	}
	var out []FinishedAttempt
	err := s.DB.NewSelect().Model((*models.Trace)(nil)).
		Column("id", "finish_seq", "task_id", "task_version_id", "model_id", "group_id", "status", "stop_reason", "error", "reward", "is_valid", "end_time", "retry_of").
		Where("job_id = ? AND finish_seq > ?", jobID, after).OrderExpr("finish_seq").Limit(int64(limit)).Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("finished attempts of job %s: %w", jobID, err)
	}
	var groups []string
	for _, a := range out {
		if a.GroupID != "" {
			groups = append(groups, a.GroupID)
		}
	}
	type groupRow struct {
		GroupID string `bun:"group_id"`
		Size    int    `bun:"size"`
		Ended   int    `bun:"ended"`
		Last    int64  `bun:"last"`
	}
	var rows []groupRow
	if len(groups) > 0 {
		err := s.DB.NewSelect().Model((*models.Trace)(nil)).
			ColumnExpr("group_id, COUNT(*) AS size, COUNT(finish_seq) AS ended, COALESCE(MAX(finish_seq), 0) AS last").
			Where("job_id = ? AND group_id IN (?)", jobID, bun.In(groups)).
			// A retried attempt has left its group: its retry stands in its place.
			Where(notReplaced).
			Group("group_id").Scan(ctx, &rows)
		if err != nil {
			return nil, fmt.Errorf("groups of job %s: %w", jobID, err)
		}
	}
	byGroup := make(map[string]groupRow, len(rows))
	for _, r := range rows {
		byGroup[r.GroupID] = r
	}
	for i := range out {
		a := &out[i]
		if a.GroupID == "" {
			a.GroupSize, a.GroupComplete = 1, true
			continue
		}
		g := byGroup[a.GroupID]
		a.GroupSize, a.GroupComplete = g.Size, g.Ended == g.Size && g.Last == a.Seq
	}
	return out, nil
}

// JobFinishState says how far the job's stream of finished attempts can go: its status, how many
// attempts it has, and how many of them have been numbered.
type JobFinishState struct {
	Status   string `bun:"status"`
	Attempts int    `bun:"attempts"`
	Numbered int64  `bun:"finish_seq"`
}

// JobFinishState reads the job's status, its attempts and the last finish number given.
func (s *Store) JobFinishState(ctx context.Context, jobID uuid.UUID) (JobFinishState, error) {
	var st JobFinishState
	err := s.DB.NewSelect().Model((*models.Job)(nil)).
		ColumnExpr("j.status, j.finish_seq, (SELECT COUNT(*) FROM traces WHERE traces.job_id = j.id) AS attempts").
		Where("j.id = ?", jobID).Scan(ctx, &st)
	if err != nil {
		return st, models.NotFound(err, "job finish state")
	}
	return st, nil
}

// numberFinished gives the job's ended attempts that have no finish number the job's next
// numbers, in the order they ended (then by id), in one transaction that first takes the job's
// row (its finish_seq counter): two servers numbering at once wait for each other, and each
// attempt gets one number, forever (an ended attempt never changes status again).
func (s *Store) numberFinished(ctx context.Context, jobID uuid.UUID) error {
	pending, err := s.DB.NewSelect().Model((*models.Trace)(nil)).
		Where("job_id = ? AND finish_seq IS NULL AND status IN (?)", jobID, bun.In(terminalStatuses)).Count(ctx)
	if err != nil || pending == 0 {
		return err
	}
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// The counter's row, locked until the commit (SQLite holds the database's write lock).
		var last int64
		if err := tx.NewUpdate().Model((*models.Job)(nil)).Set("finish_seq = finish_seq").Where("id = ?", jobID).
			Returning("finish_seq").Scan(ctx, &last); err != nil {
			return fmt.Errorf("number the finished attempts of job %s: %w", jobID, err)
		}
		var ids []uuid.UUID
		if err := tx.NewSelect().Model((*models.Trace)(nil)).Column("id").
			Where("job_id = ? AND finish_seq IS NULL AND status IN (?)", jobID, bun.In(terminalStatuses)).
			OrderExpr("end_time IS NULL, end_time, id").Scan(ctx, &ids); err != nil || len(ids) == 0 {
			return err // none: another reader numbered them first
		}
		for _, id := range ids {
			last++
			if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("finish_seq = ?", last).Where("id = ?", id).Exec(ctx); err != nil {
				return err
			}
		}
		_, err := tx.NewUpdate().Model((*models.Job)(nil)).Set("finish_seq = ?", last).Where("id = ?", jobID).Exec(ctx)
		return err
	})
}
