package rollouts

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Which failed attempts RetryJob runs again.
const (
	// RetryInfra: attempts the infrastructure failed (Trace.InfraFailure: no host took them, their
	// sandbox was lost on every try), and those the job's budget stopped (StopBudget): nothing of
	// theirs was the agent's.
	RetryInfra = "infra"
	// RetryAll: every attempt that ended in error, those the agent, its model or the
	// environment failed (scored 0) too. Completed attempts are never run again.
	RetryAll = "all"
)

// notReplaced holds for an attempt (tr) that no retry of its job replaces.
const notReplaced = "NOT EXISTS (SELECT 1 FROM traces AS r WHERE r.retry_of = tr.id)"

// RetriedAttempt is a failed attempt, and the attempt of the same job that runs it again.
type RetriedAttempt struct {
	Replaced uuid.UUID
	By       uuid.UUID
}

// RetryResult is what RetryJob launched: the job, back to running when anything is retried, the
// attempts and their replacements, and where the replacements start in the job's launch order (a
// RunList started there runs them).
type RetryResult struct {
	Job     *models.Job
	Retried []RetriedAttempt
	From    int
	// Was is the job's status before the retry (what UndoRetry puts back).
	Was string
}

// RetryJob launches again, in the same job (a run_list job that has ended), its attempts that
// failed as which says (RetryInfra or RetryAll), each at most once: a new pending attempt copies
// the failed one's task version, model, group, agent and configuration and names it (RetryOf),
// and the failed one is marked invalid, so the job's results count its replacement. One
// transaction, which holds the job's row.
func (s *Store) RetryJob(ctx context.Context, c *models.Caller, jobID uuid.UUID, which string) (RetryResult, error) {
	var out RetryResult
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		// The job's row, held until the commit (SQLite holds the database's write lock): two
		// retries of one job do not both retry an attempt.
		var job models.Job
		if err := tx.NewUpdate().Model(&job).Set("updated_at = updated_at").Where("id = ? AND team_id = ?", jobID, c.TeamID).
			Returning("*").Scan(ctx); err != nil {
			return models.NotFound(err, "job")
		}
		out.Job, out.Was = &job, job.Status
		if err := checkRetry(ctx, tx, c, &job); err != nil {
			return err
		}
		var last struct {
			N    int       `bun:"n"`
			Last time.Time `bun:"last"`
		}
		if err := tx.NewSelect().Model((*models.Trace)(nil)).ColumnExpr("COUNT(*) AS n, MAX(created_at) AS last").Where("job_id = ?", jobID).Scan(ctx, &last); err != nil {
			return err
		}
		out.From = last.N
		failed, err := retryable(ctx, tx, jobID, which)
		if err != nil {
			return err
		}
		if len(failed) == 0 {
			return nil
		}
		// After every attempt of the job in launch order (created_at, id), which the RunList
		// that runs them pages from out.From: later than the latest, whatever the clocks said.
		at := models.Now()
		if !at.After(last.Last) {
			at = last.Last.Add(time.Millisecond)
		}
		fresh := make([]models.Trace, len(failed))
		ids := make([]uuid.UUID, len(failed))
		for i, f := range failed {
			old := f.ID
			t := f
			t.ID, t.RetryOf, t.Status, t.StopReason, t.Error, t.Reward, t.EvaluationResult = uuid.New(), &old, models.TracePending, "", "", nil, nil
			t.Attempt, t.InstanceID, t.StartTime, t.EndTime, t.FinishSeq, t.IsValid, t.InfraFailure = 0, nil, nil, nil, nil, true, false
			t.CreatedAt = at.Add(time.Duration(i) * time.Microsecond) // in the failed ones' order
			t.UpdatedAt = t.CreatedAt
			fresh[i], ids[i] = t, old
			out.Retried = append(out.Retried, RetriedAttempt{Replaced: old, By: t.ID})
		}
		if err := models.InsertInBatches(ctx, tx, fresh, ""); err != nil {
			return fmt.Errorf("launch the retries of job %s: %w", jobID, err)
		}
		if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("is_valid = ?", false).Set("updated_at = ?", at).
			Where("id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
			return err
		}
		job.Status, job.UpdatedAt = models.JobRunning, at
		_, err = tx.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", models.JobRunning).Set("updated_at = ?", at).Where("id = ?", jobID).Exec(ctx)
		return err
	})
	if err != nil {
		return RetryResult{}, err
	}
	return out, nil
}

