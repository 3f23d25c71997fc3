package httpapi

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
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
	up := models.Upload{TasksetID: in.Body.TasksetID, TasksetName: name, Description: in.Body.Description, Purpose: in.Body.Purpose, RegistryID: in.Body.RegistryID}
	for _, t := range in.Body.Tasks {
		tu := models.TaskUpload{TaskID: t.TaskID, ExternalID: t.ExternalID, ScenarioID: t.ScenarioID, TaskContent: models.TaskContent{
			Name: t.Name, Description: t.Description, Scenario: t.Scenario, Args: t.Args, Prompt: t.Prompt,
			SystemPrompt: t.SystemPrompt, AgentConfig: t.AgentConfig, RuntimeConfig: t.RuntimeConfig, Validation: t.Validation,
		}}
		if t.Env != nil {
			tu.Env = t.Env.key()
		}
		up.Tasks = append(up.Tasks, tu)
	}
	res, err := s.store.UploadTasks(ctx, callerFrom(ctx), up)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	return &uploadOutput{Body: UploadResult{
		TasksetID: res.TasksetID, TasksetName: res.TasksetName, TaskCount: res.TaskCount,
		TaskVersionIDs: res.TaskVersionIDs, TasksCreated: res.TasksCreated, TasksUpdated: res.TasksUpdated,
	}}, nil
}

// MoveFailure is one id of a batch move that did not move.
type MoveFailure struct {
	Input      string     `json:"input" doc:"The id or slug as sent"`
	Reason     string     `json:"reason"`
	Code       string     `json:"code" enum:"not_found,forbidden,taskset_required,stage_incomplete,no_stages,unknown_stage,not_pending,stage_skip"`
	ResolvedID *uuid.UUID `json:"resolved_id" doc:"The task the input resolved to, when it did"`
}

// MoveResult is the per-id outcome of a non-atomic batch move.
type MoveResult struct {
	Failures  []MoveFailure `json:"failures" nullable:"false"`
	Succeeded []uuid.UUID   `json:"succeeded" nullable:"false"`
	Unchanged []uuid.UUID   `json:"unchanged" nullable:"false"`
}

func moveResult(r *models.MoveResult) MoveResult {
	out := MoveResult{Failures: []MoveFailure{}, Succeeded: r.Succeeded, Unchanged: r.Unchanged}
	if out.Succeeded == nil {
		out.Succeeded = []uuid.UUID{}
	}
	if out.Unchanged == nil {
		out.Unchanged = []uuid.UUID{}
	}
	for _, f := range r.Failures {
		out.Failures = append(out.Failures, MoveFailure{Input: f.Input, Reason: f.Reason, Code: f.Code, ResolvedID: f.ResolvedID})
	}
	return out
}

type moveOutput struct{ Body MoveResult }

type taskPath struct {
	TaskID uuid.UUID `path:"task_id" format:"uuid" doc:"A task's id (or one of its version ids)"`
}

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

// Attachment is a file staged for a task brief.
type Attachment struct {
	Name        string     `json:"name"`
	ArchivedAt  *time.Time `json:"archived_at"`
	ContentType string     `json:"content_type"`
	Error       string     `json:"error"`
	Size        int64      `json:"size"`
	Status      string     `json:"status" example:"staged"`
	StorageURL  string     `json:"storage_url"`
	URL         string     `json:"url" doc:"Presigned download URL"`
}

type briefOutput struct {
	Body struct {
		Prompt      string       `json:"prompt"`
		Attachments []Attachment `json:"attachments" nullable:"false"`
	}
}

type briefDownloadOutput struct {
	ContentType        string `header:"Content-Type"`
	ContentDisposition string `header:"Content-Disposition"`
	Body               []byte
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
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
}

type listTasksOutput struct{ Body Page[TaskSummary] }

