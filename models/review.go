package models

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// TaskEvent is one state change of a task: a status or stage move. The log is append-only.
type TaskEvent struct {
	bun.BaseModel `bun:"table:task_events,alias:te"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TaskID        uuid.UUID  `bun:"task_id,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	Kind          string     `bun:"kind"`
	FromValue     string     `bun:"from_value"`
	ToValue       string     `bun:"to_value"`
	Version       int        `bun:"version"`
	UserID        *uuid.UUID `bun:"user_id,type:uuid"`
	CreatedAt     time.Time  `bun:"created_at"`
}

// Task event kinds.
const (
	EventStatusChanged = "status_changed"
	EventStageChanged  = "stage_changed"
)

// TaskComment is a reviewer's note on a task.
type TaskComment struct {
	bun.BaseModel `bun:"table:task_comments,alias:tc"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TaskID        uuid.UUID `bun:"task_id,type:uuid"`
	UserID        uuid.UUID `bun:"user_id,type:uuid"`
	Message       string    `bun:"message"`
	CreatedAt     time.Time `bun:"created_at"`
	UpdatedAt     time.Time `bun:"updated_at"`
}

// Notification tells a user about something that concerns them (a mention, for now).
type Notification struct {
	bun.BaseModel `bun:"table:notifications,alias:n"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	UserID        uuid.UUID  `bun:"user_id,type:uuid"`
	Kind          string     `bun:"kind"`
	TaskID        *uuid.UUID `bun:"task_id,type:uuid"`
	CommentID     *uuid.UUID `bun:"comment_id,type:uuid"`
	ActorID       *uuid.UUID `bun:"actor_id,type:uuid"`
	ReadAt        *time.Time `bun:"read_at"`
	// MailedAt is when the notification's mail went out (nil: not yet; one recorded while no mail
	// server was configured waits for one).
	MailedAt  *time.Time `bun:"mailed_at"`
	CreatedAt time.Time  `bun:"created_at"`
}

// TaskStatuses are the review statuses a task can be set to.
var TaskStatuses = []string{TaskPending, TaskReady, TaskVerified, TaskRevision, TaskRejected}

// MoveFailure reports why one id of a batch move did not move.
type MoveFailure struct {
	Input      string
	Reason     string
	Code       string
	ResolvedID *uuid.UUID
}

// MoveResult is the per-id outcome of a non-atomic batch move.
type MoveResult struct {
	Succeeded []uuid.UUID
	Unchanged []uuid.UUID
	Failures  []MoveFailure
}

func (r *MoveResult) fail(input, code, reason string, resolved *uuid.UUID) {
	r.Failures = append(r.Failures, MoveFailure{Input: input, Code: code, Reason: reason, ResolvedID: resolved})
}

// resolveForMove finds the task an input names: a task id, a task version id, or (with a taskset)
// a name or external id. It records a failure and returns nil when it cannot, or when the caller
// may not change the task. A failure echoes only the caller's input, and a slug is looked up only
// in a taskset the caller can see, so that nothing is learned about other teams' tasksets.
func (s *Store) resolveForMove(ctx context.Context, c *Caller, input string, tasksetID *uuid.UUID, res *MoveResult) *TaskInTaskset {
	if id, err := uuid.Parse(input); err == nil {
		return s.resolveIDForMove(ctx, c, input, id, res)
	}
	if tasksetID == nil {
		res.fail(input, "taskset_required", "a slug names a task only within taskset_id", nil)
		return nil
	}
	const missing = "no task of this name or external_id in the taskset"
	if _, err := s.GetTaskset(ctx, c, *tasksetID); err != nil {
		res.fail(input, "not_found", missing, nil)
		return nil
	}
	var t Task
	err := s.DB.NewSelect().Model(&t).Where("taskset_id = ?", *tasksetID).
		WhereGroup(" AND ", func(q *bun.SelectQuery) *bun.SelectQuery {
			return q.Where("name = ?", input).WhereOr("external_id = ?", input)
		}).OrderExpr("CASE WHEN name = ? THEN 0 ELSE 1 END", input).Limit(1).Scan(ctx)
	if err != nil {
		res.fail(input, "not_found", missing, nil)
		return nil
	}
	return s.resolveIDForMove(ctx, c, input, t.ID, res)
}

