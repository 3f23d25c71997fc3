package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// Comment is a note on a task (spec: Task comment).
type Comment struct {
	ID        uuid.UUID `json:"id"`
	TaskID    uuid.UUID `json:"task_id"`
	UserID    uuid.UUID `json:"user_id"`
	Message   string    `json:"message"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	AvatarURL string    `json:"avatar_url"`
	UserName  string    `json:"user_name"`
}

func commentFromRow(r models.CommentRow) Comment {
	return Comment{ID: r.ID, TaskID: r.TaskID, UserID: r.UserID, Message: r.Message, CreatedAt: r.CreatedAt,
		UpdatedAt: r.UpdatedAt, AvatarURL: r.AvatarURL, UserName: r.UserName}
}

type commentsOutput struct {
	Body struct {
		Comments   []Comment `json:"comments" nullable:"false"`
		CanComment bool      `json:"can_comment"`
		Reason     string    `json:"reason" doc:"Why the caller may not comment, when it may not"`
	}
}

type commentBody struct {
	Body string `json:"body" minLength:"1" maxLength:"20000" doc:"The comment; @name or @email mentions notify those members"`
}

type commentOutput struct{ Body Comment }

// ActivityEvent is one entry of a task's timeline (spec: Task activity event).
type ActivityEvent struct {
	Event   string     `json:"event" enum:"version_created,status_changed,stage_changed,comment"`
	At      string     `json:"at" format:"date-time"`
	By      *uuid.UUID `json:"by"`
	ByName  string     `json:"by_name"`
	ByRole  string     `json:"by_role"`
	Done    bool       `json:"done" doc:"The event completed a step: a version written, or a move to ready or verified"`
	Key     string     `json:"key"`
	Summary string     `json:"summary"`
	Version int        `json:"version" doc:"The task's version when it happened"`
}

type activityOutput struct {
	Body struct {
		Events []ActivityEvent `json:"events" nullable:"false"`
	}
}

// registerTaskComments registers a task's comments and its activity timeline.
func (s *Server) registerTaskComments() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-task-comments", Method: http.MethodGet, Path: "/tasks/{task_id}/comments", Tags: tags,
		Summary: "List a task's comments", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listTaskComments)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "add-task-comment", Method: http.MethodPost, Path: "/tasks/{task_id}/comments", Tags: tags,
		Summary: "Comment on a task", Description: "Members @mentioned by name or email are notified.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.addTaskComment)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "edit-task-comment", Method: http.MethodPatch, Path: "/tasks/{task_id}/comments/{comment_id}", Tags: tags,
		Summary: "Edit a comment", Description: "Only the author may edit a comment.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.editTaskComment)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "delete-task-comment", Method: http.MethodDelete, Path: "/tasks/{task_id}/comments/{comment_id}", Tags: tags,
		Summary: "Delete a comment", Description: "Only the author may delete a comment.", DefaultStatus: http.StatusNoContent,
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.deleteTaskComment)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-activity", Method: http.MethodGet, Path: "/tasks/{task_id}/activity", Tags: tags,
		Summary:     "A task's activity",
		Description: "Versions written, status and stage changes, and comments, newest first.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTaskActivity)
}

// listTaskComments serves GET /v2/tasks/{task_id}/comments: list a task's comments.
func (s *Server) listTaskComments(ctx context.Context, in *taskPath) (*commentsOutput, error) {
	rows, can, reason, err := s.store.ListComments(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	out := &commentsOutput{}
	out.Body.Comments, out.Body.CanComment, out.Body.Reason = []Comment{}, can, reason
	for _, r := range rows {
		out.Body.Comments = append(out.Body.Comments, commentFromRow(r))
	}
	return out, nil
}

type addCommentInput struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid"`
	Body   commentBody
}

// addTaskComment serves POST /v2/tasks/{task_id}/comments: comment on a task.
func (s *Server) addTaskComment(ctx context.Context, in *addCommentInput) (*commentOutput, error) {
	row, err := s.store.AddComment(ctx, callerFrom(ctx), in.TaskID, in.Body.Body)
	if err != nil {
		return nil, storeError(err, "task")
	}
	return &commentOutput{Body: commentFromRow(*row)}, nil
}

type editCommentInput struct {
	TaskID    uuid.UUID `path:"task_id" format:"uuid"`
	CommentID uuid.UUID `path:"comment_id" format:"uuid"`
	Body      commentBody
}

// editTaskComment serves PATCH /v2/tasks/{task_id}/comments/{comment_id}: edit a comment.
func (s *Server) editTaskComment(ctx context.Context, in *editCommentInput) (*commentOutput, error) {
	row, err := s.store.UpdateComment(ctx, callerFrom(ctx), in.TaskID, in.CommentID, in.Body.Body)
	if err != nil {
		return nil, storeError(err, "comment")
	}
	return &commentOutput{Body: commentFromRow(*row)}, nil
}

