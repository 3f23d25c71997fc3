package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Job is one batch run. Its status is derived from its traces as they finish.
type Job struct {
	bun.BaseModel `bun:"table:jobs,alias:j"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	CreatedBy     *uuid.UUID `bun:"created_by,type:uuid"`
	// APIKeyID is the key that launched the job (nil when a session did).
	APIKeyID      *uuid.UUID `bun:"api_key_id,type:uuid"`
	TasksetID     *uuid.UUID `bun:"taskset_id,type:uuid"`
	Name          string     `bun:"name"`
	Description   string     `bun:"description"`
	Status        string     `bun:"status"`
	MaxSteps      int        `bun:"max_steps"`
	GroupSize     int        `bun:"group_size"`
	MaxConcurrent int        `bun:"max_concurrent"`
	IsRemote      bool       `bun:"is_remote"`
	// Kind is how it was launched: JobSingle, JobRemote or JobBatch.
	Kind        string      `bun:"kind,nullzero,notnull,default:'batch'"`
	Metadata    JobMetadata `bun:"metadata"`
	PublishedAt *time.Time  `bun:"published_at"`
	CreatedAt   time.Time   `bun:"created_at"`
	UpdatedAt   time.Time   `bun:"updated_at"`
	// FinishSeq is the last number given to one of its ended attempts (see rollouts.Store.FinishedAttempts);
	// only that numbering writes it.
	FinishSeq int64 `bun:"finish_seq,scanonly"`
	// MaxCostUSD is the job's ceiling on its spend (run_list's max_cost_usd); nil for none. See
	// billing.Store.AdmitJob.
	MaxCostUSD *float64 `bun:"max_cost_usd"`
	// SpentInferenceUSD and SpentEnvironmentUSD are the running sums of its attempts' model calls
	// and of its ended instances; only billing.Store.RecordInference and an instance's end add to them.
	SpentInferenceUSD   float64 `bun:"spent_inference_usd,scanonly"`
	SpentEnvironmentUSD float64 `bun:"spent_environment_usd,scanonly"`
}

// JobMetadata is what a job records of how it was launched (spec: Job › metadata), one record
// for the column and the API.
type JobMetadata struct {
	// ParentJobID is the job this one follows up (run_list's parent_job_id: a re-run of it, or
	// of some of its attempts); nil for a job launched on its own.
	ParentJobID *uuid.UUID `json:"parent_job_id" doc:"The job this one follows up (a re-run of it or of some of its attempts), as run_list's parent_job_id named it; null for a job launched on its own"`
	// ResolvedAgents are the models the job runs, as its launch resolved them.
	ResolvedAgents []ResolvedAgent `json:"resolved_agents" nullable:"false" doc:"The models the job runs, as its launch resolved them"`
	// SDKAgentParams is the agent an SDK submitted (POST /v2/rollouts/submit); nil otherwise.
	SDKAgentParams *SDKAgentParams `json:"sdk_agent_params,omitempty" doc:"The agent an SDK submitted (rollouts/submit)"`
	// TimeoutMultiplier scales the job's attempts' time (run_list's timeout_multiplier); 0 is 1.
	TimeoutMultiplier float64 `json:"timeout_multiplier,omitempty" doc:"Proctor extension: what run_list's timeout_multiplier scaled the attempts' run and startup timeouts and a Harbor task's verifier and healthcheck by; absent: 1"`
}

// ResolvedAgent names a model a job runs.
type ResolvedAgent struct {
	ModelID   uuid.UUID `json:"model_id"`
	ModelName string    `json:"model_name"`
	Name      string    `json:"name"`
	Provider  string    `json:"provider"`
	Adapter   string    `json:"adapter"`
}

// SDKAgentParams are the agent of a submitted attempt as the SDK gave it: the model it named and
// the agent config merged over the task's.
type SDKAgentParams struct {
	Type   string       `json:"type" doc:"The model_name or model id the SDK named"`
	Config *AgentConfig `json:"config,omitempty"`
}

// Listed is m with its lists present (empty rather than null), as the API shows it.
func (m JobMetadata) Listed() JobMetadata {
	m.ResolvedAgents = NonNil(m.ResolvedAgents)
	return m
}

// Job statuses.
const (
	JobPending   = "pending"
	JobRunning   = "running"
	JobCompleted = "completed"
	JobCancelled = "cancelled"
	// JobPaused is a run_list job whose spend reached its max_cost_usd: it starts no attempt until
	// its ceiling is raised or lifted (billing.Store.SetJobCeiling), then goes on where it stopped.
	JobPaused = "paused"
)

// Job kinds: how a job was launched.
const (
	JobSingle = "single" // POST /v2/rollouts/run
	JobRemote = "remote" // POST /v2/rollouts/submit
	JobBatch  = "batch"  // POST /v2/rollouts/run_list
)

// IsRunList reports whether a RunList workflow drives the job (a single-run job, from
// rollouts/run or rollouts/submit, completes when its last trace ends).
func (j *Job) IsRunList() bool { return j.Kind == JobBatch }

// LauncherOrOwner reports whether the caller launched a job (createdBy) or is an owner: who may
// decide what more it runs and spends (its retries, its ceiling), which run as its launcher.
func (c *Caller) LauncherOrOwner(createdBy *uuid.UUID) bool {
	return c.Role == RoleOwner || createdBy != nil && *createdBy == c.UserID
}
