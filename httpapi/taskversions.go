package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// registerTaskVersions registers the read of a task's versions (a Proctor extension).
func (s *Server) registerTaskVersions() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-task-versions", Method: http.MethodGet, Path: "/tasks/{task_id}/versions", Tags: tags,
		Summary: "A task and its versions",
		Description: "A Proctor extension (not in the platform spec): the task (name, review status, stage, latest version) and every " +
			"version of it, newest first, each in the portable shape that POST /v2/tasks/upload accepts (the web app's task page).",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listTaskVersions)
}

type taskVersionsInput struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid" doc:"A task's id"`
}

// TaskVersion is one version of a task.
type TaskVersion struct {
	ID        uuid.UUID    `json:"id" doc:"The version's id (a task_version_id)"`
	Version   int          `json:"version"`
	CreatedAt time.Time    `json:"created_at"`
	CreatedBy *uuid.UUID   `json:"created_by" doc:"The user who wrote it"`
	Content   ExportedTask `json:"content"`
}

type taskVersionsOutput struct {
	Body struct {
		ID              uuid.UUID     `json:"id"`
		TasksetID       uuid.UUID     `json:"taskset_id"`
		Name            string        `json:"name"`
		Status          string        `json:"status" enum:"pending,ready,verified,revision,rejected"`
		Stage           *string       `json:"stage"`
		LatestVersionID *uuid.UUID    `json:"latest_version_id"`
		Versions        []TaskVersion `json:"versions" nullable:"false"`
	}
}

// listTaskVersions serves GET /v2/tasks/{task_id}/versions.
func (s *Server) listTaskVersions(ctx context.Context, in *taskVersionsInput) (*taskVersionsOutput, error) {
	tv, err := s.catalog.ListTaskVersions(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	out := &taskVersionsOutput{}
	b := &out.Body
	b.ID, b.TasksetID, b.Name, b.Status, b.Stage, b.LatestVersionID = tv.Task.ID, tv.Task.TasksetID, tv.Task.Name, tv.Task.Status, tv.Task.Stage, tv.Task.LatestVersionID
	b.Versions = []TaskVersion{}
	for _, v := range tv.Versions {
		b.Versions = append(b.Versions, TaskVersion{ID: v.VersionID, Version: v.Version, CreatedAt: v.CreatedAt, CreatedBy: v.CreatedBy, Content: exportedTask(v.ExportedTask)})
	}
	return out, nil
}
