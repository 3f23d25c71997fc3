package catalog

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// Taskset purposes.
const (
	PurposeEval     = "EVAL"
	PurposeTraining = "TRAINING"
)

// TasksetRow is a taskset as one caller sees it.
type TasksetRow struct {
	models.Taskset `bun:",extend"`
	StarCount      int64 `bun:"star_count,scanonly"`
	TaskCount      int64 `bun:"task_count,scanonly"`
	IsStarred      bool  `bun:"is_starred,scanonly"`
	SharedCanEdit  bool  `bun:"shared_can_edit,scanonly"`
	Shared         bool  `bun:"shared,scanonly"`
	// Filled from the caller after the query.
	IsOwner bool `bun:"-"`
	CanEdit bool `bun:"-"`
}

// TasksetQuery is the list route's filter, sort and page.
type TasksetQuery struct {
	Search     string
	PublicOnly bool
	OwnerOnly  bool
	SortBy     string
	Limit      int
	Offset     int
}

// CreateTaskset inserts a taskset for the caller's team; names are unique within a team.
func (s *Store) CreateTaskset(ctx context.Context, c *models.Caller, name, description string, public bool) (*models.Taskset, error) {
	if strings.TrimSpace(name) == "" {
		return nil, fmt.Errorf("create taskset: name is empty")
	}
	t := &models.Taskset{
		ID: uuid.New(), TeamID: c.TeamID, Name: name, Description: description, Public: public,
		Columns: map[string]any{}, HiddenProgressStages: []string{}, Stages: []string{}, CreatedBy: &c.UserID,
		CreatedAt: models.Now(), UpdatedAt: models.Now(),
	}
	if _, err := s.DB.NewInsert().Model(t).Exec(ctx); err != nil {
		if models.IsUniqueViolation(err) {
			return nil, fmt.Errorf("create taskset %q: a taskset of that name exists in the team: %w", name, models.ErrConflict)
		}
		return nil, fmt.Errorf("create taskset: %w", err)
	}
	return t, nil
}

// StarTaskset stars a taskset for the caller; starring twice is not an error.
func (s *Store) StarTaskset(ctx context.Context, c *models.Caller, tasksetID uuid.UUID) error {
	star := &models.TasksetStar{TasksetID: tasksetID, UserID: c.UserID, CreatedAt: models.Now()}
	if _, err := s.DB.NewInsert().Model(star).On("CONFLICT DO NOTHING").Exec(ctx); err != nil {
		return fmt.Errorf("star taskset: %w", err)
	}
	return nil
}

// ShareTaskset shares a taskset with another team (or updates the share's write permission).
func (s *Store) ShareTaskset(ctx context.Context, tasksetID, teamID uuid.UUID, canEdit bool) error {
	share := &models.TasksetShare{TasksetID: tasksetID, TeamID: teamID, CanEdit: canEdit, CreatedAt: models.Now()}
	if _, err := s.DB.NewInsert().Model(share).On("CONFLICT (taskset_id, team_id) DO UPDATE").Set("can_edit = EXCLUDED.can_edit").Exec(ctx); err != nil {
		return fmt.Errorf("share taskset: %w", err)
	}
	return nil
}

// ListTasksets pages the tasksets visible to the caller: public ones when PublicOnly, otherwise
// those owned by or shared with the caller's team (owned only when OwnerOnly). Every order ends
// on the id so that pages never overlap or skip rows.
func (s *Store) ListTasksets(ctx context.Context, c *models.Caller, q TasksetQuery) ([]TasksetRow, int, error) {
	var rows []TasksetRow
	sel := tasksetColumns(s.DB.NewSelect().Model(&rows), c)
	switch {
	case q.PublicOnly:
		sel = sel.Where("t.public")
	case q.OwnerOnly:
		sel = sel.Where("t.team_id = ?", c.TeamID)
	default:
		sel = sel.WhereGroup(" AND ", func(w *bun.SelectQuery) *bun.SelectQuery {
			return w.Where("t.team_id = ?", c.TeamID).
				WhereOr("t.id IN (SELECT sh.taskset_id FROM taskset_shares AS sh WHERE sh.team_id = ?)", c.TeamID)
		})
	}
	if q.Search != "" {
		sel = sel.Where("LOWER(t.name) LIKE ? ESCAPE '\\'", "%"+models.EscapeLike(strings.ToLower(q.Search))+"%")
	}
	switch q.SortBy {
	case models.SortDate:
		sel = sel.OrderExpr("t.updated_at DESC")
	case models.SortName:
		sel = sel.OrderExpr("LOWER(t.name) ASC")
	case models.SortStars:
		sel = sel.OrderExpr("star_count DESC")
	case models.SortTasks:
		sel = sel.OrderExpr("task_count DESC")
	default: // starred: the caller's starred first, then most recently updated
		sel = sel.OrderExpr("is_starred DESC").OrderExpr("t.updated_at DESC")
	}
	sel = sel.OrderExpr("t.id ASC").Limit(int64(q.Limit)).Offset(int64(q.Offset))
	total, err := sel.ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list tasksets: %w", err)
	}
	for i := range rows {
		rows[i].fill(c)
	}
	return rows, int(total), nil
}

