package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Task review statuses.
const (
	TaskPending  = "pending"
	TaskReady    = "ready"
	TaskVerified = "verified"
	TaskRevision = "revision"
	TaskRejected = "rejected"
)

// TaskRow is a task in a taskset listing.
type TaskRow struct {
	models.Task `bun:",extend"`
	Version     int `bun:"version,scanonly"`
	// Keywords are the latest version's.
	Keywords []string `bun:"keywords,scanonly"`
}

// TaskQuery is the listing's filter and page.
type TaskQuery struct {
	// Search is a case-insensitive substring of the task's name, or of its latest version's
	// description or one of its keywords.
	Search string
	// Keyword is one of the latest version's keywords, ignoring case.
	Keyword string
	Limit   int
	Offset  int
}

// ListTasks pages the tasks of a taskset the caller may see, by name, filtered by q.
func (s *Store) ListTasks(ctx context.Context, c *models.Caller, tasksetID uuid.UUID, q TaskQuery) ([]TaskRow, int, error) {
	if _, err := s.GetTaskset(ctx, c, tasksetID); err != nil {
		return nil, 0, err
	}
	var rows []TaskRow
	sel := s.DB.NewSelect().Model(&rows).ColumnExpr("tk.*").ColumnExpr("tk.version_count AS version").
		ColumnExpr("tv.keywords AS keywords").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tk.latest_version_id").
		Where("tk.taskset_id = ?", tasksetID)
	keywords := s.keywordsOf("tv")
	if q.Search != "" {
		// Folded by the database on both sides, so that a dialect folds the pattern as it folds
		// the values (SQLite folds ASCII only).
		like := "%" + models.EscapeLike(q.Search) + "%"
		sel = sel.WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
			return w.Where("LOWER(tk.name) LIKE LOWER(?) ESCAPE '\\'", like).
				WhereOr("LOWER(tv.description) LIKE LOWER(?) ESCAPE '\\'", like).
				WhereOr("EXISTS (SELECT 1 FROM "+keywords+" WHERE LOWER(kw.value) LIKE LOWER(?) ESCAPE '\\')", like)
		})
	}
	if kw := strings.TrimSpace(q.Keyword); kw != "" { // stored keywords are trimmed
		sel = sel.Where("EXISTS (SELECT 1 FROM "+keywords+" WHERE LOWER(kw.value) = LOWER(?))", kw)
	}
	// Names are unique within a taskset, so the name alone is a total order, and the
	// (taskset_id, name) index serves it without sorting the taskset.
	total, err := sel.OrderExpr("tk.name ASC").Limit(int64(q.Limit)).Offset(int64(q.Offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return rows, int(total), nil
}

// keywordsOf is a FROM item of the keywords of the version aliased alias, one row each, as
// kw.value: each dialect has its own function that unnests a JSON array.
func (s *Store) keywordsOf(alias string) string {
	if s.Dialect == models.Postgres {
		return "jsonb_array_elements_text(" + alias + ".keywords) AS kw(value)"
	}
	return "json_each(" + alias + ".keywords) AS kw"
}

// TaskBrief is what a person needs to work on a task: its prompt and its latest content.
type TaskBrief struct {
	Task    models.Task
	Version models.TaskVersion
	Prompt  string
}

// GetTaskBrief reads the latest version of a task and the prompt a person works from: the task's
// own prompt, or for a scenario task the scenario's description with its arguments.
func (s *Store) GetTaskBrief(ctx context.Context, c *models.Caller, taskID uuid.UUID) (*TaskBrief, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	if t.Task.LatestVersionID == nil {
		return nil, fmt.Errorf("task %s has no version: %w", t.Task.ID, models.ErrNotFound)
	}
	var v models.TaskVersion
	if err := s.DB.NewSelect().Model(&v).Where("id = ?", *t.Task.LatestVersionID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task brief: %w", err)
	}
	prompt := v.Prompt
	if prompt == "" && v.Scenario != "" {
		var desc string
		if v.ScenarioID != nil {
			s.DB.NewSelect().Model((*models.Scenario)(nil)).Column("description").Where("id = ?", *v.ScenarioID).Scan(ctx, &desc) //nolint:errcheck // the brief falls back to the name
		}
		args, _ := json.MarshalIndent(v.Args, "", "  ")
		prompt = fmt.Sprintf("Scenario %q of environment %q.\n\n%s\n\nArguments:\n%s\n", v.Scenario, v.Env, desc, args)
	}
	return &TaskBrief{Task: t.Task, Version: v, Prompt: prompt}, nil
}

// TaskInTaskset is a task with the taskset it belongs to, as the caller sees it.
type TaskInTaskset struct {
	Task    models.Task
	Taskset *TasksetRow
}

// GetTask reads a task the caller may see, by task id or by the id of one of its versions.
func (s *Store) GetTask(ctx context.Context, c *models.Caller, id uuid.UUID) (*TaskInTaskset, error) {
	var t models.Task
	err := s.DB.NewSelect().Model(&t).Where("id = ?", id).Scan(ctx)
	if models.IsNoRows(err) {
		err = s.DB.NewSelect().Model(&t).Where("id = (SELECT task_id FROM task_versions WHERE id = ?)", id).Scan(ctx)
	}
	if err != nil {
		return nil, models.NotFound(err, "get task")
	}
	ts, err := s.GetTaskset(ctx, c, t.TasksetID)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", models.ErrNotFound)
	}
	return &TaskInTaskset{Task: t, Taskset: ts}, nil
}

// TaskMatch is a task a reference named, with what ranks it among others of the same name.
type TaskMatch struct {
	models.Task `bun:",extend"`
	// Own is set for a task of the caller's team; BySlug when the reference is its external id.
	Own    bool `bun:"own,scanonly"`
	BySlug bool `bun:"by_slug,scanonly"`
}

// FindTasks lists the tasks, in tasksets the caller sees, whose external id or name is ref and
// whose latest version is of the environment env (any environment when env is empty): the
// caller's team's first, then those named by external id. At most limit are returned.
func (s *Store) FindTasks(ctx context.Context, c *models.Caller, env, ref string, limit int) ([]TaskMatch, error) {
	var rows []TaskMatch
	q := s.DB.NewSelect().Model(&rows).ColumnExpr("tk.*").
		ColumnExpr("t.team_id = ? AS own", c.TeamID).
		ColumnExpr("COALESCE(tk.external_id = ?, FALSE) AS by_slug", ref).
		Join("JOIN tasksets AS t ON t.id = tk.taskset_id").
		Join("JOIN task_versions AS tv ON tv.id = tk.latest_version_id").
		Where("tk.external_id = ? OR tk.name = ?", ref, ref).
		Where("t.team_id = ? OR t.public OR EXISTS (SELECT 1 FROM taskset_shares AS sh WHERE sh.taskset_id = t.id AND sh.team_id = ?)", c.TeamID, c.TeamID)
	if env != "" {
		q = q.Where("tv.env = ?", env)
	}
	if err := q.OrderExpr("own DESC, by_slug DESC, tk.id").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("find tasks: %w", err)
	}
	return rows, nil
}