// checkRetry refuses the retry of a job that is not a run_list job, has not ended (or has
// attempts that have not), or was launched by another member than the caller (an owner may).
func checkRetry(ctx context.Context, tx bun.Tx, c *models.Caller, job *models.Job) error {
	switch {
	case !job.IsRunList():
		return fmt.Errorf("job %s was launched by rollouts/%s: only a run_list job is retried in place (launch the attempt again): %w",
			job.ID, map[string]string{models.JobSingle: "run", models.JobRemote: "submit"}[job.Kind], models.ErrConflict)
	case !JobEnded(job.Status):
		return fmt.Errorf("job %s is %s: retry it once it has ended: %w", job.ID, job.Status, models.ErrConflict)
	case !c.LauncherOrOwner(job.CreatedBy):
		// The retries run as the job's launcher (their keys, their bill) and take its
		// attempts out of the team's results: the launcher's call, or an owner's.
		return fmt.Errorf("job %s was launched by another member: its launcher or an owner retries it: %w", job.ID, models.ErrForbidden)
	}
	// A job reads ended a moment before its RunList has closed, or while a cancel still stops
	// its attempts: nothing is retried until every attempt has ended.
	open, err := tx.NewSelect().Model((*models.Trace)(nil)).Where("job_id = ? AND status NOT IN (?)", job.ID, bun.In(terminalStatuses)).Count(ctx)
	if err != nil {
		return err
	}
	if open > 0 {
		return fmt.Errorf("job %s still has %d attempts that have not ended: retry it once they have: %w", job.ID, open, models.ErrConflict)
	}
	return nil
}

// retryable are the job's attempts that which retries (valid, not replaced yet), in launch order:
// those that ended in error (with RetryInfra, only the infrastructure's), and those a budget
// stopped, which were never scored and are retried as an infrastructure failure is.
func retryable(ctx context.Context, tx bun.Tx, jobID uuid.UUID, which string) ([]models.Trace, error) {
	errored := "tr.status = ?"
	if which == RetryInfra {
		errored += " AND tr.infra_failure"
	}
	var failed []models.Trace
	err := tx.NewSelect().Model(&failed).Where("tr.job_id = ? AND tr.is_valid", jobID).
		Where("(("+errored+") OR (tr.status = ? AND tr.stop_reason = ?))", models.TraceError, models.TraceCancelled, models.StopBudget).
		Where(notReplaced).OrderExpr("tr.created_at, tr.id").Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("the failed attempts of job %s: %w", jobID, err)
	}
	return failed, nil
}

// UndoRetry takes back a retry whose workflow could not start: its attempts that never began are
// deleted, the ones they replaced count again, and the job reads as it did when none of the
// retries began (an attempt that did begin, its workflow having started after all, stays, and
// so does the job's running).
func (s *Store) UndoRetry(ctx context.Context, res RetryResult) error {
	if len(res.Retried) == 0 {
		return nil
	}
	return s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		fresh := make([]uuid.UUID, len(res.Retried))
		for i, r := range res.Retried {
			fresh[i] = r.By
		}
		var replaced []uuid.UUID
		if err := tx.NewDelete().Model((*models.Trace)(nil)).Where("id IN (?) AND start_time IS NULL", bun.In(fresh)).
			Returning("retry_of").Scan(ctx, &replaced); err != nil {
			return err
		}
		if len(replaced) > 0 {
			if _, err := tx.NewUpdate().Model((*models.Trace)(nil)).Set("is_valid = ?", true).Where("id IN (?)", bun.In(replaced)).Exec(ctx); err != nil {
				return err
			}
		}
		if len(replaced) < len(fresh) {
			return nil
		}
		_, err := tx.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", res.Was).Where("id = ? AND status = ?", res.Job.ID, models.JobRunning).Exec(ctx)
		return err
	})
}
