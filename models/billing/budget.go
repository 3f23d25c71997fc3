package billing

import (
	"context"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// JobBudget is a job's ceiling and what it has spent: its attempts' model calls and environment
// time, priced as the job's usage prices them (ended instances at their fixed cost, running
// ones up to now).
type JobBudget struct {
	JobID      uuid.UUID
	Status     string
	MaxCostUSD *float64
	// SpentUSD is read only for a job that has a ceiling (0 otherwise).
	SpentUSD float64
}

// Reached reports whether the job may spend no more: it is paused, or its spend has reached its
// ceiling.
func (b JobBudget) Reached() bool {
	return b.Status == models.JobPaused || b.MaxCostUSD != nil && b.SpentUSD >= *b.MaxCostUSD
}

// String says why a job that Reached its budget may spend no more, for the attempts it stops.
func (b JobBudget) String() string {
	if b.MaxCostUSD == nil {
		return fmt.Sprintf("job %s is paused", b.JobID)
	}
	return fmt.Sprintf("job %s has spent $%g of its max_cost_usd $%g", b.JobID, b.SpentUSD, *b.MaxCostUSD)
}

// budget is the row's budget; the spend (one indexed read of the job's running instances) only
// when it has a ceiling, or always.
func (s *Store) budget(ctx context.Context, db bun.IDB, j *models.BudgetRow, always bool) (JobBudget, error) {
	b := JobBudget{JobID: j.ID, Status: j.Status, MaxCostUSD: j.MaxCostUSD}
	if j.MaxCostUSD == nil && !always {
		return b, nil
	}
	var running []models.Instance
	if err := db.NewSelect().Model(&running).Where("job_id = ? AND status = ?", j.ID, models.InstanceRunning).Scan(ctx); err != nil {
		return b, fmt.Errorf("the spend of job %s: %w", j.ID, err)
	}
	// The sums are read again after the running instances: one that ended in between is then
	// counted twice (its cost summed, and priced as running), never missed.
	var sums models.BudgetRow
	if err := db.NewSelect().Model(&sums).Column("spent_inference_usd", "spent_environment_usd").Where("id = ?", j.ID).Scan(ctx); err != nil {
		return b, fmt.Errorf("the spend of job %s: %w", j.ID, err)
	}
	spent, at := sums.SpentInferenceUSD+sums.SpentEnvironmentUSD, models.Now()
	for i := range running {
		_, cost := running[i].Usage(at)
		spent += cost
	}
	b.SpentUSD = models.RoundUSD(spent)
	return b, nil
}

// TraceBudget is the budget of an attempt's job, which every model call of the attempt checks
// first: one read of the job's row, and of its running instances when it has a ceiling.
func (s *Store) TraceBudget(ctx context.Context, traceID uuid.UUID) (JobBudget, error) {
	var j models.BudgetRow
	if err := s.DB.NewSelect().Model(&j).Where("j.id = (SELECT job_id FROM traces WHERE id = ?)", traceID).Scan(ctx); err != nil {
		return JobBudget{}, models.NotFound(err, "the job of trace "+traceID.String())
	}
	return s.budget(ctx, s.DB, &j, false)
}

// AdmitJob is asked by a job's RunList before it starts attempts: it pauses the job (status
// paused) when its spend has reached its ceiling, and answers its budget; a job whose budget
// Reached starts no attempt. A ceiling raised meanwhile (SetJobCeiling) is never paused on: the
// pause holds only while the ceiling it read is still reached.
func (s *Store) AdmitJob(ctx context.Context, jobID uuid.UUID) (JobBudget, error) {
	var b JobBudget
	// Its ceiling or status may change between the read and the pause: read it again, a few
	// times (a budget that is still reached refuses the job's model calls all the same).
	for range 3 {
		var j models.BudgetRow
		if err := s.DB.NewSelect().Model(&j).Where("j.id = ?", jobID).Scan(ctx); err != nil {
			return JobBudget{}, models.NotFound(err, "job")
		}
		var err error
		if b, err = s.budget(ctx, s.DB, &j, false); err != nil || b.Status != models.JobRunning || !b.Reached() {
			return b, err
		}
		res, err := s.DB.NewUpdate().Model((*models.Job)(nil)).Set("status = ?", models.JobPaused).Set("updated_at = ?", models.Now()).
			Where("id = ? AND status = ? AND max_cost_usd <= ?", jobID, models.JobRunning, b.SpentUSD).Exec(ctx)
		if err != nil {
			return b, fmt.Errorf("pause job %s: %w", jobID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			b.Status = models.JobPaused
			return b, nil
		}
	}
	return b, nil
}

// CeilingChange is a change of a job's max_cost_usd: a new ceiling, or none (Lift).
type CeilingChange struct {
	MaxCostUSD *float64
	Lift       bool
	// Resume requires the job to be paused (POST /v2/jobs/{id}/resume); without it, a paused
	// job whose new ceiling is above its spend resumes all the same (PATCH).
	Resume bool
}

// CeilingResult is a job's budget after a change, and whether the change resumed it.
type CeilingResult struct {
	Budget  JobBudget
	Resumed bool
}

// SetJobCeiling changes the ceiling of a run_list job launched with one, in one transaction that
// holds the job's row: a paused job whose new ceiling is above its spend (or lifted) is running
// again, and its RunList (told by the caller) goes on with the attempts that never started; an
// ended job's ceiling is what its retries (RetryJob) are held to. A ceiling at or below the spend
// of a paused job is refused (422), as is a resume with no new ceiling; a job launched without a
// ceiling (or whose ceiling was lifted) gets none (409). Only its launcher or an owner changes
// what a job may spend (403).
func (s *Store) SetJobCeiling(ctx context.Context, c *models.Caller, jobID uuid.UUID, ch CeilingChange) (CeilingResult, error) {
	var out CeilingResult
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var j models.BudgetRow
		if err := tx.NewUpdate().Model(&j).Set("updated_at = updated_at").Where("id = ? AND team_id = ?", jobID, c.TeamID).
			Returning("id, status, kind, team_id, created_by, max_cost_usd, spent_inference_usd, spent_environment_usd").Scan(ctx); err != nil {
			return models.NotFound(err, "job")
		}
		switch {
		case j.Kind != models.JobBatch:
			return fmt.Errorf("job %s was not launched by run_list: only a run_list job has a max_cost_usd: %w", jobID, models.ErrConflict)
		case j.MaxCostUSD == nil:
			// A ceiling is set at launch: what runs a job launched without one never asks.
			return fmt.Errorf("job %s has no max_cost_usd (it was launched without one, or it was lifted): a ceiling is set at launch: %w", jobID, models.ErrConflict)
		case ch.Resume && j.Status != models.JobPaused:
			return fmt.Errorf("job %s is %s, not paused: nothing to resume: %w", jobID, j.Status, models.ErrConflict)
		case !c.LauncherOrOwner(j.CreatedBy):
			return fmt.Errorf("job %s was launched by another member: its launcher or an owner changes what it may spend: %w", jobID, models.ErrForbidden)
		}
		b, err := s.budget(ctx, tx, &j, true)
		if err != nil {
			return err
		}
		switch {
		case ch.Lift:
			b.MaxCostUSD = nil
		case ch.MaxCostUSD != nil:
			b.MaxCostUSD = ch.MaxCostUSD
		default:
			return models.ValidationError{{Location: "max_cost_usd", Message: fmt.Sprintf(
				"job %s has spent $%g of its max_cost_usd $%g: give a higher max_cost_usd, or lift the ceiling", jobID, b.SpentUSD, ceilingOf(j.MaxCostUSD))}}
		}
		status := j.Status
		if status == models.JobPaused {
			if b.MaxCostUSD != nil && b.SpentUSD >= *b.MaxCostUSD {
				return models.ValidationError{{Location: "max_cost_usd", Value: *b.MaxCostUSD, Message: fmt.Sprintf(
					"job %s has spent $%g already: a ceiling of $%g would keep it paused; give more than it has spent", jobID, b.SpentUSD, *b.MaxCostUSD)}}
			}
			status, out.Resumed = models.JobRunning, true
		}
		b.Status = status
		out.Budget = b
		_, err = tx.NewUpdate().Model((*models.Job)(nil)).Set("max_cost_usd = ?", b.MaxCostUSD).Set("status = ?", status).
			Set("updated_at = ?", models.Now()).Where("id = ?", jobID).Exec(ctx)
		return err
	})
	return out, err
}

// ceilingOf is a ceiling for a message: none is infinite.
func ceilingOf(v *float64) float64 {
	if v == nil {
		return math.Inf(1)
	}
	return *v
}

// addJobInference adds a recorded model call's cost to its attempt's job's running sum, in the
// transaction that records the call.
func addJobInference(ctx context.Context, tx bun.Tx, traceID uuid.UUID, cost float64) error {
	_, err := tx.NewUpdate().Model((*models.Job)(nil)).Set("spent_inference_usd = spent_inference_usd + ?", cost).
		Where("id = (SELECT job_id FROM traces WHERE id = ?)", traceID).Exec(ctx)
	return err
}
