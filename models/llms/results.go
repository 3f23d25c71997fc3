package llms

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ScoreRange is a band of per-task success: a task is in it when its mean reward, as a percent,
// lies in [Low, High]. The spec names three: 0_99 (not yet mastered: anything short of always
// solved), 5_75 (learnable: solved sometimes, not mostly) and 15_40 (the hard-but-reachable band
// that training gains most from).
type ScoreRange struct{ Low, High float64 }

// ScoreRanges are the spec's three bands, in its order.
var ScoreRanges = [3]ScoreRange{{0, 99}, {5, 75}, {15, 40}}

// In says whether a mean reward in [0, 1] lies in the band.
func (r ScoreRange) In(mean float64) bool {
	p := mean * 100
	return p >= r.Low && p <= r.High
}

// TaskScore is how a model did on one task.
type TaskScore struct {
	TaskID    uuid.UUID `bun:"task_id,type:uuid"`
	TaskName  string    `bun:"task_name"`
	TasksetID uuid.UUID `bun:"taskset_id,type:uuid"`
	Traces    int       `bun:"n"`
	AvgScore  float64   `bun:"avg_score"`
	MinScore  float64   `bun:"min_score"`
	MaxScore  float64   `bun:"max_score"`
	// Builds counts the environment builds (by digest) its attempts ran, Versions the task's
	// versions they ran: a mean over more than one of either pools what may not measure the same.
	Builds   int `bun:"builds"`
	Versions int `bun:"versions"`
}

// Mixed reports whether the task's mean pools attempts of several environment builds or task
// versions.
func (t TaskScore) Mixed() bool { return t.Builds > 1 || t.Versions > 1 }

// TasksetResult is how a model did on one taskset.
type TasksetResult struct {
	TasksetID       uuid.UUID
	TasksetName     string
	IsPublic        bool
	Purpose         string
	TotalTasks      int
	TasksWithTraces int
	// AvgScore is the mean over its tasks with traces of each task's mean reward.
	AvgScore         float64
	InRange          [3]int
	MinTracesPerTask int
	MaxTracesPerTask int
	PerTask          []TaskScore
	// Mixed: some task's mean pools several environment builds or task versions (TaskScore.Mixed).
	Mixed bool
}

// ModelResults is how a model did on each taskset the caller's team ran it on: every completed,
// valid attempt with a reward (of the given checkpoints only, when any are given: the attempts
// whose model calls one of them answered). purpose "" is every taskset.
func (s *Store) ModelResults(ctx context.Context, c *models.Caller, modelID uuid.UUID, checkpoints []uuid.UUID, purpose string) ([]TasksetResult, error) {
	if _, err := s.GetModel(ctx, c, modelID); err != nil {
		return nil, err
	}
	q := s.DB.NewSelect().TableExpr("traces AS tr").Join("JOIN tasks AS tk ON tk.id = tr.task_id").
		ColumnExpr("tr.task_id, tk.name AS task_name, tk.taskset_id, count(*) AS n").
		ColumnExpr("AVG(tr.reward) AS avg_score, MIN(tr.reward) AS min_score, MAX(tr.reward) AS max_score").
		ColumnExpr("COUNT(DISTINCT NULLIF("+models.LastBuildDigestExpr+", '')) AS builds, COUNT(DISTINCT tr.task_version_id) AS versions").
		Where("tr.team_id = ? AND tr.model_id = ? AND tr.status = ? AND tr.reward IS NOT NULL AND tr.is_valid", c.TeamID, modelID, models.TraceCompleted).
		// A brought agent's attempts measure the agent, not the model: a job's entrants show them.
		Where("tr.agent_build_id IS NULL").
		GroupExpr("tr.task_id, tk.name, tk.taskset_id")
	if len(checkpoints) > 0 {
		var known []uuid.UUID
		if err := s.DB.NewSelect().Model((*models.Checkpoint)(nil)).Column("id").Where("model_id = ? AND id IN (?)", modelID, bun.In(checkpoints)).
			Scan(ctx, &known); err != nil {
			return nil, fmt.Errorf("model results: %w", err)
		}
		for _, id := range checkpoints {
			if !slices.Contains(known, id) {
				return nil, models.ValidationError{{Location: "checkpoint_ids", Message: "no checkpoint of this model has this id", Value: id.String()}}
			}
		}
		q = q.Where("tr.id IN (?)", s.DB.NewSelect().Model((*models.InferenceLog)(nil)).Column("trace_id").
			Where("team_id = ? AND checkpoint_id IN (?) AND trace_id IS NOT NULL", c.TeamID, bun.In(checkpoints)))
	}
	var scores []TaskScore
	if err := q.Scan(ctx, &scores); err != nil {
		return nil, fmt.Errorf("model results: %w", err)
	}
	out := []TasksetResult{}
	if len(scores) == 0 {
		return out, nil
	}
	byTaskset := map[uuid.UUID][]TaskScore{}
	ids := []uuid.UUID{}
	for _, sc := range scores {
		if byTaskset[sc.TasksetID] == nil {
			ids = append(ids, sc.TasksetID)
		}
		byTaskset[sc.TasksetID] = append(byTaskset[sc.TasksetID], sc)
	}
	var sets []struct {
		ID      uuid.UUID `bun:"id,type:uuid"`
		Name    string    `bun:"name"`
		Public  bool      `bun:"public"`
		Purpose string    `bun:"purpose"`
		Tasks   int       `bun:"tasks"`
	}
	sq := s.DB.NewSelect().TableExpr("tasksets AS t").ColumnExpr("t.id, t.name, t.public, t.purpose").
		ColumnExpr("(SELECT count(*) FROM tasks AS tk WHERE tk.taskset_id = t.id) AS tasks").Where("t.id IN (?)", bun.In(ids))
	if purpose != "" {
		sq = sq.Where("t.purpose = ?", purpose)
	}
	if err := sq.OrderExpr("t.name ASC, t.id ASC").Scan(ctx, &sets); err != nil {
		return nil, fmt.Errorf("model results: %w", err)
	}
	for _, ts := range sets {
		per := byTaskset[ts.ID]
		sort.Slice(per, func(i, j int) bool { return per[i].TaskName < per[j].TaskName })
		r := TasksetResult{TasksetID: ts.ID, TasksetName: ts.Name, IsPublic: ts.Public, Purpose: ts.Purpose, TotalTasks: ts.Tasks,
			TasksWithTraces: len(per), PerTask: per, MinTracesPerTask: math.MaxInt}
		sum := 0.0
		for _, p := range per {
			sum += p.AvgScore
			r.Mixed = r.Mixed || p.Mixed()
			r.MinTracesPerTask, r.MaxTracesPerTask = min(r.MinTracesPerTask, p.Traces), max(r.MaxTracesPerTask, p.Traces)
			for i, band := range ScoreRanges {
				if band.In(p.AvgScore) {
					r.InRange[i]++
				}
			}
		}
		r.AvgScore = sum / float64(len(per))
		out = append(out, r)
	}
	return out, nil
}