func (s *Server) registerTaskReview() {
	tags := []string{"Tasks"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-task-status", Method: http.MethodPatch, Path: "/tasks/status", Tags: tags,
		Summary: "Set tasks' review status",
		Description: "Per id and non-atomic: each id lands in succeeded, unchanged or failures. A taskset with stages " +
			"requires its last stage before ready; clear=true returns tasks to pending and resets their stage.",
		Errors: []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.setTaskStatus)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "move-task-stage", Method: http.MethodPatch, Path: "/tasks/stage", Tags: tags,
		Summary:     "Move tasks between stages",
		Description: "Advances pending tasks one stage or sends them back to an earlier one. Per id and non-atomic.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.moveTaskStage)

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
		OperationID: "list-task-versions", Method: http.MethodGet, Path: "/tasks/{task_id}/versions", Tags: tags,
		Summary: "A task and its versions",
		Description: "A Proctor extension (not in the platform spec): the task (name, review status, stage, latest version) and every " +
			"version of it, newest first, each in the portable shape that POST /v2/tasks/upload accepts (the web app's task page).",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listTaskVersions)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-activity", Method: http.MethodGet, Path: "/tasks/{task_id}/activity", Tags: tags,
		Summary:     "A task's activity",
		Description: "Versions written, status and stage changes, and comments, newest first.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTaskActivity)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-brief", Method: http.MethodGet, Path: "/tasks/{task_id}/brief", Tags: tags,
		Summary:     "A task's brief",
		Description: "The prompt and attachments a person works from. Browser session only: an API key gets 401.",
		Errors:      []int{http.StatusNotFound},
	}, authSession), s.getTaskBrief)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "download-task-brief", Method: http.MethodGet, Path: "/tasks/{task_id}/brief/download", Tags: tags,
		Summary:     "Download a task's brief",
		Description: "A zip of the prompt (prompt.md), the task in the export shape (task.json) and its attachments. Browser session only.",
		Errors:      []int{http.StatusNotFound},
		Responses:   map[string]*huma.Response{"200": {Description: "A zip archive", Content: map[string]*huma.MediaType{"application/zip": {}}}},
	}, authSession), s.downloadTaskBrief)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-taskset-tasks", Method: http.MethodGet, Path: "/tasksets/{taskset_id}/tasks", Tags: []string{"Tasksets"},
		Summary:     "List a taskset's tasks",
		Description: "The tasks of a taskset by name, with their review state and latest version. (An addition to the spec's routes.)",
		Errors:      []int{http.StatusNotFound},
	}, authOptional), s.listTasksetTasks)
}

type statusInput struct {
	Body struct {
		Clear     bool        `json:"clear,omitempty" doc:"Clear the review: back to pending, stage reset"`
		IDs       []uuid.UUID `json:"ids,omitempty" maxItems:"10000" doc:"Task ids (a task version id resolves to its task)"`
		Slugs     []string    `json:"slugs,omitempty" maxItems:"10000" doc:"Task names or external ids within taskset_id"`
		Status    string      `json:"status,omitempty" enum:"pending,ready,verified,revision,rejected"`
		TasksetID *uuid.UUID  `json:"taskset_id,omitempty" doc:"The taskset slugs are looked up in"`
		Reviewed  bool        `json:"reviewed,omitempty" doc:"Accepted for compatibility; not used"`
	}
}

// Resolve holds the rules across fields that the schema cannot state.
func (in *statusInput) Resolve(huma.Context) []error {
	var errs []error
	if !in.Body.Clear && in.Body.Status == "" {
		errs = append(errs, &huma.ErrorDetail{Location: "body.status", Message: "status is required unless clear is true"})
	}
	if len(in.Body.IDs) == 0 && len(in.Body.Slugs) == 0 {
		errs = append(errs, &huma.ErrorDetail{Location: "body.ids", Message: "send ids or slugs"})
	}
	return errs
}

// setTaskStatus serves PATCH /v2/tasks/status: set tasks' review status.
func (s *Server) setTaskStatus(ctx context.Context, in *statusInput) (*moveOutput, error) {
	b := in.Body
	inputs := append(uuidStrings(b.IDs), b.Slugs...)
	res, err := s.store.SetTaskStatus(ctx, callerFrom(ctx), inputs, b.TasksetID, b.Status, b.Clear)
	if err != nil {
		return nil, storeError(err, "task")
	}
	return &moveOutput{Body: moveResult(res)}, nil
}

type stageInput struct {
	Body struct {
		IDs   []uuid.UUID `json:"ids" minItems:"1" maxItems:"10000"`
		Stage string      `json:"stage" minLength:"1" maxLength:"100" doc:"The next stage (advance) or an earlier one (send back)"`
	}
}

