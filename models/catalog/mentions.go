package catalog

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// ListNotifications lists a user's notifications, newest first.
func (s *Store) ListNotifications(ctx context.Context, userID uuid.UUID) ([]models.Notification, error) {
	var ns []models.Notification
	if err := s.DB.NewSelect().Model(&ns).Where("user_id = ?", userID).Order("created_at DESC", "id DESC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list notifications: %w", err)
	}
	return ns, nil
}

// Mention is a notification of a mention, with what a reader or a mail needs to say it: who
// mentioned whom, in which comment of which task.
type Mention struct {
	ID        uuid.UUID  `bun:"id"`
	UserID    uuid.UUID  `bun:"user_id"`
	Email     string     `bun:"email"`
	ActorName string     `bun:"actor_name"`
	TaskID    uuid.UUID  `bun:"task_id"`
	TaskName  string     `bun:"task_name"`
	TasksetID uuid.UUID  `bun:"taskset_id"`
	CommentID uuid.UUID  `bun:"comment_id"`
	Comment   string     `bun:"comment"`
	ReadAt    *time.Time `bun:"read_at"`
	CreatedAt time.Time  `bun:"created_at"`
}

// mentions selects mentions with their task, comment and actor.
func (s *Store) mentions() *bun.SelectQuery {
	return s.DB.NewSelect().TableExpr("notifications AS n").
		ColumnExpr("n.id, n.user_id, u.email, COALESCE(a.name, a.email, '') AS actor_name, n.task_id, tk.name AS task_name, tk.taskset_id").
		ColumnExpr("n.comment_id, tc.message AS comment, n.read_at, n.created_at").
		Join("JOIN users AS u ON u.id = n.user_id").
		Join("JOIN tasks AS tk ON tk.id = n.task_id").
		Join("JOIN task_comments AS tc ON tc.id = n.comment_id").
		Join("LEFT JOIN users AS a ON a.id = n.actor_id").
		Where("n.kind = ?", "mention")
}

// UserMentions lists the caller's mentions, newest first (only the unread ones with unreadOnly),
// and counts the unread.
func (s *Store) UserMentions(ctx context.Context, c *models.Caller, unreadOnly bool, limit int) ([]Mention, int, error) {
	var out []Mention
	q := s.mentions().Where("n.user_id = ?", c.UserID).OrderExpr("n.created_at DESC, n.id DESC").Limit(int64(limit))
	if unreadOnly {
		q = q.Where("n.read_at IS NULL")
	}
	if err := q.Scan(ctx, &out); err != nil {
		return nil, 0, fmt.Errorf("list mentions: %w", err)
	}
	unread, err := s.DB.NewSelect().Model((*models.Notification)(nil)).Where("user_id = ? AND kind = ? AND read_at IS NULL", c.UserID, "mention").Count(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("count unread mentions: %w", err)
	}
	return out, int(unread), nil
}

// MarkMentionsRead marks the caller's listed mentions read (all of them when ids is empty) and
// says how many changed; others' ids are ignored.
func (s *Store) MarkMentionsRead(ctx context.Context, c *models.Caller, ids []uuid.UUID) (int, error) {
	q := s.DB.NewUpdate().Model((*models.Notification)(nil)).Set("read_at = ?", models.Now()).
		Where("user_id = ? AND kind = ? AND read_at IS NULL", c.UserID, "mention")
	if len(ids) > 0 {
		q = q.Where("id IN (?)", bun.In(ids))
	}
	res, err := q.Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("mark mentions read: %w", err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// MentionsToMail are the mentions whose mail has not gone out, oldest first, at most limit.
func (s *Store) MentionsToMail(ctx context.Context, limit int) ([]Mention, error) {
	var out []Mention
	if err := s.mentions().Where("n.mailed_at IS NULL").OrderExpr("n.created_at ASC, n.id ASC").Limit(int64(limit)).Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("mentions to mail: %w", err)
	}
	return out, nil
}

// MentionMailed records that a mention's mail went out, so that no later check sends it again.
func (s *Store) MentionMailed(ctx context.Context, id uuid.UUID) error {
	if _, err := s.DB.NewUpdate().Model((*models.Notification)(nil)).Set("mailed_at = ?", models.Now()).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("record a mention's mail: %w", err)
	}
	return nil
}
