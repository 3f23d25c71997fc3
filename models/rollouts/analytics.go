package rollouts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/uptrace/bun"
)

// Trace categories of a job's results. Every trace is in exactly one of live, no_score,
// successful and failed; all is every trace.
const (
	CategoryAll        = "all"
	CategoryLive       = "live"       // not ended yet
	CategoryNoScore    = "no_score"   // ended without a reward (cancelled, or failed before grading)
	CategorySuccessful = "successful" // ended with a reward of at least SuccessReward
	CategoryFailed     = "failed"     // ended with a lower reward (an error scores 0)
)

// SuccessReward is the reward an attempt needs to count as successful.
const SuccessReward = 1.0

// Categories lists the categories, all first.
var Categories = []string{CategoryAll, CategoryFailed, CategoryLive, CategoryNoScore, CategorySuccessful}

// categoryExpr is the category of the trace aliased tr, in SQL.
func categoryExpr() string {
	return fmt.Sprintf("CASE WHEN tr.status NOT IN ('%s', '%s', '%s') THEN '%s' WHEN tr.reward IS NULL THEN '%s' WHEN tr.reward >= %v THEN '%s' ELSE '%s' END",
		models.TraceCompleted, models.TraceError, models.TraceCancelled, CategoryLive, CategoryNoScore, SuccessReward, CategorySuccessful, CategoryFailed)
}

// scoredExpr is the reward of a trace that counts toward scores (valid and completed), else NULL.
func scoredExpr() string {
	return fmt.Sprintf("CASE WHEN tr.is_valid AND tr.status = '%s' THEN tr.reward END", models.TraceCompleted)
}

// CoverageTask is how one task of a job's taskset was covered.
type CoverageTask struct {
	TaskID           uuid.UUID
	TaskName         string
	TaskVersionID    *uuid.UUID // the newest version the job ran, nil when it ran none
	AvgReward        *float64   // over its valid, completed attempts
	InvalidatedCount int
	Statuses         []string
	TraceCount       int
}

// Coverage is which tasks of its taskset a job ran and how they did.
type Coverage struct {
	TasksetID       *uuid.UUID
	TasksetName     string
	TotalTasks      int
	TasksWithTraces int
	Tasks           []CoverageTask
}

// TasksetCoverage lists every task of the job's taskset (the job's own, or the taskset of the
// tasks it ran) with its attempts in the job: in one grouped scan of the job's traces.
//
// A published job shows what its attempts reference and nothing more: to a caller who cannot see
// its taskset (GetTaskset's rule: anonymous, or another team's member reading a private taskset)
// the coverage lists only the tasks the job ran, and TotalTasks counts those of the taskset. The
// taskset's id and name stay: the job and its tasks reference them, as GET /v2/jobs/{id} and the
// entity links show.
func (s *Store) TasksetCoverage(ctx context.Context, c *models.Caller, jobID uuid.UUID) (*Coverage, error) {
	job, err := s.GetJob(ctx, c, jobID)
	if err != nil {
		return nil, err
	}
	byTask, taskIDs, err := s.coverageByTask(ctx, jobID)
	if err != nil {
		return nil, err
	}
	out := &Coverage{TasksetID: job.TasksetID, Tasks: []CoverageTask{}}
	if out.TasksetID == nil && len(taskIDs) > 0 {
		var ts uuid.UUID
		if err := s.DB.NewSelect().Table("tasks").Column("taskset_id").Where("id = ?", taskIDs[0]).Scan(ctx, &ts); err == nil {
			out.TasksetID = &ts
		}
	}
	var tasks []taskName
	if out.TasksetID != nil {
		s.DB.NewSelect().Table("tasksets").Column("name").Where("id = ?", *out.TasksetID).Scan(ctx, &out.TasksetName) //nolint:errcheck // a deleted taskset has no name
		q := s.DB.NewSelect().Table("tasks").Column("id", "name").Where("taskset_id = ?", *out.TasksetID)
		if _, err := catalog.Of(s.Store).GetTaskset(ctx, c, *out.TasksetID); errors.Is(err, models.ErrNotFound) {
			q = q.Where("id IN (SELECT task_id FROM traces WHERE job_id = ?)", jobID)
		} else if err != nil {
			return nil, fmt.Errorf("taskset coverage: %w", err)
		}
		if err := q.Scan(ctx, &tasks); err != nil {
			return nil, fmt.Errorf("taskset coverage: %w", err)
		}
	}
	inTaskset := map[uuid.UUID]bool{}
	for _, t := range tasks {
		inTaskset[t.ID] = true
		if a := byTask[t.ID]; a != nil {
			out.Tasks = append(out.Tasks, a.finish(t.Name))
			out.TasksWithTraces++
		} else {
			out.Tasks = append(out.Tasks, CoverageTask{TaskID: t.ID, TaskName: t.Name, Statuses: []string{}})
		}
	}
	out.TotalTasks = len(tasks)
	// Tasks the job ran from elsewhere (a job of hand-picked versions) are listed too, their
	// names read in one query.
	var others []uuid.UUID
	for _, id := range taskIDs {
		if !inTaskset[id] {
			others = append(others, id)
		}
	}
	if len(others) > 0 {
		var named []taskName
		if err := s.DB.NewSelect().Table("tasks").Column("id", "name").Where("id IN (?)", bun.In(others)).Scan(ctx, &named); err != nil {
			return nil, fmt.Errorf("taskset coverage: %w", err)
		}
		names := make(map[uuid.UUID]string, len(named))
		for _, n := range named {
			names[n.ID] = n.Name
		}
		for _, id := range others {
			out.Tasks = append(out.Tasks, byTask[id].finish(names[id]))
		}
	}
	sort.SliceStable(out.Tasks, func(i, j int) bool { return out.Tasks[i].TaskName < out.Tasks[j].TaskName })
	return out, nil
}