// SuggestedTaskset is a suite the model has not been run on.
type SuggestedTaskset struct {
	TasksetID   uuid.UUID `bun:"id,type:uuid"`
	TasksetName string    `bun:"name"`
	IsPublic    bool      `bun:"public"`
	TaskCount   int       `bun:"task_count"`
	Purpose     string    `bun:"purpose"`
	UpdatedAt   time.Time `bun:"updated_at"`
}

// SuggestQuery narrows suggestions.
type SuggestQuery struct {
	Exclude []uuid.UUID
	Search  string
	Purpose string
	Limit   int
}

// SuggestTasksets lists the tasksets with tasks that the caller may run (its team's, those
// shared with it, and public ones) on which the caller's team has no attempt of the model,
// most recently updated first.
func (s *Store) SuggestTasksets(ctx context.Context, c *models.Caller, modelID uuid.UUID, q SuggestQuery) ([]SuggestedTaskset, error) {
	if _, err := s.GetModel(ctx, c, modelID); err != nil {
		return nil, err
	}
	sel := s.DB.NewSelect().TableExpr("tasksets AS t").ColumnExpr("t.id, t.name, t.public, t.purpose, t.updated_at").
		ColumnExpr("(SELECT count(*) FROM tasks AS tk WHERE tk.taskset_id = t.id) AS task_count").
		WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
			return w.Where("t.team_id = ?", c.TeamID).WhereOr("t.public").
				WhereOr("t.id IN (SELECT sh.taskset_id FROM taskset_shares AS sh WHERE sh.team_id = ?)", c.TeamID)
		}).
		Where("EXISTS (SELECT 1 FROM tasks AS tk WHERE tk.taskset_id = t.id)").
		Where("NOT EXISTS (SELECT 1 FROM traces AS tr JOIN tasks AS tk ON tk.id = tr.task_id WHERE tk.taskset_id = t.id AND tr.model_id = ? AND tr.team_id = ?)",
			modelID, c.TeamID)
	if len(q.Exclude) > 0 {
		sel = sel.Where("t.id NOT IN (?)", bun.In(q.Exclude))
	}
	if q.Search != "" {
		sel = sel.Where("LOWER(t.name) LIKE ? ESCAPE '\\'", "%"+models.EscapeLike(strings.ToLower(q.Search))+"%")
	}
	if q.Purpose != "" {
		sel = sel.Where("t.purpose = ?", q.Purpose)
	}
	out := []SuggestedTaskset{}
	if err := sel.OrderExpr("t.updated_at DESC, t.id ASC").Limit(int64(q.Limit)).Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("suggest tasksets: %w", err)
	}
	return out, nil
}