// resolveIDForMove is resolveForMove for a task or task version id; failures name input.
func (s *Store) resolveIDForMove(ctx context.Context, c *Caller, input string, id uuid.UUID, res *MoveResult) *TaskInTaskset {
	t, err := s.GetTask(ctx, c, id)
	if err != nil {
		res.fail(input, "not_found", "no task or task version with this id is visible", nil)
		return nil
	}
	if !t.Taskset.CanEdit {
		res.fail(input, "forbidden", "the caller's team may not edit this taskset", &t.Task.ID)
		return nil
	}
	return t
}

// SetTaskStatus moves each task to status (or back to pending when clear). It is not atomic: each
// id succeeds, is unchanged or fails on its own. A taskset with stages requires its last stage
// before ready.
func (s *Store) SetTaskStatus(ctx context.Context, c *Caller, inputs []string, tasksetID *uuid.UUID, status string, clear bool) (*MoveResult, error) {
	if clear {
		status = TaskPending
	}
	if !slices.Contains(TaskStatuses, status) {
		return nil, ValidationError{{Location: "status", Message: "status must be one of " + strings.Join(TaskStatuses, ", "), Value: status}}
	}
	res := &MoveResult{}
	for _, input := range inputs {
		t := s.resolveForMove(ctx, c, input, tasksetID, res)
		if t == nil {
			continue
		}
		task := t.Task
		if task.Status == status && !(clear && task.Stage != nil) {
			res.Unchanged = append(res.Unchanged, task.ID)
			continue
		}
		if status == TaskReady && len(t.Taskset.Stages) > 0 && stageOf(task, t.Taskset.Stages) != len(t.Taskset.Stages)-1 {
			res.fail(input, "stage_incomplete", fmt.Sprintf("the taskset's stages require %q before ready", t.Taskset.Stages[len(t.Taskset.Stages)-1]), &task.ID)
			continue
		}
		err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			upd := tx.NewUpdate().Model((*Task)(nil)).Set("status = ?", status).Set("updated_at = ?", now()).Where("id = ?", task.ID)
			if clear {
				upd = upd.Set("stage = NULL")
			}
			if _, err := upd.Exec(ctx); err != nil {
				return err
			}
			return insertEvent(ctx, tx, c, task, EventStatusChanged, task.Status, status)
		})
		if err != nil {
			return nil, fmt.Errorf("set task status: %w", err)
		}
		res.Succeeded = append(res.Succeeded, task.ID)
	}
	return res, nil
}

// MoveTaskStage advances each pending task one stage, or sends it back to an earlier one.
func (s *Store) MoveTaskStage(ctx context.Context, c *Caller, inputs []string, stage string) (*MoveResult, error) {
	res := &MoveResult{}
	for _, input := range inputs {
		t := s.resolveForMove(ctx, c, input, nil, res)
		if t == nil {
			continue
		}
		task, stages := t.Task, t.Taskset.Stages
		target := slices.Index(stages, stage)
		current := stageOf(task, stages)
		switch {
		case len(stages) == 0:
			res.fail(input, "no_stages", "the taskset defines no stages", &task.ID)
			continue
		case target < 0:
			res.fail(input, "unknown_stage", fmt.Sprintf("the taskset's stages are %s", strings.Join(stages, ", ")), &task.ID)
			continue
		case task.Status != TaskPending:
			res.fail(input, "not_pending", "only pending tasks move between stages; the task is "+task.Status, &task.ID)
			continue
		case target == current:
			res.Unchanged = append(res.Unchanged, task.ID)
			continue
		case target > current+1:
			res.fail(input, "stage_skip", fmt.Sprintf("a task advances one stage at a time: next is %q", stages[current+1]), &task.ID)
			continue
		}
		err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			if _, err := tx.NewUpdate().Model((*Task)(nil)).Set("stage = ?", stage).Set("updated_at = ?", now()).Where("id = ?", task.ID).Exec(ctx); err != nil {
				return err
			}
			return insertEvent(ctx, tx, c, task, EventStageChanged, stages[current], stage)
		})
		if err != nil {
			return nil, fmt.Errorf("move task stage: %w", err)
		}
		res.Succeeded = append(res.Succeeded, task.ID)
	}
	return res, nil
}

