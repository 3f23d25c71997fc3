package rollouts

// Job cards: the jobs of a taskset side by side (GET /v2/jobs/enriched, POST /v2/jobs/enrich).

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/uptrace/bun"
)

// TaskScorePoint is one task's score in a job card's chart.
type TaskScorePoint struct {
	TaskID     uuid.UUID
	AvgReward  *float64
	TraceCount int
}

// Ref names a row (a model, a task).
type Ref struct {
	ID   uuid.UUID `bun:"id,type:uuid"`
	Name string    `bun:"name"`
}

// JobCard is a job with the figures a results page compares jobs by.
type JobCard struct {
	Job              JobRow
	AverageAccuracy  *float64 // the mean reward of its valid, completed attempts
	CompletedTasks   int      // its completed attempts
	FailedCount      int      // its attempts in the failed category
	InvalidatedCount int
	TraceCount       int
	Models           []Ref
	Chart            []TaskScorePoint // per task, by task name
}

// JobCards computes the cards of the given jobs of the caller's team (others are left out), in
// one grouped scan of their attempts.
func (s *Store) JobCards(ctx context.Context, c *models.Caller, ids []uuid.UUID) (map[uuid.UUID]*JobCard, error) {
	out := map[uuid.UUID]*JobCard{}
	if len(ids) == 0 {
		return out, nil
	}
	var jobs []JobRow
	if err := s.DB.NewSelect().Model(&jobs).Where("j.id IN (?) AND j.team_id = ?", bun.In(ids), c.TeamID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("job cards: %w", err)
	}
	if len(jobs) == 0 {
		return out, nil
	}
	found := make([]uuid.UUID, len(jobs))
	for i := range jobs {
		jobs[i].fill(c)
		found[i] = jobs[i].ID
		out[jobs[i].ID] = &JobCard{Job: jobs[i], Models: []Ref{}, Chart: []TaskScorePoint{}}
	}
	groups, err := s.jobCardGroups(ctx, found)
	if err != nil {
		return nil, err
	}
	fillJobCards(out, groups)
	return out, nil
}

// jobCardGroup sums a job's attempts of one task and model.
type jobCardGroup struct {
	JobID     uuid.UUID  `bun:"job_id,type:uuid"`
	TaskID    *uuid.UUID `bun:"task_id,type:uuid"`
	TaskName  *string    `bun:"task_name"`
	ModelID   *uuid.UUID `bun:"model_id,type:uuid"`
	ModelName *string    `bun:"model_name"`
	N         int        `bun:"n"`
	Completed int        `bun:"completed"`
	Failed    int        `bun:"failed"`
	Invalid   int        `bun:"invalid"`
	Scored    int        `bun:"scored"`
	Sum       float64    `bun:"sum"`
}

// jobCardGroups is one grouped scan of the jobs' attempts, by job, task and model, ordered by task
// and model name; the names are joined on the groups.
func (s *Store) jobCardGroups(ctx context.Context, jobs []uuid.UUID) ([]jobCardGroup, error) {
	var groups []jobCardGroup
	agg := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr("tr.job_id, tr.task_id, tr.model_id, count(*) AS n").
		ColumnExpr("SUM(CASE WHEN tr.status = ? THEN 1 ELSE 0 END) AS completed", models.TraceCompleted).
		ColumnExpr("SUM(CASE WHEN "+categoryExpr()+" = ? THEN 1 ELSE 0 END) AS failed", CategoryFailed).
		ColumnExpr("SUM(CASE WHEN tr.is_valid THEN 0 ELSE 1 END) AS invalid").
		ColumnExpr("COUNT("+scoredExpr()+") AS scored, COALESCE(SUM("+scoredExpr()+"), 0.0) AS sum").
		Where("tr.job_id IN (?)", bun.In(jobs)).GroupExpr("tr.job_id, tr.task_id, tr.model_id")
	if err := s.DB.NewSelect().TableExpr("(?) AS g", agg).ColumnExpr("g.*, tk.name AS task_name, m.name AS model_name").
		Join("LEFT JOIN tasks AS tk ON tk.id = g.task_id").Join("LEFT JOIN llm_models AS m ON m.id = g.model_id").
		OrderExpr("tk.name ASC, m.name ASC").Scan(ctx, &groups); err != nil {
		return nil, fmt.Errorf("job cards: %w", err)
	}
	return groups, nil
}

