package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
)

// EnvRef names an environment by name or id. Upload accepts a bare string (a name or an id), as
// the export writes it, or an object {name} / {id}.
type EnvRef struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// UnmarshalJSON accepts "name-or-id" as well as the object form.
func (e *EnvRef) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*e = EnvRef{Name: s}
		return nil
	}
	type plain EnvRef
	return json.Unmarshal(b, (*plain)(e))
}

// Schema documents both accepted forms.
func (EnvRef) Schema(r huma.Registry) *huma.Schema {
	return &huma.Schema{
		Description: "The task's environment: its name or id as a string, or an object {name} or {id}",
		OneOf: []*huma.Schema{
			{Type: huma.TypeString, MaxLength: ptr(200), Description: "A name or id; empty means none"},
			{Type: huma.TypeObject, AdditionalProperties: false, Properties: map[string]*huma.Schema{
				"id":   {Type: huma.TypeString, Format: "uuid"},
				"name": {Type: huma.TypeString, MinLength: ptr(1), MaxLength: ptr(200)},
			}},
		},
	}
}

func (e EnvRef) key() string {
	if e.ID != "" {
		return e.ID
	}
	return e.Name
}

func ptr[T any](v T) *T { return &v }

// UploadTask is one task of an upload.
type UploadTask struct {
	Name          string                  `json:"name" minLength:"1" maxLength:"200"`
	TaskID        string                  `json:"task_id,omitempty" doc:"Update this task (its uuid) rather than match by external_id or name"`
	ExternalID    string                  `json:"external_id,omitempty" maxLength:"200" doc:"Your identifier; a task with the same external_id in the taskset is updated"`
	Description   string                  `json:"description,omitempty" maxLength:"10000"`
	Env           *EnvRef                 `json:"env,omitempty"`
	Scenario      string                  `json:"scenario,omitempty" maxLength:"200" doc:"A scenario the environment's latest build declares"`
	ScenarioID    *uuid.UUID              `json:"scenario_id,omitempty"`
	Args          map[string]any          `json:"args,omitempty" doc:"The scenario's arguments"`
	Prompt        string                  `json:"prompt,omitempty" maxLength:"200000" doc:"The request, for tasks without a scenario"`
	SystemPrompt  string                  `json:"system_prompt,omitempty" maxLength:"200000"`
	AgentConfig   models.AgentConfig      `json:"agent_config,omitempty" doc:"allowed_tools, disallowed_tools, system_prompt; other keys are kept for agents that read them"`
	RuntimeConfig models.RuntimeConfig    `json:"runtime_config,omitempty"`
	Validation    []models.ValidationCall `json:"validation,omitempty" maxItems:"1000"`
	Keywords      []string                `json:"keywords,omitempty" maxItems:"100" minLength:"1" maxLength:"100" doc:"Proctor extension: words that describe the task (a Harbor task's keywords), matched by the search and keyword parameters of GET /v2/tasksets/{taskset_id}/tasks. Each is trimmed; a blank one is refused, and a repeat (ignoring case) kept once. Part of the version's content: a change makes a new version."`
	Metadata      map[string]any          `json:"metadata,omitempty" doc:"Proctor extension: free-form facts about the task (where it comes from, its authors, difficulty, …; a Harbor import puts the task's under harbor), at most 64 KiB as JSON (more is refused with 422). Part of the version's content: a change makes a new version; the export returns it."`
}

// UploadBody is the body of POST /v2/tasks/upload.
type UploadBody struct {
	TasksetName string       `json:"taskset_name,omitempty" maxLength:"200" doc:"The taskset, created if the team has none of this name"`
	TasksetID   *uuid.UUID   `json:"taskset_id,omitempty" doc:"An existing taskset the caller may edit (instead of taskset_name)"`
	Name        string       `json:"name,omitempty" maxLength:"200" doc:"Alias of taskset_name, so that an export uploads as is"`
	Description string       `json:"description,omitempty" maxLength:"10000"`
	Purpose     string       `json:"purpose,omitempty" enum:"EVAL,TRAINING" doc:"Extension: the taskset's purpose from now on (new tasksets are EVAL); model results and suggestions filter by it"`
	RegistryID  *uuid.UUID   `json:"registry_id,omitempty" doc:"The environment of tasks that name none"`
	Tasks       []UploadTask `json:"tasks" minItems:"1" maxItems:"50000"`
}

// UploadResult says what an upload did.
type UploadResult struct {
	TasksetID      uuid.UUID   `json:"taskset_id"`
	TasksetName    string      `json:"taskset_name"`
	TaskCount      int         `json:"task_count" doc:"Tasks in the upload"`
	TaskVersionIDs []uuid.UUID `json:"task_version_ids" doc:"The version now holding each uploaded task, in upload order"`
	TasksCreated   int         `json:"tasks_created"`
	TasksUpdated   int         `json:"tasks_updated" doc:"Tasks whose content changed and got a new version"`
}

type uploadOutput struct {
	Body UploadResult
}

// registerTasks registers the upload of tasks.
func (s *Server) registerTasks() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "upload-tasks", Method: http.MethodPost, Path: "/tasks/upload", Tags: tags,
		Summary: "Upload tasks",
		Description: "Creates the taskset if needed, then creates or updates each task, matched by task_id, external_id, then name. " +
			"A task whose content changed gets a new immutable version (rollouts refer to version ids); unchanged content keeps its version. " +
			"The upload is atomic: every invalid field is reported (422) and nothing is written.",
		DefaultStatus: http.StatusCreated,
		MaxBodyBytes:  s.maxBodyBytes,
		Errors:        []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession), s.uploadTasks)
}

type uploadInput struct{ Body UploadBody }

// uploadTasks serves POST /v2/tasks/upload: upload tasks.
func (s *Server) uploadTasks(ctx context.Context, in *uploadInput) (*uploadOutput, error) {
	name := in.Body.TasksetName
	if name == "" {
		name = in.Body.Name
	}
	up := catalog.Upload{TasksetID: in.Body.TasksetID, TasksetName: name, Description: in.Body.Description, Purpose: in.Body.Purpose, RegistryID: in.Body.RegistryID}
	for _, t := range in.Body.Tasks {
		tu := catalog.TaskUpload{TaskID: t.TaskID, ExternalID: t.ExternalID, ScenarioID: t.ScenarioID, TaskContent: models.TaskContent{
			Name: t.Name, Description: t.Description, Scenario: t.Scenario, Args: t.Args, Prompt: t.Prompt,
			SystemPrompt: t.SystemPrompt, AgentConfig: t.AgentConfig, RuntimeConfig: t.RuntimeConfig, Validation: t.Validation,
			Keywords: t.Keywords, Metadata: t.Metadata,
		}}
		if t.Env != nil {
			tu.Env = t.Env.key()
		}
		up.Tasks = append(up.Tasks, tu)
	}
	res, err := s.catalog.UploadTasks(ctx, callerFrom(ctx), up)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	return &uploadOutput{Body: UploadResult{
		TasksetID: res.TasksetID, TasksetName: res.TasksetName, TaskCount: res.TaskCount,
		TaskVersionIDs: res.TaskVersionIDs, TasksCreated: res.TasksCreated, TasksUpdated: res.TasksUpdated,
	}}, nil
}

type taskPath struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid" doc:"A task's id (or one of its version ids)"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