// stageOf is the index of a task's stage; a task that has none is at the first stage.
func stageOf(t Task, stages []string) int {
	if t.Stage == nil {
		return 0
	}
	return max(slices.Index(stages, *t.Stage), 0)
}

func insertEvent(ctx context.Context, tx bun.Tx, c *Caller, t Task, kind, from, to string) error {
	ev := &TaskEvent{ID: uuid.New(), TaskID: t.ID, TeamID: t.TeamID, Kind: kind, FromValue: from, ToValue: to,
		Version: t.VersionCount, UserID: &c.UserID, CreatedAt: now()}
	_, err := tx.NewInsert().Model(ev).Exec(ctx)
	return err
}

// SetTasksetStages sets the ordered review checklist of a taskset the caller may edit.
func (s *Store) SetTasksetStages(ctx context.Context, c *Caller, tasksetID uuid.UUID, stages []string) error {
	ts, err := s.GetTaskset(ctx, c, tasksetID)
	if err != nil {
		return err
	}
	if !ts.CanEdit {
		return fmt.Errorf("set stages: %w", ErrForbidden)
	}
	if stages == nil {
		stages = []string{}
	}
	_, err = s.DB.NewUpdate().Model((*Taskset)(nil)).Set("stages = ?", stages).Set("updated_at = ?", now()).Where("id = ?", tasksetID).Exec(ctx)
	return err
}

// CommentRow is a comment with its author's display fields.
type CommentRow struct {
	TaskComment `bun:",extend"`
	UserName    string `bun:"user_name,scanonly"`
	AvatarURL   string `bun:"avatar_url,scanonly"`
}

// canComment says whether the caller may comment on a task it can see: members of the owning team
// and of teams it is shared with, not mere readers of a public taskset.
func canComment(t *TaskInTaskset, c *Caller) (bool, string) {
	if c != nil && (t.Taskset.IsOwner || t.Taskset.Shared) {
		return true, ""
	}
	return false, "the taskset is public but not shared with the caller's team"
}

// ListComments lists a task's comments, oldest first, and whether the caller may add one.
func (s *Store) ListComments(ctx context.Context, c *Caller, taskID uuid.UUID) ([]CommentRow, bool, string, error) {
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
func (s *Store) AddComment(ctx context.Context, c *Caller, taskID uuid.UUID, message string) (*CommentRow, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	if ok, reason := canComment(t, c); !ok {
		return nil, fmt.Errorf("add comment: %s: %w", reason, ErrForbidden)
	}
	cm := &TaskComment{ID: uuid.New(), TaskID: t.Task.ID, UserID: c.UserID, Message: message, CreatedAt: now(), UpdatedAt: now()}
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
			n := &Notification{ID: uuid.New(), UserID: u, Kind: "mention", TaskID: &t.Task.ID, CommentID: &cm.ID, ActorID: &c.UserID, CreatedAt: now()}
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
	var users []User
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
		return nil, notFound(err, "get comment")
	}
	return &row, nil
}

// ownComment checks that a comment exists on a task the caller sees and that the caller wrote it.
func (s *Store) ownComment(ctx context.Context, c *Caller, taskID, id uuid.UUID) (*TaskInTaskset, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	row, err := s.getComment(ctx, t.Task.ID, id)
	if err != nil {
		return nil, err
	}
	if row.UserID != c.UserID {
		return nil, fmt.Errorf("comment %s: only its author may change it: %w", id, ErrForbidden)
	}
	return t, nil
}

