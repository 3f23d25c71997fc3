package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

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

// registerTaskActivity registers the read of a task's timeline.
func (s *Server) registerTaskActivity() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-activity", Method: http.MethodGet, Path: "/tasks/{task_id}/activity", Tags: tags,
		Summary:     "A task's activity",
		Description: "Versions written, status and stage changes, and comments, newest first.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTaskActivity)
}

type activityInput struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid"`
	Limit  int       `query:"limit" minimum:"1" maximum:"200" default:"50"`
}

// getTaskActivity serves GET /v2/tasks/{task_id}/activity: a task's activity.
func (s *Server) getTaskActivity(ctx context.Context, in *activityInput) (*activityOutput, error) {
	acts, err := s.catalog.TaskActivity(ctx, callerFrom(ctx), in.TaskID, in.Limit)
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
