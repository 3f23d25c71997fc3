package catalog

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// ActivityEvent is one entry of a task's timeline.
type ActivityEvent struct {
	Event   string
	At      time.Time
	By      *uuid.UUID
	ByName  string
	ByRole  string
	Done    bool
	Key     string
	Summary string
	Version int
}

// Activity events.
const (
	ActivityVersion = "version_created"
	ActivityComment = "comment"
)

// TaskActivity merges a task's versions, state changes and comments into one timeline, newest
// first, at most limit entries.
func (s *Store) TaskActivity(ctx context.Context, c *models.Caller, taskID uuid.UUID, limit int) ([]ActivityEvent, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	var versions []models.TaskVersion
	if err := s.DB.NewSelect().Model(&versions).Column("id", "version", "created_by", "created_at").
		Where("task_id = ?", t.Task.ID).Order("created_at DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task activity: %w", err)
	}
	var events []models.TaskEvent
	if err := s.DB.NewSelect().Model(&events).Where("task_id = ?", t.Task.ID).Order("created_at DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task activity: %w", err)
	}
	var comments []models.TaskComment
	if err := s.DB.NewSelect().Model(&comments).Where("task_id = ?", t.Task.ID).Order("created_at DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task activity: %w", err)
	}
	var out []ActivityEvent
	for _, v := range versions {
		out = append(out, ActivityEvent{Event: ActivityVersion, At: v.CreatedAt, By: v.CreatedBy, Key: "version:" + v.ID.String(),
			Summary: fmt.Sprintf("version %d", v.Version), Version: v.Version, Done: true})
	}
	for _, e := range events {
		what := "status"
		if e.Kind == EventStageChanged {
			what = "stage"
		}
		out = append(out, ActivityEvent{Event: e.Kind, At: e.CreatedAt, By: e.UserID, Key: "event:" + e.ID.String(),
			Summary: fmt.Sprintf("%s %s → %s", what, e.FromValue, e.ToValue), Version: e.Version,
			Done: e.Kind == EventStatusChanged && (e.ToValue == TaskReady || e.ToValue == TaskVerified)})
	}
	for _, cm := range comments {
		summary := cm.Message
		if len(summary) > 280 {
			summary = summary[:280] + "…"
		}
		uid := cm.UserID
		out = append(out, ActivityEvent{Event: ActivityComment, At: cm.CreatedAt, By: &uid, Key: "comment:" + cm.ID.String(), Summary: summary, Version: t.Task.VersionCount})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.After(out[j].At) })
	if len(out) > limit {
		out = out[:limit]
	}
	// Names and roles, resolved once per author.
	type who struct{ name, role string }
	seen := map[uuid.UUID]who{}
	for i := range out {
		if out[i].By == nil {
			continue
		}
		w, ok := seen[*out[i].By]
		if !ok {
			var u models.User
			if err := s.DB.NewSelect().Model(&u).Where("id = ?", *out[i].By).Scan(ctx); err == nil {
				w.name = u.Name
			}
			var m models.Membership
			if err := s.DB.NewSelect().Model(&m).Where("user_id = ? AND team_id = ?", *out[i].By, t.Task.TeamID).Scan(ctx); err == nil {
				w.role = m.Role
			}
			seen[*out[i].By] = w
		}
		out[i].ByName, out[i].ByRole = w.name, w.role
	}
	return out, nil
}