// UpdateComment rewrites the caller's own comment.
func (s *Store) UpdateComment(ctx context.Context, c *Caller, taskID, id uuid.UUID, message string) (*CommentRow, error) {
	t, err := s.ownComment(ctx, c, taskID, id)
	if err != nil {
		return nil, err
	}
	if _, err := s.DB.NewUpdate().Model((*TaskComment)(nil)).Set("message = ?", message).Set("updated_at = ?", now()).Where("id = ?", id).Exec(ctx); err != nil {
		return nil, fmt.Errorf("update comment: %w", err)
	}
	return s.getComment(ctx, t.Task.ID, id)
}

// DeleteComment removes the caller's own comment.
func (s *Store) DeleteComment(ctx context.Context, c *Caller, taskID, id uuid.UUID) error {
	if _, err := s.ownComment(ctx, c, taskID, id); err != nil {
		return err
	}
	if _, err := s.DB.NewDelete().Model((*TaskComment)(nil)).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("delete comment: %w", err)
	}
	return nil
}

// ListNotifications lists a user's notifications, newest first.
func (s *Store) ListNotifications(ctx context.Context, userID uuid.UUID) ([]Notification, error) {
	var ns []Notification
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
func (s *Store) UserMentions(ctx context.Context, c *Caller, unreadOnly bool, limit int) ([]Mention, int, error) {
	var out []Mention
	q := s.mentions().Where("n.user_id = ?", c.UserID).OrderExpr("n.created_at DESC, n.id DESC").Limit(int64(limit))
	if unreadOnly {
		q = q.Where("n.read_at IS NULL")
	}
	if err := q.Scan(ctx, &out); err != nil {
		return nil, 0, fmt.Errorf("list mentions: %w", err)
	}
	unread, err := s.DB.NewSelect().Model((*Notification)(nil)).Where("user_id = ? AND kind = ? AND read_at IS NULL", c.UserID, "mention").Count(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("count unread mentions: %w", err)
	}
	return out, int(unread), nil
}

// MarkMentionsRead marks the caller's listed mentions read (all of them when ids is empty) and
// says how many changed; others' ids are ignored.
func (s *Store) MarkMentionsRead(ctx context.Context, c *Caller, ids []uuid.UUID) (int, error) {
	q := s.DB.NewUpdate().Model((*Notification)(nil)).Set("read_at = ?", now()).
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
	if _, err := s.DB.NewUpdate().Model((*Notification)(nil)).Set("mailed_at = ?", now()).Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("record a mention's mail: %w", err)
	}
	return nil
}

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
func (s *Store) TaskActivity(ctx context.Context, c *Caller, taskID uuid.UUID, limit int) ([]ActivityEvent, error) {
	t, err := s.GetTask(ctx, c, taskID)
	if err != nil {
		return nil, err
	}
	var versions []TaskVersion
	if err := s.DB.NewSelect().Model(&versions).Column("id", "version", "created_by", "created_at").
		Where("task_id = ?", t.Task.ID).Order("created_at DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task activity: %w", err)
	}
	var events []TaskEvent
	if err := s.DB.NewSelect().Model(&events).Where("task_id = ?", t.Task.ID).Order("created_at DESC").Limit(int64(limit)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("task activity: %w", err)
	}
	var comments []TaskComment
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
			var u User
			if err := s.DB.NewSelect().Model(&u).Where("id = ?", *out[i].By).Scan(ctx); err == nil {
				w.name = u.Name
			}
			var m Membership
			if err := s.DB.NewSelect().Model(&m).Where("user_id = ? AND team_id = ?", *out[i].By, t.Task.TeamID).Scan(ctx); err == nil {
				w.role = m.Role
			}
			seen[*out[i].By] = w
		}
		out[i].ByName, out[i].ByRole = w.name, w.role
	}
	return out, nil
}
