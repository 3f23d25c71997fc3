package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// Taskset is a taskset as the caller sees it (spec: Resources › Taskset).
type Taskset struct {
	ID                   uuid.UUID      `json:"id"`
	Name                 string         `json:"name"`
	Public               bool           `json:"public"`
	CreatedAt            time.Time      `json:"created_at"`
	UpdatedAt            time.Time      `json:"updated_at"`
	CanEdit              bool           `json:"can_edit" doc:"The caller's team owns the taskset or it was shared with write access"`
	CanManage            bool           `json:"can_manage" doc:"The caller's team owns the taskset: it may share, publish and delete it"`
	Columns              map[string]any `json:"columns"`
	Description          string         `json:"description"`
	HiddenProgressStages []string       `json:"hidden_progress_stages" nullable:"false"`
	IsOwner              bool           `json:"is_owner"`
	IsStarred            bool           `json:"is_starred"`
	StarCount            int64          `json:"star_count" minimum:"0"`
	TaskCount            int64          `json:"task_count" minimum:"0"`
	Purpose              string         `json:"purpose" enum:"EVAL,TRAINING" doc:"Extension: an evaluation suite or training data (set by task upload)"`
	Stages               []string       `json:"stages" nullable:"false" doc:"Extension: the review stages a task moves through, in order (PATCH /v2/tasks/stage); a task becomes ready only at the last"`
}

func tasksetFromRow(r catalog.TasksetRow) Taskset {
	cols := r.Columns
	if cols == nil {
		cols = map[string]any{}
	}
	stages, review := r.HiddenProgressStages, r.Stages
	if stages == nil {
		stages = []string{}
	}
	if review == nil {
		review = []string{}
	}
	return Taskset{
		ID: r.ID, Name: r.Name, Public: r.Public, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		CanEdit: r.CanEdit, CanManage: r.IsOwner, Columns: cols, Description: r.Description,
		HiddenProgressStages: stages, IsOwner: r.IsOwner, IsStarred: r.IsStarred,
		StarCount: r.StarCount, TaskCount: r.TaskCount, Purpose: r.Purpose, Stages: review,
	}
}

// ListTasksetsOutput is one page of tasksets.
type ListTasksetsOutput struct {
	Body Page[Taskset]
}

func (s *Server) registerTasksets() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-tasksets", Method: http.MethodGet, Path: "/tasksets", Tags: []string{"Tasksets"},
		Summary:     "List tasksets",
		Description: "Without public_only: the tasksets owned by or shared with the caller's team. With it: every public taskset.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.listTasksets)
}