// fillJobCards sums the groups into the cards: counts, models, the chart of tasks (in the groups'
// task order) and the mean reward of the scored attempts.
func fillJobCards(out map[uuid.UUID]*JobCard, groups []jobCardGroup) {
	type taskAcc struct {
		n, scored int
		sum       float64
	}
	perTask := map[uuid.UUID]map[uuid.UUID]*taskAcc{}
	scored := map[uuid.UUID][2]float64{}
	for _, g := range groups {
		card := out[g.JobID]
		card.TraceCount += g.N
		card.CompletedTasks += g.Completed
		card.FailedCount += g.Failed
		card.InvalidatedCount += g.Invalid
		acc := scored[g.JobID]
		scored[g.JobID] = [2]float64{acc[0] + g.Sum, acc[1] + float64(g.Scored)}
		if g.ModelID != nil && g.ModelName != nil && !slices.ContainsFunc(card.Models, func(r Ref) bool { return r.ID == *g.ModelID }) {
			card.Models = append(card.Models, Ref{ID: *g.ModelID, Name: *g.ModelName})
		}
		if g.TaskID == nil || g.TaskName == nil {
			continue // a deleted task
		}
		if perTask[g.JobID] == nil {
			perTask[g.JobID] = map[uuid.UUID]*taskAcc{}
		}
		t := perTask[g.JobID][*g.TaskID]
		if t == nil {
			t = &taskAcc{}
			perTask[g.JobID][*g.TaskID] = t
			card.Chart = append(card.Chart, TaskScorePoint{TaskID: *g.TaskID}) // by task name: the groups come so
		}
		t.n, t.scored, t.sum = t.n+g.N, t.scored+g.Scored, t.sum+g.Sum
	}
	for id, card := range out {
		for i := range card.Chart {
			t := perTask[id][card.Chart[i].TaskID]
			card.Chart[i].TraceCount = t.n
			if t.scored > 0 {
				avg := t.sum / float64(t.scored)
				card.Chart[i].AvgReward = &avg
			}
		}
		sort.Slice(card.Models, func(i, j int) bool { return card.Models[i].Name < card.Models[j].Name })
		if acc := scored[id]; acc[1] > 0 {
			avg := acc[0] / acc[1]
			card.AverageAccuracy = &avg
		}
	}
}

// TasksetJobs pages the caller's team's jobs of a taskset, newest first, with the taskset's
// tasks (id and name, by name).
func (s *Store) TasksetJobs(ctx context.Context, c *models.Caller, tasksetID uuid.UUID, limit, offset int) ([]uuid.UUID, int, []Ref, error) {
	if _, err := catalog.Of(s.Store).GetTaskset(ctx, c, tasksetID); err != nil {
		return nil, 0, nil, err
	}
	ids := []uuid.UUID{}
	total, err := s.DB.NewSelect().Model((*models.Job)(nil)).Column("id").Where("team_id = ? AND taskset_id = ?", c.TeamID, tasksetID).
		OrderExpr("created_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx, &ids)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("taskset jobs: %w", err)
	}
	tasks := []Ref{}
	if err := s.DB.NewSelect().Table("tasks").Column("id", "name").Where("taskset_id = ?", tasksetID).OrderExpr("name ASC, id ASC").
		Scan(ctx, &tasks); err != nil {
		return nil, 0, nil, fmt.Errorf("taskset jobs: %w", err)
	}
	return ids, int(total), tasks, nil
}