type taskName struct {
	ID   uuid.UUID `bun:"id,type:uuid"`
	Name string    `bun:"name"`
}

// coverageAcc sums a task's traces in a job.
type coverageAcc struct {
	CoverageTask
	scored int
	sum    float64
	latest time.Time
}

// finish is the task's coverage once its groups are summed.
func (a *coverageAcc) finish(name string) CoverageTask {
	ct := a.CoverageTask
	ct.TaskName = name
	if a.scored > 0 {
		avg := a.sum / float64(a.scored)
		ct.AvgReward = &avg
	}
	sort.Strings(ct.Statuses)
	return ct
}

// coverageByTask sums a job's traces by task (those of deleted tasks left out), in one query: the
// count, the invalidated, the statuses, the mean reward of the scored and the latest version run;
// taskIDs lists the tasks in the order first seen.
func (s *Store) coverageByTask(ctx context.Context, jobID uuid.UUID) (map[uuid.UUID]*coverageAcc, []uuid.UUID, error) {
	var groups []struct {
		TaskID    *uuid.UUID `bun:"task_id,type:uuid"`
		VersionID *uuid.UUID `bun:"task_version_id,type:uuid"`
		Status    string     `bun:"status"`
		N         int        `bun:"n"`
		Invalid   int        `bun:"invalid"`
		Scored    int        `bun:"scored"`
		Sum       float64    `bun:"sum"`
		Latest    time.Time  `bun:"latest"`
	}
	if err := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr("tr.task_id, tr.task_version_id, tr.status, count(*) AS n").
		ColumnExpr("SUM(CASE WHEN tr.is_valid THEN 0 ELSE 1 END) AS invalid").
		ColumnExpr("COUNT("+scoredExpr()+") AS scored, COALESCE(SUM("+scoredExpr()+"), 0.0) AS sum, MAX(tr.created_at) AS latest").
		Where("tr.job_id = ?", jobID).GroupExpr("tr.task_id, tr.task_version_id, tr.status").Scan(ctx, &groups); err != nil {
		return nil, nil, fmt.Errorf("taskset coverage: %w", err)
	}
	byTask := map[uuid.UUID]*coverageAcc{}
	var taskIDs []uuid.UUID
	for _, g := range groups {
		if g.TaskID == nil {
			continue // its task was deleted
		}
		a := byTask[*g.TaskID]
		if a == nil {
			a = &coverageAcc{CoverageTask: CoverageTask{TaskID: *g.TaskID, Statuses: []string{}}}
			byTask[*g.TaskID] = a
			taskIDs = append(taskIDs, *g.TaskID)
		}
		a.TraceCount += g.N
		a.InvalidatedCount += g.Invalid
		a.scored += g.Scored
		a.sum += g.Sum
		if !slices.Contains(a.Statuses, g.Status) {
			a.Statuses = append(a.Statuses, g.Status)
		}
		if g.VersionID != nil && !g.Latest.Before(a.latest) {
			a.TaskVersionID, a.latest = g.VersionID, g.Latest
		}
	}
	return byTask, taskIDs, nil
}

// ChartPoint is one attempt of a job on its chart.
type ChartPoint struct {
	ID            uuid.UUID  `bun:"id,type:uuid"`
	Status        string     `bun:"status"`
	CreatedAt     time.Time  `bun:"created_at"`
	EndTime       *time.Time `bun:"end_time"`
	IsValid       bool       `bun:"is_valid"`
	Reward        *float64   `bun:"reward"`
	TaskVersionID *uuid.UUID `bun:"task_version_id,type:uuid"`
}