type commentPath struct {
	TaskID    uuid.UUID `path:"task_id" format:"uuid"`
	CommentID uuid.UUID `path:"comment_id" format:"uuid"`
}

// deleteTaskComment serves DELETE /v2/tasks/{task_id}/comments/{comment_id}: delete a comment.
func (s *Server) deleteTaskComment(ctx context.Context, in *commentPath) (*struct{}, error) {
	if err := s.store.DeleteComment(ctx, callerFrom(ctx), in.TaskID, in.CommentID); err != nil {
		return nil, storeError(err, "comment")
	}
	return nil, nil
}

type activityInput struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid"`
	Limit  int       `query:"limit" minimum:"1" maximum:"200" default:"50"`
}

// getTaskActivity serves GET /v2/tasks/{task_id}/activity: a task's activity.
func (s *Server) getTaskActivity(ctx context.Context, in *activityInput) (*activityOutput, error) {
	acts, err := s.store.TaskActivity(ctx, callerFrom(ctx), in.TaskID, in.Limit)
	if err != nil {
		return nil, storeError(err, "task")
	}
	out := &activityOutput{}
	out.Body.Events = []ActivityEvent{}
	for _, a := range acts {
		out.Body.Events = append(out.Body.Events, ActivityEvent{Event: a.Event, At: a.At.UTC().Format(time.RFC3339Nano), By: a.By,
			ByName: a.ByName, ByRole: a.ByRole, Done: a.Done, Key: a.Key, Summary: a.Summary, Version: a.Version})
	}
	return out, nil
}

// registerMentions registers the routes of the caller's @mentions.
func (s *Server) registerMentions() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-mentions", Method: http.MethodGet, Path: "/mentions", Tags: tags,
		Summary: "Your mentions (Proctor extension)",
		Description: "Not in the spec, which says only that a comment notifies the members it mentions: the caller's mentions, newest " +
			"first, each with its task and comment, and the count of unread ones. Each is also mailed once when the server has " +
			"a mail server (--smtp-url).",
	}, authKeyOrSession), s.listMentions)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "read-mentions", Method: http.MethodPost, Path: "/mentions/read", Tags: tags,
		Summary:     "Mark mentions read (Proctor extension)",
		Description: "Marks the listed mentions of the caller read, or all of them when ids is empty; others' ids are ignored.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.readMentions)
}

// Mention is a comment that @mentions the caller.
type Mention struct {
	ID        uuid.UUID  `json:"id"`
	TaskID    uuid.UUID  `json:"task_id"`
	TaskName  string     `json:"task_name"`
	TasksetID uuid.UUID  `json:"taskset_id"`
	CommentID uuid.UUID  `json:"comment_id"`
	Comment   string     `json:"comment" doc:"The comment's text"`
	ActorName string     `json:"actor_name" doc:"Who mentioned the caller"`
	ReadAt    *time.Time `json:"read_at"`
	CreatedAt time.Time  `json:"created_at"`
}

type mentionsInput struct {
	UnreadOnly bool `query:"unread_only" default:"false"`
	Limit      int  `query:"limit" minimum:"1" maximum:"200" default:"50"`
}

type mentionsOutput struct {
	Body struct {
		Items  []Mention `json:"items" nullable:"false"`
		Unread int       `json:"unread" doc:"The caller's unread mentions, all of them"`
	}
}

// listMentions serves GET /v2/mentions: the caller's mentions.
func (s *Server) listMentions(ctx context.Context, in *mentionsInput) (*mentionsOutput, error) {
	ms, unread, err := s.store.UserMentions(ctx, callerFrom(ctx), in.UnreadOnly, in.Limit)
	if err != nil {
		return nil, err
	}
	out := &mentionsOutput{}
	out.Body.Items, out.Body.Unread = make([]Mention, 0, len(ms)), unread
	for _, m := range ms {
		out.Body.Items = append(out.Body.Items, Mention{ID: m.ID, TaskID: m.TaskID, TaskName: m.TaskName, TasksetID: m.TasksetID,
			CommentID: m.CommentID, Comment: m.Comment, ActorName: m.ActorName, ReadAt: m.ReadAt, CreatedAt: m.CreatedAt})
	}
	return out, nil
}

type readMentionsInput struct {
	Body struct {
		IDs []uuid.UUID `json:"ids,omitempty" maxItems:"1000" doc:"The mentions to mark read; empty: all of the caller's"`
	}
}

// readMentions serves POST /v2/mentions/read: mark mentions read.
func (s *Server) readMentions(ctx context.Context, in *readMentionsInput) (*updatedCount, error) {
	n, err := s.store.MarkMentionsRead(ctx, callerFrom(ctx), in.Body.IDs)
	if err != nil {
		return nil, err
	}
	out := &updatedCount{}
	out.Body.UpdatedCount = n
	return out, nil
}
