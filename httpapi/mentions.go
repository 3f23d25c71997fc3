package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

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
	ms, unread, err := s.catalog.UserMentions(ctx, callerFrom(ctx), in.UnreadOnly, in.Limit)
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
	n, err := s.catalog.MarkMentionsRead(ctx, callerFrom(ctx), in.Body.IDs)
	if err != nil {
		return nil, err
	}
	out := &updatedCount{}
	out.Body.UpdatedCount = n
	return out, nil
}