// ChartData is the first limit attempts of a job in launch order, and how many it has.
func (s *Store) ChartData(ctx context.Context, c *models.Caller, jobID uuid.UUID, limit int) ([]ChartPoint, int, error) {
	if _, err := s.GetJob(ctx, c, jobID); err != nil {
		return nil, 0, err
	}
	out := []ChartPoint{}
	total, err := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr("tr.id, tr.status, tr.created_at, tr.end_time, tr.is_valid, tr.reward, tr.task_version_id").
		Where("tr.job_id = ?", jobID).OrderExpr("tr.created_at ASC, tr.id ASC").Limit(int64(limit)).ScanAndCount(ctx, &out)
	if err != nil {
		return nil, 0, fmt.Errorf("chart data: %w", err)
	}
	return out, int(total), nil
}

// Thumbnail is an attempt's card in a job's results: its trace row with its task's name, the
// comments on its task the caller may read and its category.
type Thumbnail struct {
	TraceRow     `bun:",extend"`
	TaskName     *string `bun:"task_name,scanonly"`
	CommentCount int     `bun:"comment_count,scanonly"`
	Category     string  `bun:"category,scanonly"`
}

// Thumbnails pages a job's attempts of one category in launch order, with the count of every
// category.
func (s *Store) Thumbnails(ctx context.Context, c *models.Caller, jobID uuid.UUID, category string, limit, offset int) ([]Thumbnail, map[string]int, error) {
	if _, err := s.GetJob(ctx, c, jobID); err != nil {
		return nil, nil, err
	}
	var counts []struct {
		Category string `bun:"category"`
		N        int    `bun:"n"`
	}
	if err := s.DB.NewSelect().TableExpr("traces AS tr").ColumnExpr(categoryExpr()+" AS category, count(*) AS n").Where("tr.job_id = ?", jobID).
		GroupExpr("category").Scan(ctx, &counts); err != nil {
		return nil, nil, fmt.Errorf("thumbnails: %w", err)
	}
	byCat := map[string]int{}
	for _, k := range Categories {
		byCat[k] = 0
	}
	for _, n := range counts {
		byCat[n.Category] = n.N
		byCat[CategoryAll] += n.N
	}
	out := []Thumbnail{}
	// The comments counted are those the caller may read (ListComments' rule): none on a task of a
	// taskset it cannot see, however the job was published.
	visible, args := catalog.TasksetVisible("vt", c)
	q := traceSelect(s, &out).Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").ColumnExpr("tk.name AS task_name").
		ColumnExpr("(SELECT count(*) FROM task_comments AS tc WHERE tc.task_id = tr.task_id AND EXISTS "+
			"(SELECT 1 FROM tasksets AS vt WHERE vt.id = tk.taskset_id AND "+visible+")) AS comment_count", args...).
		ColumnExpr(categoryExpr()+" AS category").Where("tr.job_id = ?", jobID)
	if category != "" && category != CategoryAll {
		q = q.Where(categoryExpr()+" = ?", category)
	}
	if err := q.OrderExpr("tr.created_at ASC, tr.id ASC").Limit(int64(limit)).Offset(int64(offset)).Scan(ctx); err != nil {
		return nil, nil, fmt.Errorf("thumbnails: %w", err)
	}
	for i := range out {
		out[i].CanEdit = c != nil && out[i].TeamID == c.TeamID
	}
	return out, byCat, nil
}

// EntityLink is one combination of model, environment and taskset a job ran.
type EntityLink struct {
	ModelID      *uuid.UUID `bun:"model_id,type:uuid"`
	ModelName    *string    `bun:"model_name"`
	RegistryID   *uuid.UUID `bun:"registry_id,type:uuid"`
	RegistryName *string    `bun:"registry_name"`
	TasksetID    *uuid.UUID `bun:"taskset_id,type:uuid"`
	TasksetName  *string    `bun:"taskset_name"`
}

// EntityLinks lists the distinct (model, environment, taskset) combinations of a job's attempts.
func (s *Store) EntityLinks(ctx context.Context, c *models.Caller, jobID uuid.UUID) ([]EntityLink, error) {
	if _, err := s.GetJob(ctx, c, jobID); err != nil {
		return nil, err
	}
	combos := s.DB.NewSelect().TableExpr("traces AS tr").Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		Join("LEFT JOIN tasks AS tk ON tk.id = tr.task_id").
		ColumnExpr("tr.model_id, tv.registry_id, tk.taskset_id").Where("tr.job_id = ?", jobID).GroupExpr("tr.model_id, tv.registry_id, tk.taskset_id")
	out := []EntityLink{}
	if err := s.DB.NewSelect().TableExpr("(?) AS l", combos).
		ColumnExpr("l.model_id, m.name AS model_name, l.registry_id, r.name AS registry_name, l.taskset_id, ts.name AS taskset_name").
		Join("LEFT JOIN llm_models AS m ON m.id = l.model_id").Join("LEFT JOIN registries AS r ON r.id = l.registry_id").
		Join("LEFT JOIN tasksets AS ts ON ts.id = l.taskset_id").OrderExpr("model_name, registry_name, taskset_name").Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("entity links: %w", err)
	}
	return out, nil
}
