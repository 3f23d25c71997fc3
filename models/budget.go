package models

import (
	"context"
	"fmt"
	"math"

	"github.com/google/uuid"
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
	return b.Status == JobPaused || b.MaxCostUSD != nil && b.SpentUSD >= *b.MaxCostUSD
}

// String says why a job that Reached its budget may spend no more, for the attempts it stops.
func (b JobBudget) String() string {
	if b.MaxCostUSD == nil {
		return fmt.Sprintf("job %s is paused", b.JobID)
	}
	return fmt.Sprintf("job %s has spent $%g of its max_cost_usd $%g", b.JobID, b.SpentUSD, *b.MaxCostUSD)
}

// budgetRow is the part of a job's row its budget reads (its running sums are scan-only fields
// of Job, which a plain select leaves out).
type budgetRow struct {
	bun.BaseModel       `bun:"table:jobs,alias:j"`
	ID                  uuid.UUID  `bun:"id,type:uuid"`
	Status              string     `bun:"status"`
	Kind                string     `bun:"kind"`
	TeamID              uuid.UUID  `bun:"team_id,type:uuid"`
	CreatedBy           *uuid.UUID `bun:"created_by,type:uuid"`
	MaxCostUSD          *float64   `bun:"max_cost_usd"`
	SpentInferenceUSD   float64    `bun:"spent_inference_usd"`
	SpentEnvironmentUSD float64    `bun:"spent_environment_usd"`
}

// budget is the row's budget; the spend (one indexed read of the job's running instances) only
// when it has a ceiling, or always.
func (s *Store) budget(ctx context.Context, db bun.IDB, j *budgetRow, always bool) (JobBudget, error) {
	b := JobBudget{JobID: j.ID, Status: j.Status, MaxCostUSD: j.MaxCostUSD}
	if j.MaxCostUSD == nil && !always {
		return b, nil
	}
	var running []Instance
	if err := db.NewSelect().Model(&running).Where("job_id = ? AND status = ?", j.ID, InstanceRunning).Scan(ctx); err != nil {
		return b, fmt.Errorf("the spend of job %s: %w", j.ID, err)
	}
	// The sums are read again after the running instances: one that ended in between is then
	// counted twice (its cost summed, and priced as running), never missed.
	var sums budgetRow
	if err := db.NewSelect().Model(&sums).Column("spent_inference_usd", "spent_environment_usd").Where("id = ?", j.ID).Scan(ctx); err != nil {
		return b, fmt.Errorf("the spend of job %s: %w", j.ID, err)
	}
	spent, at := sums.SpentInferenceUSD+sums.SpentEnvironmentUSD, Now()
	for i := range running {
		_, cost := running[i].Usage(at)
		spent += cost
	}
	b.SpentUSD = RoundUSD(spent)
	return b, nil
}

// TraceBudget is the budget of an attempt's job, which every model call of the attempt checks
// first: one read of the job's row, and of its running instances when it has a ceiling.
func (s *Store) TraceBudget(ctx context.Context, traceID uuid.UUID) (JobBudget, error) {
	var j budgetRow
	if err := s.DB.NewSelect().Model(&j).Where("j.id = (SELECT job_id FROM traces WHERE id = ?)", traceID).Scan(ctx); err != nil {
		return JobBudget{}, NotFound(err, "the job of trace "+traceID.String())
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
		var j budgetRow
		if err := s.DB.NewSelect().Model(&j).Where("j.id = ?", jobID).Scan(ctx); err != nil {
			return JobBudget{}, NotFound(err, "job")
		}
		var err error
		if b, err = s.budget(ctx, s.DB, &j, false); err != nil || b.Status != JobRunning || !b.Reached() {
			return b, err
		}
		res, err := s.DB.NewUpdate().Model((*Job)(nil)).Set("status = ?", JobPaused).Set("updated_at = ?", Now()).
			Where("id = ? AND status = ? AND max_cost_usd <= ?", jobID, JobRunning, b.SpentUSD).Exec(ctx)
		if err != nil {
			return b, fmt.Errorf("pause job %s: %w", jobID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			b.Status = JobPaused
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
func (s *Store) SetJobCeiling(ctx context.Context, c *Caller, jobID uuid.UUID, ch CeilingChange) (CeilingResult, error) {
	var out CeilingResult
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var j budgetRow
		if err := tx.NewUpdate().Model(&j).Set("updated_at = updated_at").Where("id = ? AND team_id = ?", jobID, c.TeamID).
			Returning("id, status, kind, team_id, created_by, max_cost_usd, spent_inference_usd, spent_environment_usd").Scan(ctx); err != nil {
			return NotFound(err, "job")
		}
		switch {
		case j.Kind != JobBatch:
			return fmt.Errorf("job %s was not launched by run_list: only a run_list job has a max_cost_usd: %w", jobID, ErrConflict)
		case j.MaxCostUSD == nil:
			// A ceiling is set at launch: what runs a job launched without one never asks.
			return fmt.Errorf("job %s has no max_cost_usd (it was launched without one, or it was lifted): a ceiling is set at launch: %w", jobID, ErrConflict)
		case ch.Resume && j.Status != JobPaused:
			return fmt.Errorf("job %s is %s, not paused: nothing to resume: %w", jobID, j.Status, ErrConflict)
		case !c.LauncherOrOwner(j.CreatedBy):
			return fmt.Errorf("job %s was launched by another member: its launcher or an owner changes what it may spend: %w", jobID, ErrForbidden)
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
			return ValidationError{{Location: "max_cost_usd", Message: fmt.Sprintf(
				"job %s has spent $%g of its max_cost_usd $%g: give a higher max_cost_usd, or lift the ceiling", jobID, b.SpentUSD, ceilingOf(j.MaxCostUSD))}}
		}
		status := j.Status
		if status == JobPaused {
			if b.MaxCostUSD != nil && b.SpentUSD >= *b.MaxCostUSD {
				return ValidationError{{Location: "max_cost_usd", Value: *b.MaxCostUSD, Message: fmt.Sprintf(
					"job %s has spent $%g already: a ceiling of $%g would keep it paused; give more than it has spent", jobID, b.SpentUSD, *b.MaxCostUSD)}}
			}
			status, out.Resumed = JobRunning, true
		}
		b.Status = status
		out.Budget = b
		_, err = tx.NewUpdate().Model((*Job)(nil)).Set("max_cost_usd = ?", b.MaxCostUSD).Set("status = ?", status).
			Set("updated_at = ?", Now()).Where("id = ?", jobID).Exec(ctx)
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
	_, err := tx.NewUpdate().Model((*Job)(nil)).Set("spent_inference_usd = spent_inference_usd + ?", cost).
		Where("id = (SELECT job_id FROM traces WHERE id = ?)", traceID).Exec(ctx)
	return err
}