func tasksetColumns(q *bun.SelectQuery, c *models.Caller) *bun.SelectQuery {
	team, user := uuid.Nil, uuid.Nil
	if c != nil {
		team, user = c.TeamID, c.UserID
	}
	return q.ColumnExpr("t.*").
		ColumnExpr("(SELECT COUNT(*) FROM taskset_stars AS st WHERE st.taskset_id = t.id) AS star_count").
		ColumnExpr("(SELECT COUNT(*) FROM tasks AS tk WHERE tk.taskset_id = t.id) AS task_count").
		ColumnExpr("EXISTS (SELECT 1 FROM taskset_stars AS st WHERE st.taskset_id = t.id AND st.user_id = ?) AS is_starred", user).
		ColumnExpr("EXISTS (SELECT 1 FROM taskset_shares AS sh WHERE sh.taskset_id = t.id AND sh.team_id = ? AND sh.can_edit) AS shared_can_edit", team).
		ColumnExpr("EXISTS (SELECT 1 FROM taskset_shares AS sh WHERE sh.taskset_id = t.id AND sh.team_id = ?) AS shared", team)
}

func (r *TasksetRow) fill(c *models.Caller) {
	r.IsOwner = c != nil && r.TeamID == c.TeamID
	r.CanEdit = r.IsOwner || r.SharedCanEdit
}

// TasksetVisible is GetTaskset's rule in SQL, with its arguments: the taskset aliased alias is
// public, the caller's team's, or shared with it (public only, for an anonymous caller).
func TasksetVisible(alias string, c *models.Caller) (string, []any) {
	team := uuid.Nil
	if c != nil {
		team = c.TeamID
	}
	return fmt.Sprintf("(%[1]s.public OR %[1]s.team_id = ? OR EXISTS (SELECT 1 FROM taskset_shares AS sh WHERE sh.taskset_id = %[1]s.id AND sh.team_id = ?))", alias),
		[]any{team, team}
}

// GetTaskset reads a taskset the caller may see: its team's, one shared with it, or a public one
// (the only kind an anonymous caller, c == nil, sees).
func (s *Store) GetTaskset(ctx context.Context, c *models.Caller, id uuid.UUID) (*TasksetRow, error) {
	var row TasksetRow
	if err := tasksetColumns(s.DB.NewSelect().Model(&row), c).Where("t.id = ?", id).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get taskset")
	}
	if !row.Public && (c == nil || (row.TeamID != c.TeamID && !row.Shared)) {
		return nil, fmt.Errorf("get taskset: %w", models.ErrNotFound)
	}
	row.fill(c)
	return &row, nil
}

// GetTasksetByName reads a taskset of the caller's team by name.
func (s *Store) GetTasksetByName(ctx context.Context, c *models.Caller, name string) (*TasksetRow, error) {
	var row TasksetRow
	if err := tasksetColumns(s.DB.NewSelect().Model(&row), c).Where("t.team_id = ? AND t.name = ?", c.TeamID, name).Scan(ctx); err != nil {
		return nil, models.NotFound(err, fmt.Sprintf("taskset %q", name))
	}
	row.fill(c)
	return &row, nil
}

// LatestVersionIDs lists the latest version of every task of a taskset the caller sees, in the
// tasks' name order, in one query (after the taskset's own): what a run_list of the taskset
// launches, however many tasks it holds.
func (s *Store) LatestVersionIDs(ctx context.Context, c *models.Caller, tasksetID uuid.UUID) ([]uuid.UUID, error) {
	if _, err := s.GetTaskset(ctx, c, tasksetID); err != nil {
		return nil, err
	}
	ids := []uuid.UUID{}
	err := s.DB.NewSelect().TableExpr("tasks AS tk").Column("tk.latest_version_id").
		Where("tk.taskset_id = ? AND tk.latest_version_id IS NOT NULL", tasksetID).OrderExpr("tk.name ASC").Scan(ctx, &ids)
	if err != nil {
		return nil, fmt.Errorf("latest versions of taskset %s: %w", tasksetID, err)
	}
	return ids, nil
}
