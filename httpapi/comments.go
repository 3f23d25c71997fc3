package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/catalog"
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

func commentFromRow(r catalog.CommentRow) Comment {
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

// registerTaskComments registers a task's comments.
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
}

// listTaskComments serves GET /v2/tasks/{task_id}/comments: list a task's comments.
func (s *Server) listTaskComments(ctx context.Context, in *taskPath) (*commentsOutput, error) {
	rows, can, reason, err := s.catalog.ListComments(ctx, callerFrom(ctx), in.TaskID)
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
	row, err := s.catalog.AddComment(ctx, callerFrom(ctx), in.TaskID, in.Body.Body)
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
	row, err := s.catalog.UpdateComment(ctx, callerFrom(ctx), in.TaskID, in.CommentID, in.Body.Body)
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
	if err := s.catalog.DeleteComment(ctx, callerFrom(ctx), in.TaskID, in.CommentID); err != nil {
		return nil, storeError(err, "comment")
	}
	return nil, nil
}
