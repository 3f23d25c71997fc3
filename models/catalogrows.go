package models

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
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

// Requirements are a taskset's submission requirements: what a task's graded traces must show
// before it is ready for review. The spec has no route that sets them; operators set them with
// `proctor admin taskset requirements`.
type Requirements struct {
	// MinTraces is k: the graded (completed, valid) traces of the task's latest version needed.
	MinTraces int `json:"min_traces"`
	// MinAccuracy and MaxAccuracy bound the mean reward of those traces: a task nobody solves is
	// broken, one everybody solves is too easy.
	MinAccuracy *float64 `json:"min_accuracy,omitempty"`
	MaxAccuracy *float64 `json:"max_accuracy,omitempty"`
	// Models must each have at least one graded trace (model_name values).
	Models []string `json:"models,omitempty"`
	// QAChecks are the spec's "QA checks": quality checks of the task itself, beyond what its
	// graded traces score. Each kind appears at most once.
	QAChecks []QACheck `json:"qa_checks,omitempty"`
}

// QACheck is one QA check a taskset requires of its tasks.
type QACheck struct {
	// Kind is QAReferenceSolves or QAStagePassed.
	Kind string `json:"kind"`
	// Stage is the review stage a QAStagePassed check requires the task to be past: one of the
	// taskset's stages.
	Stage string `json:"stage,omitempty"`
}

// QA check kinds.
const (
	// QAReferenceSolves: the task's reference solution earns full reward. The reference
	// solution is the latest version's validation calls, which the oracle model replays; the
	// check needs at least one graded oracle attempt of that version, each at reward 1, and no
	// oracle attempt ended in error.
	QAReferenceSolves = "reference_solves"
	// QAStagePassed: the task has been through a stage of the taskset's review checklist (its
	// stages, such as write, QA, polish): it has advanced past the stage, or left pending (a task
	// is marked ready only at the last stage, and reviewed only after that).
	QAStagePassed = "stage_passed"
)

// Check lists what is wrong with r for a taskset whose review stages are stages.
func (r *Requirements) Check(stages []string) ValidationError {
	var errs ValidationError
	bad := func(loc, msg string, v any) { errs = append(errs, FieldError{Location: loc, Message: msg, Value: v}) }
	if r.MinTraces < 0 {
		bad("min_traces", "must be 0 or more", r.MinTraces)
	}
	for loc, v := range map[string]*float64{"min_accuracy": r.MinAccuracy, "max_accuracy": r.MaxAccuracy} {
		if v != nil && (*v < 0 || *v > 1) {
			bad(loc, "a mean reward: from 0 to 1", *v)
		}
	}
	if r.MinAccuracy != nil && r.MaxAccuracy != nil && *r.MinAccuracy > *r.MaxAccuracy {
		bad("max_accuracy", "is below min_accuracy: no task could pass both", *r.MaxAccuracy)
	}
	seen := map[string]bool{}
	for i, q := range r.QAChecks {
		loc := fmt.Sprintf("qa_checks[%d]", i)
		switch {
		case q.Kind != QAReferenceSolves && q.Kind != QAStagePassed:
			bad(loc+".kind", "must be "+QAReferenceSolves+" or "+QAStagePassed, q.Kind)
		case seen[q.Kind]:
			bad(loc+".kind", "each kind of QA check is listed once", q.Kind)
		case q.Kind == QAStagePassed && !slices.Contains(stages, q.Stage):
			bad(loc+".stage", fmt.Sprintf("must be one of the taskset's stages (%s)", strings.Join(stages, ", ")), q.Stage)
		case q.Kind == QAReferenceSolves && q.Stage != "":
			bad(loc+".stage", "only a "+QAStagePassed+" check names a stage", q.Stage)
		}
		seen[q.Kind] = true
	}
	return errs
}

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