// moveTaskStage serves PATCH /v2/tasks/stage: move tasks between stages.
func (s *Server) moveTaskStage(ctx context.Context, in *stageInput) (*moveOutput, error) {
	res, err := s.store.MoveTaskStage(ctx, callerFrom(ctx), uuidStrings(in.Body.IDs), in.Body.Stage)
	if err != nil {
		return nil, storeError(err, "task")
	}
	return &moveOutput{Body: moveResult(res)}, nil
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
	tv, err := s.store.ListTaskVersions(ctx, callerFrom(ctx), in.TaskID)
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

// getTaskBrief serves GET /v2/tasks/{task_id}/brief: a task's brief.
func (s *Server) getTaskBrief(ctx context.Context, in *taskPath) (*briefOutput, error) {
	b, err := s.store.GetTaskBrief(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	ups, err := s.store.BriefAttachments(ctx, b)
	if err != nil {
		return nil, err
	}
	out := &briefOutput{}
	out.Body.Prompt, out.Body.Attachments = b.Prompt, make([]Attachment, len(ups))
	for i := range ups {
		u := &ups[i]
		a := Attachment{Name: u.Name, ContentType: u.ContentType, Error: u.Error, Size: u.SizeBytes, Status: u.Status, StorageURL: u.Locator()}
		if u.Status == models.UploadStaged && s.bucket != nil {
			if a.URL, err = s.bucket.SignedURL(ctx, u.ObjectKey, http.MethodGet, downloadURLTTL); err != nil {
				return nil, err
			}
		}
		out.Body.Attachments[i] = a
	}
	return out, nil
}

// maxBriefZipAttachments bounds the attachment bytes a brief's zip carries (it is built in memory).
const maxBriefZipAttachments = 256 << 20

// downloadTaskBrief serves GET /v2/tasks/{task_id}/brief/download: download a task's brief.
func (s *Server) downloadTaskBrief(ctx context.Context, in *taskPath) (*briefDownloadOutput, error) {
	b, err := s.store.GetTaskBrief(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	ups, err := s.store.BriefAttachments(ctx, b)
	if err != nil {
		return nil, err
	}
	var staged []models.StagedFile
	var total int64
	for _, u := range ups {
		if u.Status == models.UploadStaged {
			staged = append(staged, u)
			total += u.SizeBytes
		}
	}
	if total > maxBriefZipAttachments {
		return nil, newAPIError(http.StatusRequestEntityTooLarge, fmt.Sprintf("the brief's attachments take %d bytes, more than a zip carries (%d): download them from the brief's URLs", total, maxBriefZipAttachments))
	}
	zipped, err := s.briefZip(ctx, b, staged)
	if err != nil {
		return nil, err
	}
	return &briefDownloadOutput{
		ContentType:        "application/zip",
		ContentDisposition: fmt.Sprintf("attachment; filename=%q", safeFilename(b.Task.Name)+"-brief.zip"),
		Body:               zipped,
	}, nil
}

type listTasksInput struct {
	TasksetID uuid.UUID `path:"taskset_id" format:"uuid"`
	Limit     int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset    int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// listTasksetTasks serves GET /v2/tasksets/{taskset_id}/tasks: list a taskset's tasks.
func (s *Server) listTasksetTasks(ctx context.Context, in *listTasksInput) (*listTasksOutput, error) {
	rows, total, err := s.store.ListTasks(ctx, callerFrom(ctx), in.TasksetID, in.Limit, in.Offset)
	if err != nil {
		return nil, storeError(err, "taskset")
	}
	items := make([]TaskSummary, len(rows))
	for i, r := range rows {
		items[i] = TaskSummary{ID: r.ID, Name: r.Name, ExternalID: r.ExternalID, Status: r.Status, Stage: r.Stage,
			LatestVersionID: r.LatestVersionID, Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	}
	return &listTasksOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

func uuidStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// validation builds a 422 for a rule the schema cannot express.
func validation(location, msg string, value any) error {
	return newHumaError(http.StatusUnprocessableEntity, "validation failed", &huma.ErrorDetail{Location: location, Message: msg, Value: value})
}

// briefZip is a brief as a zip: prompt.md, task.json and its staged attachments under
// attachments/.
func (s *Server) briefZip(ctx context.Context, b *models.TaskBrief, attachments []models.StagedFile) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	task, err := json.MarshalIndent(ExportedTask{
		Name: b.Version.Name, ExternalID: deref(b.Task.ExternalID), Description: b.Version.Description, Env: b.Version.Env,
		Scenario: b.Version.Scenario, Args: nonNilMap(b.Version.Args), Prompt: b.Version.Prompt, SystemPrompt: b.Version.SystemPrompt,
		AgentConfig: b.Version.AgentConfig, RuntimeConfig: b.Version.RuntimeConfig, Validation: nonNilSlice(b.Version.Validation),
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{"prompt.md", []byte(b.Prompt)}, {"task.json", task}} {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: b.Version.CreatedAt})
		if err != nil {
			return nil, err
		}
		if _, err := w.Write(f.data); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, u := range attachments {
		name := u.Name
		if seen[name] { // two files of one name: the later ones carry their upload id
			name = u.ID.String() + "-" + name
		}
		seen[name] = true
		w, err := zw.CreateHeader(&zip.FileHeader{Name: "attachments/" + name, Method: zip.Deflate, Modified: u.CreatedAt})
		if err != nil {
			return nil, err
		}
		r, err := s.bucket.Get(ctx, u.ObjectKey)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// safeFilename keeps a name usable in Content-Disposition and on every file system.
func safeFilename(name string) string {
	out := strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
	if out == "" {
		out = "task"
	}
	return out
}

// ReadyCheckItem is one requirement and how the task fares against it.
type ReadyCheckItem struct {
	Key               string      `json:"key" enum:"graded_traces,min_accuracy,max_accuracy,models,errors,qa_reference_solves,qa_stage_passed"`
	Label             string      `json:"label"`
	Passed            bool        `json:"passed"`
	Required          string      `json:"required"`
	Current           string      `json:"current"`
	HowToFix          string      `json:"how_to_fix"`
	OffendingTraceIDs []uuid.UUID `json:"offending_trace_ids" nullable:"false"`
	Severity          string      `json:"severity" enum:"error,warning"`
}

// ReadyCheck is a task against its taskset's submission requirements (spec: Ready-check result).
// Without requirements the result is the not-configured one: has_requirements false, passed true,
// no checks.
type ReadyCheck struct {
	Passed              bool             `json:"passed" doc:"Every check of severity error passed"`
	K                   int              `json:"k" doc:"Graded traces required"`
	CandidateCount      int              `json:"candidate_count" doc:"Graded, valid traces of the task's latest version"`
	EvaluatedAt         time.Time        `json:"evaluated_at"`
	CanOverride         bool             `json:"can_override" doc:"The caller may set the status regardless (the check never blocks)"`
	Checks              []ReadyCheckItem `json:"checks" nullable:"false"`
	EvaluatedTraceIDs   []uuid.UUID      `json:"evaluated_trace_ids" nullable:"false"`
	HasRequirements     bool             `json:"has_requirements"`
	RequirementsVersion int              `json:"requirements_version"`
}

type readyCheckOutput struct{ Body ReadyCheck }

func (s *Server) registerReadyCheck() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-task-ready-check", Method: http.MethodGet, Path: "/tasks/{task_id}/ready-check", Tags: []string{"Tasks"},
		Summary: "Check a task against its taskset's requirements",
		Description: "Evaluates the taskset's submission requirements (graded traces, accuracy bounds, required models, QA checks) against the graded " +
			"traces of the task's latest version. Informational only. Without requirements: the not-configured result (has_requirements false). " +
			"QA checks are checks of the task itself, each a check of its own when the taskset requires it: qa_reference_solves, the reference " +
			"solution (the latest version's validation calls, replayed by the oracle model) earns reward 1 in every graded oracle attempt, with at " +
			"least one and none ended in error; qa_stage_passed, the task has been through a given stage of the taskset's review stages (it has " +
			"advanced past it, or left pending). Operators set requirements with `proctor admin taskset requirements`.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTaskReadyCheck)
}

// getTaskReadyCheck serves GET /v2/tasks/{task_id}/ready-check: check a task against its taskset's requirements.
func (s *Server) getTaskReadyCheck(ctx context.Context, in *taskPath) (*readyCheckOutput, error) {
	rc, err := s.store.CheckTaskReady(ctx, callerFrom(ctx), in.TaskID)
	if err != nil {
		return nil, storeError(err, "task")
	}
	out := ReadyCheck{Passed: rc.Passed, K: rc.K, CandidateCount: rc.CandidateCount, EvaluatedAt: rc.EvaluatedAt, CanOverride: rc.CanOverride,
		Checks: []ReadyCheckItem{}, EvaluatedTraceIDs: rc.EvaluatedTraceIDs, HasRequirements: rc.HasRequirements, RequirementsVersion: rc.RequirementsVersion}
	for _, c := range rc.Checks {
		out.Checks = append(out.Checks, ReadyCheckItem{Key: c.Key, Label: c.Label, Passed: c.Passed, Required: c.Required, Current: c.Current,
			HowToFix: c.HowToFix, OffendingTraceIDs: c.OffendingTraceIDs, Severity: c.Severity})
	}
	return &readyCheckOutput{Body: out}, nil
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