// ListTasksetsInput is the query of GET /v2/tasksets.
type ListTasksetsInput struct {
	Limit      int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"Page size"`
	Offset     int    `query:"offset" minimum:"0" maximum:"2147483647" default:"0" doc:"Rows to skip"`
	Search     string `query:"search" maxLength:"200" doc:"Case-insensitive substring of the name"`
	PublicOnly bool   `query:"public_only" default:"false" doc:"Only public tasksets, whoever owns them"`
	OwnerOnly  bool   `query:"owner_only" default:"false" doc:"Only tasksets the caller's team owns (ignored when public_only is true)"`
	SortBy     string `query:"sort_by" enum:"starred,date,name,stars,tasks" default:"starred" doc:"starred: the caller's starred first; date: updated_at descending; name: A-Z; stars: star_count descending; tasks: task_count descending"`
}

// listTasksets serves GET /v2/tasksets: list tasksets.
func (s *Server) listTasksets(ctx context.Context, in *ListTasksetsInput) (*ListTasksetsOutput, error) {
	rows, total, err := s.catalog.ListTasksets(ctx, callerFrom(ctx), catalog.TasksetQuery{
		Search: in.Search, PublicOnly: in.PublicOnly, OwnerOnly: in.OwnerOnly, SortBy: in.SortBy,
		Limit: in.Limit, Offset: in.Offset,
	})
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	items := make([]Taskset, len(rows))
	for i, r := range rows {
		items[i] = tasksetFromRow(r)
	}
	return &ListTasksetsOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

type tasksetPath struct {
	TasksetID uuid.UUID `path:"taskset_id" format:"uuid" doc:"The taskset's id"`
}

type tasksetOutput struct{ Body Taskset }

// ExportedTask is a task in the portable shape that upload accepts.
type ExportedTask struct {
	Name          string                  `json:"name"`
	ExternalID    string                  `json:"external_id,omitempty"`
	Description   string                  `json:"description,omitempty"`
	Env           string                  `json:"env" doc:"The environment's name; empty for a task without one"`
	Scenario      string                  `json:"scenario" doc:"The scenario's name; empty for a prompt-only task"`
	Args          map[string]any          `json:"args"`
	Prompt        string                  `json:"prompt,omitempty"`
	SystemPrompt  string                  `json:"system_prompt,omitempty"`
	AgentConfig   models.AgentConfig      `json:"agent_config"`
	RuntimeConfig models.RuntimeConfig    `json:"runtime_config"`
	Validation    []models.ValidationCall `json:"validation" nullable:"false"`
	Keywords      []string                `json:"keywords,omitempty" nullable:"false" doc:"Proctor extension: the task's keywords, as upload takes them (left out when none)"`
	Metadata      map[string]any          `json:"metadata,omitempty" doc:"Proctor extension: the task's metadata, as upload takes it (left out when none)"`
}

// TasksetExport is a taskset with the latest version of each task (spec: Taskset export).
type TasksetExport struct {
	TasksetID uuid.UUID      `json:"taskset_id"`
	Name      string         `json:"name"`
	Tasks     []ExportedTask `json:"tasks" nullable:"false"`
}

type exportOutput struct{ Body TasksetExport }

func (s *Server) registerTasksetReads() {
	tags := []string{"Tasksets"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-taskset", Method: http.MethodGet, Path: "/tasksets/{taskset_id}", Tags: tags,
		Summary: "Get a taskset", Description: "A public taskset may be fetched without credentials.",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTaskset)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "export-taskset", Method: http.MethodGet, Path: "/tasksets/{taskset_id}/export", Tags: tags,
		Summary:     "Export a taskset",
		Description: "Every task's latest version in the portable shape that POST /v2/tasks/upload accepts. Requires an API key.",
		Errors:      []int{http.StatusNotFound},
	}, authAPIKey), s.exportTaskset)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-taskset-by-name", Method: http.MethodGet, Path: "/tasksets/by-name/{name}", Tags: tags,
		Summary:     "Export a taskset by name",
		Description: "Looks the name up within the caller's team and returns the export. Requires an API key.",
		Errors:      []int{http.StatusNotFound},
	}, authAPIKey), s.getTasksetByName)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-taskset-tasks", Method: http.MethodGet, Path: "/tasksets/{taskset_id}/tasks", Tags: tags,
		Summary:     "List a taskset's tasks",
		Description: "The tasks of a taskset by name, with their review state and latest version, filtered by search and keyword; total counts the tasks that match. (An addition to the spec's routes.)",
		Errors:      []int{http.StatusNotFound},
	}, authOptional), s.listTasksetTasks)
}

// getTaskset serves GET /v2/tasksets/{taskset_id}: get a taskset.
func (s *Server) getTaskset(ctx context.Context, in *tasksetPath) (*tasksetOutput, error) {
	row, err := s.catalog.GetTaskset(ctx, callerFrom(ctx), in.TasksetID)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	return &tasksetOutput{Body: tasksetFromRow(*row)}, nil
}

// exportTaskset serves GET /v2/tasksets/{taskset_id}/export: export a taskset.
func (s *Server) exportTaskset(ctx context.Context, in *tasksetPath) (*exportOutput, error) {
	row, err := s.catalog.GetTaskset(ctx, callerFrom(ctx), in.TasksetID)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	return s.export(ctx, row)
}

type byNameInput struct {
	Name string `path:"name" minLength:"1" maxLength:"200" doc:"The taskset's name within the caller's team"`
}

// getTasksetByName serves GET /v2/tasksets/by-name/{name}: export a taskset by name.
func (s *Server) getTasksetByName(ctx context.Context, in *byNameInput) (*exportOutput, error) {
	row, err := s.catalog.GetTasksetByName(ctx, callerFrom(ctx), in.Name)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	return s.export(ctx, row)
}

func (s *Server) export(ctx context.Context, row *catalog.TasksetRow) (*exportOutput, error) {
	tasks, err := s.catalog.ExportTaskset(ctx, callerFrom(ctx), row)
	if err != nil {
		return nil, err
	}
	out := TasksetExport{TasksetID: row.ID, Name: row.Name, Tasks: make([]ExportedTask, len(tasks))}
	for i, t := range tasks {
		out.Tasks[i] = exportedTask(t)
	}
	return &exportOutput{Body: out}, nil
}

// exportedTask is a task version in the portable shape that upload accepts.
func exportedTask(t catalog.ExportedTask) ExportedTask {
	return ExportedTask{
		Name: t.Name, ExternalID: t.ExternalID, Description: t.Description, Env: t.Env, Scenario: t.Scenario,
		Args: nonNilMap(t.Args), Prompt: t.Prompt, SystemPrompt: t.SystemPrompt, AgentConfig: t.AgentConfig,
		RuntimeConfig: t.RuntimeConfig, Validation: nonNilSlice(t.Validation), Keywords: t.Keywords, Metadata: t.Metadata,
	}
}

// TaskSummary is a task in a taskset listing.
type TaskSummary struct {
	ID              uuid.UUID  `json:"id"`
	Name            string     `json:"name"`
	ExternalID      *string    `json:"external_id"`
	Status          string     `json:"status" enum:"pending,ready,verified,revision,rejected"`
	Stage           *string    `json:"stage"`
	LatestVersionID *uuid.UUID `json:"latest_version_id"`
	Version         int        `json:"version" doc:"Number of the latest version"`
	Keywords        []string   `json:"keywords" nullable:"false" doc:"Proctor extension: the latest version's keywords"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

type listTasksOutput struct{ Body Page[TaskSummary] }

type listTasksInput struct {
	TasksetID uuid.UUID `path:"taskset_id" format:"uuid"`
	Limit     int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset    int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
	Search    string    `query:"search" maxLength:"200" doc:"Proctor extension: only tasks whose name, latest version's description or one of its keywords contains this (case-insensitive)"`
	Keyword   string    `query:"keyword" maxLength:"100" doc:"Proctor extension: only tasks whose latest version has this keyword (whole, case-insensitive)"`
}

// listTasksetTasks serves GET /v2/tasksets/{taskset_id}/tasks: list a taskset's tasks.
func (s *Server) listTasksetTasks(ctx context.Context, in *listTasksInput) (*listTasksOutput, error) {
	rows, total, err := s.catalog.ListTasks(ctx, callerFrom(ctx), in.TasksetID, catalog.TaskQuery{
		Search: in.Search, Keyword: in.Keyword, Limit: in.Limit, Offset: in.Offset,
	})
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	items := make([]TaskSummary, len(rows))
	for i, r := range rows {
		items[i] = TaskSummary{ID: r.ID, Name: r.Name, ExternalID: r.ExternalID, Status: r.Status, Stage: r.Stage,
			LatestVersionID: r.LatestVersionID, Version: r.Version, Keywords: nonNilSlice(r.Keywords), CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	return &listTasksOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}