// Hash fingerprints a version's content together with what it resolved to, so that an upload of
// unchanged content makes no new version.
func (tc TaskContent) Hash(registryID, scenarioID *uuid.UUID) string {
	b, _ := json.Marshal(struct {
		TaskContent
		R, S *uuid.UUID
	}{tc, registryID, scenarioID})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Task is the stable identity of one graded request in a taskset: its name, external id and review
// state. Its content lives in immutable versions.
type Task struct {
	bun.BaseModel   `bun:"table:tasks,alias:tk"`
	ID              uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID          uuid.UUID  `bun:"team_id,type:uuid"`
	TasksetID       uuid.UUID  `bun:"taskset_id,type:uuid"`
	Name            string     `bun:"name"`
	ExternalID      *string    `bun:"external_id"`
	Status          string     `bun:"status"`
	Stage           *string    `bun:"stage"`
	LatestVersionID *uuid.UUID `bun:"latest_version_id,type:uuid"`
	VersionCount    int        `bun:"version_count"`
	CreatedAt       time.Time  `bun:"created_at"`
	UpdatedAt       time.Time  `bun:"updated_at"`
}

// TaskVersion is one immutable content of a task; rollouts refer to its id.
type TaskVersion struct {
	bun.BaseModel `bun:"table:task_versions,alias:tv"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TaskID        uuid.UUID  `bun:"task_id,type:uuid"`
	TasksetID     uuid.UUID  `bun:"taskset_id,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	Version       int        `bun:"version"`
	ContentHash   string     `bun:"content_hash"`
	CreatedBy     *uuid.UUID `bun:"created_by,type:uuid"`
	CreatedAt     time.Time  `bun:"created_at"`
	RegistryID    *uuid.UUID `bun:"registry_id,type:uuid"`
	ScenarioID    *uuid.UUID `bun:"scenario_id,type:uuid"`
	TaskContent
}

// TaskContent is what a version holds: the portable fields of upload and export.
type TaskContent struct {
	Name          string           `bun:"name" json:"name"`
	Description   string           `bun:"description" json:"description,omitempty"`
	Env           string           `bun:"env" json:"env,omitempty"`
	Scenario      string           `bun:"scenario" json:"scenario,omitempty"`
	Args          map[string]any   `bun:"args" json:"args"`
	Prompt        string           `bun:"prompt" json:"prompt,omitempty"`
	SystemPrompt  string           `bun:"system_prompt" json:"system_prompt,omitempty"`
	AgentConfig   AgentConfig      `bun:"agent_config" json:"agent_config"`
	RuntimeConfig RuntimeConfig    `bun:"runtime_config" json:"runtime_config"`
	Validation    []ValidationCall `bun:"validation" json:"validation"`
	// Keywords and Metadata are a Proctor extension: words a taskset's listing searches, and
	// free-form facts about the task (a Harbor task's authors, source and [metadata]). Empty ones
	// are left out of the content's JSON, so that versions made before they existed keep their hash.
	Keywords []string       `bun:"keywords" json:"keywords,omitempty"`
	Metadata map[string]any `bun:"metadata" json:"metadata,omitempty"`
}

// Taskset is a named bundle of tasks owned by a team.
type Taskset struct {
	bun.BaseModel        `bun:"table:tasksets,alias:t"`
	ID                   uuid.UUID      `bun:"id,pk,type:uuid"`
	TeamID               uuid.UUID      `bun:"team_id,type:uuid"`
	Name                 string         `bun:"name"`
	Description          string         `bun:"description"`
	Public               bool           `bun:"public"`
	Columns              map[string]any `bun:"columns"`
	HiddenProgressStages []string       `bun:"hidden_progress_stages"`
	Stages               []string       `bun:"stages"`
	Requirements         *Requirements  `bun:"requirements"`
	RequirementsVersion  int            `bun:"requirements_version"`
	// Purpose is EVAL (an evaluation suite, the default) or TRAINING (training data).
	Purpose   string     `bun:"purpose,nullzero,notnull,default:'EVAL'"`
	CreatedBy *uuid.UUID `bun:"created_by,type:uuid"`
	CreatedAt time.Time  `bun:"created_at"`
	UpdatedAt time.Time  `bun:"updated_at"`
}

// TasksetStar records that a user starred a taskset; stars order lists and are counted.
type TasksetStar struct {
	bun.BaseModel `bun:"table:taskset_stars"`
	TasksetID     uuid.UUID `bun:"taskset_id,pk,type:uuid"`
	UserID        uuid.UUID `bun:"user_id,pk,type:uuid"`
	CreatedAt     time.Time `bun:"created_at"`
}

// TasksetShare makes a taskset visible to another team, writable when CanEdit.
type TasksetShare struct {
	bun.BaseModel `bun:"table:taskset_shares"`
	TasksetID     uuid.UUID `bun:"taskset_id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,pk,type:uuid"`
	CanEdit       bool      `bun:"can_edit"`
	CreatedAt     time.Time `bun:"created_at"`
}

// Taskset list sort keys.
const (
	SortStarred = "starred"
	SortDate    = "date"
	SortName    = "name"
	SortStars   = "stars"
	SortTasks   = "tasks"
)

// StagedFile is a file staged for the task briefs of a taskset.
type StagedFile struct {
	bun.BaseModel `bun:"table:uploads,alias:up"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	TasksetID     uuid.UUID  `bun:"taskset_id,type:uuid"`
	MembershipID  int64      `bun:"membership_id,nullzero"`
	Name          string     `bun:"name"`
	ContentType   string     `bun:"content_type"`
	SizeBytes     int64      `bun:"size_bytes"`
	SHA256        string     `bun:"sha256"`
	Mode          string     `bun:"mode"`
	PartBytes     int64      `bun:"part_bytes"`
	PartCount     int        `bun:"part_count"`
	Status        string     `bun:"status"`
	Error         string     `bun:"error"`
	ObjectKey     string     `bun:"object_key"`
	CreatedAt     time.Time  `bun:"created_at"`
	StagedAt      *time.Time `bun:"staged_at"`
}

// Locator is the upload's storage:// address, the one task content refers to it by.
func (u *StagedFile) Locator() string {
	return fmt.Sprintf("storage://uploads/%s/%s/%s", u.TasksetID, u.ID, u.Name)
}

// PartKey is where part n (1-based) of a multipart upload is stored until it is joined.
func (u *StagedFile) PartKey(n int) string { return fmt.Sprintf("%s.parts/%05d", u.ObjectKey, n) }

// PartSize is the size part n (1-based) must have.
func (u *StagedFile) PartSize(n int) int64 {
	if n < u.PartCount {
		return u.PartBytes
	}
	return u.SizeBytes - u.PartBytes*int64(u.PartCount-1)
}
