package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Which failed attempts RetryJob runs again.
const (
	// RetryInfra: attempts that ended in error with no reward, the infrastructure having failed
	// on every try (no host, a sandbox lost again and again): nothing of theirs was scored.
	RetryInfra = "infra"
	// RetryAll: every attempt that ended in error, those the agent, its model or the
	// environment failed (scored 0) too. Completed attempts are never run again.
	RetryAll = "all"
)

// RetriedAttempt is a failed attempt, and the attempt of the same job that runs it again.
type RetriedAttempt struct {
	Replaced uuid.UUID
	By       uuid.UUID
}

// RetryResult is what RetryJob launched: the job, back to running when anything is retried, the
// attempts and their replacements, and where the replacements start in the job's launch order (a
// RunList started there runs them).
type RetryResult struct {
	Job     *Job
	Retried []RetriedAttempt
	From    int
}

// RetryJob launches again, in the same job (a run_list job that has ended), its attempts that
// failed as which says (RetryInfra or RetryAll), each at most once: a new pending attempt copies
// the failed one's task version, model, group, agent and configuration and names it (RetryOf),
// and the failed one is marked invalid, so the job's results count its replacement. One
// transaction, which holds the job's row.
func (s *Store) RetryJob(ctx context.Context, c *Caller, jobID uuid.UUID, which string) (RetryResult, error) {
	var out RetryResult
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// The job's row, held until the commit (SQLite holds the database's write lock): two
		// retries of one job do not both retry an attempt.
		var job Job
		if err := tx.NewUpdate().Model(&job).Set("updated_at = updated_at").Where("id = ? AND team_id = ?", jobID, c.TeamID).
			Returning("*").Scan(ctx); err != nil {
			return notFound(err, "job")
		}
		out.Job = &job
		switch {
		case !job.IsRunList():
			return fmt.Errorf("job %s was launched by rollouts/%s: only a run_list job is retried in place (launch the attempt again): %w",
				jobID, map[string]string{JobSingle: "run", JobRemote: "submit"}[job.Kind], ErrConflict)
		case job.Status != JobCompleted && job.Status != JobCancelled:
			return fmt.Errorf("job %s is %s: retry it once it has ended: %w", jobID, job.Status, ErrConflict)
		}
		n, err := tx.NewSelect().Model((*Trace)(nil)).Where("job_id = ?", jobID).Count(ctx)
		if err != nil {
			return err
		}
		out.From = int(n)
		q := tx.NewSelect().Model((*Trace)(nil)).Where("tr.job_id = ? AND tr.status = ? AND tr.is_valid", jobID, TraceError).
			Where("NOT EXISTS (SELECT 1 FROM traces AS r WHERE r.retry_of = tr.id)").OrderExpr("tr.created_at, tr.id")
		if which == RetryInfra {
			q = q.Where("tr.reward IS NULL")
		}
		var failed []Trace
		if err := q.Scan(ctx, &failed); err != nil {
			return fmt.Errorf("the failed attempts of job %s: %w", jobID, err)
		}
		if len(failed) == 0 {
			return nil
		}
		at := now()
		fresh := make([]Trace, len(failed))
		ids := make([]uuid.UUID, len(failed))
		for i, f := range failed {
			old := f.ID
			t := f
			t.ID, t.RetryOf, t.Status, t.StopReason, t.Error, t.Reward, t.EvaluationResult = uuid.New(), &old, TracePending, "", "", nil, nil
			t.Attempt, t.InstanceID, t.StartTime, t.EndTime, t.FinishSeq, t.IsValid = 0, nil, nil, nil, nil, true
			// After every attempt of the job in launch order, in the failed ones' order.
			t.CreatedAt = at.Add(time.Duration(i) * time.Microsecond)
			t.UpdatedAt = t.CreatedAt
			fresh[i], ids[i] = t, old
			out.Retried = append(out.Retried, RetriedAttempt{Replaced: old, By: t.ID})
		}
		if err := insertInBatches(ctx, tx, fresh, ""); err != nil {
			return fmt.Errorf("launch the retries of job %s: %w", jobID, err)
		}
		if _, err := tx.NewUpdate().Model((*Trace)(nil)).Set("is_valid = ?", false).Set("updated_at = ?", at).
			Where("id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
			return err
		}
		job.Status, job.UpdatedAt = JobRunning, at
		_, err = tx.NewUpdate().Model((*Job)(nil)).Set("status = ?", JobRunning).Set("updated_at = ?", at).Where("id = ?", jobID).Exec(ctx)
		return err
	})
	if err != nil {
		return RetryResult{}, err
	}
	return out, nil
}

// UndoRetry takes back a retry whose workflow could not start: its attempts, which never ran,
// are deleted, the ones they replaced count again, and the job reads as it did (ended).
func (s *Store) UndoRetry(ctx context.Context, res RetryResult) error {
	if len(res.Retried) == 0 {
		return nil
	}
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		fresh, replaced := make([]uuid.UUID, len(res.Retried)), make([]uuid.UUID, len(res.Retried))
		for i, r := range res.Retried {
			fresh[i], replaced[i] = r.By, r.Replaced
		}
		if _, err := tx.NewDelete().Model((*Trace)(nil)).Where("id IN (?) AND status = ?", bun.In(fresh), TracePending).Exec(ctx); err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Trace)(nil)).Set("is_valid = ?", true).Where("id IN (?)", bun.In(replaced)).Exec(ctx); err != nil {
			return err
		}
		_, err := tx.NewUpdate().Model((*Job)(nil)).Set("status = ?", JobCompleted).Where("id = ?", res.Job.ID).Exec(ctx)
		return err
	})
}
