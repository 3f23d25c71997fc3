package catalog

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// CommentRow is a comment with its author's display fields.
type CommentRow struct {
	models.TaskComment `bun:",extend"`
	UserName           string `bun:"user_name,scanonly"`
	AvatarURL          string `bun:"avatar_url,scanonly"`
}

// canComment says whether the caller may comment on a task it can see: members of the owning team
// and of teams it is shared with, not mere readers of a public taskset.
func canComment(t *TaskInTaskset, c *models.Caller) (bool, string) {
	if c != nil && (t.Taskset.IsOwner || t.Taskset.Shared) {
		return true, ""
	}
	return false, "the taskset is public but not shared with the caller's team"
}

// ListComments lists a task's comments, oldest first, and whether the caller may add one.
func (s *Store) ListComments(ctx context.Context, c *models.Caller, taskID uuid.UUID) ([]CommentRow, bool, string, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, false, "", err
	}
	var rows []CommentRow
	if err := s.DB.NewSelect().Model(&rows).ColumnExpr("tc.*").ColumnExpr("u.name AS user_name, u.avatar_url AS avatar_url").
		Join("JOIN users AS u ON u.id = tc.user_id").Where("tc.task_id = ?", t.Task.ID).
		OrderExpr("tc.created_at ASC, tc.id ASC").Scan(ctx); err != nil {
		return nil, false, "", fmt.Errorf("list comments: %w", err)
	}
	ok, reason := canComment(t, c)
	return rows, ok, reason, nil
}

var mentionPattern = regexp.MustCompile(`(^|[^A-Za-z0-9._%+-])@([A-Za-z0-9._%+-]+(?:@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)?)`)

// AddComment records a comment and notifies every member it @mentions (by email, the email's
// local part, or a one-word name) of the teams that can see the task.
func (s *Store) AddComment(ctx context.Context, c *models.Caller, taskID uuid.UUID, message string) (*CommentRow, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	if ok, reason := canComment(t, c); !ok {
		return nil, fmt.Errorf("add comment: %s: %w", reason, models.ErrForbidden)
	}
	cm := &models.TaskComment{ID: uuid.New(), TaskID: t.Task.ID, UserID: c.UserID, Message: message, CreatedAt: models.Now(), UpdatedAt: models.Now()}
	err = s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewInsert().Model(cm).Exec(ctx); err != nil {
			return err
		}
		mentioned, err := s.mentionedUsers(ctx, tx, t, message)
		if err != nil {
			return err
		}
		for _, u := range mentioned {
			if u == c.UserID {
				continue
			}
			n := &models.Notification{ID: uuid.New(), UserID: u, Kind: "mention", TaskID: &t.Task.ID, CommentID: &cm.ID, ActorID: &c.UserID, CreatedAt: models.Now()}
			if _, err := tx.NewInsert().Model(n).Exec(ctx); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add comment: %w", err)
	}
	return s.getComment(ctx, t.Task.ID, cm.ID)
}

func (s *Store) mentionedUsers(ctx context.Context, tx bun.Tx, t *TaskInTaskset, message string) ([]uuid.UUID, error) {
	var handles []string
	for _, m := range mentionPattern.FindAllStringSubmatch(message, -1) {
		handles = append(handles, strings.ToLower(strings.TrimRight(m[2], ".")))
	}
	if len(handles) == 0 {
		return nil, nil
	}
	var users []models.User
	err := tx.NewSelect().Model(&users).ModelTableExpr("users AS u").Distinct().ColumnExpr("u.*").
		Join("JOIN memberships AS m ON m.user_id = u.id").
		Where("m.team_id = ? OR m.team_id IN (SELECT team_id FROM taskset_shares WHERE taskset_id = ?)", t.Taskset.TeamID, t.Taskset.ID).
		Scan(ctx)
	if err != nil {
		return nil, err
	}
	var out []uuid.UUID
	for _, u := range users {
		local, _, _ := strings.Cut(u.Email, "@")
		name := strings.ToLower(u.Name)
		for _, h := range handles {
			if h == u.Email || h == local || (!strings.Contains(name, " ") && h == name) {
				out = append(out, u.ID)
				break
			}
		}
	}
	return out, nil
}

func (s *Store) getComment(ctx context.Context, taskID, id uuid.UUID) (*CommentRow, error) {
	var row CommentRow
	if err := s.DB.NewSelect().Model(&row).ColumnExpr("tc.*").ColumnExpr("u.name AS user_name, u.avatar_url AS avatar_url").
		Join("JOIN users AS u ON u.id = tc.user_id").Where("tc.id = ? AND tc.task_id = ?", id, taskID).Scan(ctx); err != nil {
		return nil, models.NotFound(err, "get comment")
	}
	return &row, nil
}

// ownComment checks that a comment exists on a task the caller sees and that the caller wrote it.
func (s *Store) ownComment(ctx context.Context, c *models.Caller, taskID, id uuid.UUID) (*TaskInTaskset, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	row, err := s.getComment(ctx, t.Task.ID, id)
	if err != nil {
		return nil, err
	}
	if row.UserID != c.UserID {
		return nil, fmt.Errorf("comment %s: only its author may change it: %w", id, models.ErrForbidden)
	}
	return t, nil
}

// UpdateComment rewrites the caller's own comment.
func (s *Store) UpdateComment(ctx context.Context, c *models.Caller, taskID, id uuid.UUID, message string) (*CommentRow, error) {
	t, err := s.ownComment(ctx, c, taskID, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.DB.NewUpdate().Model((*models.TaskComment)(nil)).Set("message = ?", message).Set("updated_at = ?", models.Now()).Where("id = ?", id).Exec(ctx); err != nil {
		return nil, fmt.Errorf("update comment: %w", err)
	}
	return s.getComment(ctx, t.Task.ID, id)
}

// DeleteComment removes the caller's own comment.
func (s *Store) DeleteComment(ctx context.Context, c *models.Caller, taskID, id uuid.UUID) error {
	if _, err := s.ownComment(ctx, c, taskID, id); err != nil {
		return err
	}
	if _, err := s.DB.NewDelete().Model((*models.TaskComment)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete comment: %w", err)
	}
	return nil
}
