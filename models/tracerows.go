package models

import (
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Instance statuses.
const (
	InstanceRunning    = "running"
	InstanceTerminated = "terminated"
)

// Instance is one sandbox an attempt's try ran in: its resources, the hourly rate it was priced
// at when it started, and, once it has ended, its duration and cost.
type Instance struct {
	bun.BaseModel `bun:"table:instances,alias:inst"`
	ID            uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID  `bun:"team_id,type:uuid"`
	TraceID       uuid.UUID  `bun:"trace_id,type:uuid"`
	Attempt       int        `bun:"attempt"`
	JobID         uuid.UUID  `bun:"job_id,type:uuid"`
	RegistryID    *uuid.UUID `bun:"registry_id,type:uuid"`
	BuildID       *uuid.UUID `bun:"build_id,type:uuid"`
	UserID        *uuid.UUID `bun:"user_id,type:uuid"`
	APIKeyID      *uuid.UUID `bun:"api_key_id,type:uuid"`
	HostQueue     string     `bun:"host_queue"`
	SandboxID     string     `bun:"sandbox_id"`
	// SandboxProvider is the provider that ran the sandbox (process, container, kubernetes);
	// empty for instances recorded before it was kept.
	SandboxProvider string         `bun:"sandbox_provider"`
	CPU             float64        `bun:"cpu"`
	MemoryMB        int            `bun:"memory_mb"`
	GPUCount        int            `bun:"gpu_count"`
	GPUType         string         `bun:"gpu_type"`
	Limits          *RuntimeLimits `bun:"limits"`
	HourlyRate      float64        `bun:"hourly_rate"`
	BaselineMinutes float64        `bun:"baseline_minutes"`
	Status          string         `bun:"status"`
	StopReason      string         `bun:"stop_reason"`
	DurationSeconds float64        `bun:"duration_seconds"`
	Cost            float64        `bun:"cost"`
	CreatedAt       time.Time      `bun:"created_at"`
	TerminatedAt    *time.Time     `bun:"terminated_at"`
}

// Usage is the instance's running time in minutes and its cost up to at (its end, once it has
// ended): the hourly rate over the time it ran, and never less than its baseline minutes.
func (i *Instance) Usage(at time.Time) (minutes, cost float64) {
	if i.Status != InstanceRunning {
		return i.DurationSeconds / 60, i.Cost
	}
	minutes = math.Max(0, at.Sub(i.CreatedAt).Minutes())
	return minutes, RoundUSD(i.HourlyRate * math.Max(minutes, i.BaselineMinutes) / 60)
}

// Trace is the record of one attempt.
type Trace struct {
	bun.BaseModel    `bun:"table:traces,alias:tr"`
	ID               uuid.UUID         `bun:"id,pk,type:uuid"`
	TeamID           uuid.UUID         `bun:"team_id,type:uuid"`
	JobID            uuid.UUID         `bun:"job_id,type:uuid"`
	TaskID           *uuid.UUID        `bun:"task_id,type:uuid"`
	TaskVersionID    *uuid.UUID        `bun:"task_version_id,type:uuid"`
	ModelID          *uuid.UUID        `bun:"model_id,type:uuid"`
	GroupID          string            `bun:"group_id"`
	Name             string            `bun:"name"`
	Description      string            `bun:"description"`
	Status           string            `bun:"status"`
	StopReason       string            `bun:"stop_reason"`
	Error            string            `bun:"error"`
	Reward           *float64          `bun:"reward"`
	EvaluationResult *EvaluationResult `bun:"evaluation_result"`
	Metadata         map[string]any    `bun:"metadata"`
	RuntimeConfig    RuntimeConfig     `bun:"runtime_config"`
	// ScenarioArgs and AgentConfig are set when the launch overrode the task version's (merged
	// over them); nil runs the version's own.
	ScenarioArgs map[string]any `bun:"scenario_args"`
	AgentConfig  *AgentConfig   `bun:"agent_config"`
	// AgentBuildID is the brought agent's build the attempt runs (see registry.Store.ResolveAgent); nil runs
	// the built-in agent loop.
	AgentBuildID *uuid.UUID `bun:"agent_build_id,type:uuid"`
	MaxSteps     int        `bun:"max_steps"`
	IsValid      bool       `bun:"is_valid"`
	Attempt      int        `bun:"attempt"`
	InstanceID   *uuid.UUID `bun:"instance_id,type:uuid"`
	StartTime    *time.Time `bun:"start_time"`
	EndTime      *time.Time `bun:"end_time"`
	CreatedAt    time.Time  `bun:"created_at"`
	UpdatedAt    time.Time  `bun:"updated_at"`
	// InfraFailure marks an attempt that ended in error because the infrastructure failed it
	// (no host took it, its sandbox was lost on every try), not the agent or the environment.
	InfraFailure bool `bun:"infra_failure"`
	// RetryOf is the failed attempt of the job this one runs again (rollouts.Store.RetryJob); nil for one
	// launched as itself.
	RetryOf *uuid.UUID `bun:"retry_of,type:uuid"`
	// ReplayOf is the attempt whose recorded model answers this one replays (a replay check's,
	// run by the replay model); nil for any other.
	ReplayOf *uuid.UUID `bun:"replay_of,type:uuid"`
	// FinishSeq is the attempt's number in its job's sequence of ended attempts (see
	// rollouts.Store.FinishedAttempts), nil until it is numbered; only that numbering writes it.
	FinishSeq *int64 `bun:"finish_seq,scanonly"`
}

// Trace statuses and stop reasons.
const (
	TracePending      = "pending"
	TraceInitializing = "initializing"
	TraceRunning      = "running"
	TraceCompleted    = "completed"
	TraceError        = "error"
	TraceCancelling   = "cancelling"
	TraceCancelled    = "cancelled"

	StopDone      = "done"
	StopMaxSteps  = "max_steps"
	StopTimeout   = "timeout"
	StopCancelled = "cancelled"
	StopError     = "error"
	// StopBudget ends an attempt at a model call its job's max_cost_usd refused: it is cancelled,
	// never scored, and retried by default (rollouts.Store.RetryJob).
	StopBudget = "budget"
)

// LaunchEnvError is a launch environment whose values do not open (a secret sealed under
// another key, or no key to open it with): the try cannot start with it, however often it is
// retried. A failure to read it is an error of the store, and is not one.
type LaunchEnvError struct{ Err error }

func (e *LaunchEnvError) Error() string { return e.Err.Error() }

func (e *LaunchEnvError) Unwrap() error { return e.Err }

// WorkerQueue is one task queue a worker process polls: a worker announces its queues at start
// and every rollouts.WorkerAnnounceEvery, and retires them when it stops.
type WorkerQueue struct {
	bun.BaseModel `bun:"table:worker_queues,alias:wq"`
	// Worker names the process (hostname/pid/random); Queue the task queue it polls.
	Worker string `bun:"worker,pk"`
	Queue  string `bun:"queue,pk"`
	// Hostname is the host the process runs on.
	Hostname string `bun:"hostname"`
	// SandboxCapacity is how many sandboxes the process runs at once for this queue (0 for the
	// workflow and build queues).
	SandboxCapacity int       `bun:"sandbox_capacity"`
	GPUs            int       `bun:"gpus"`
	GPUType         string    `bun:"gpu_type"`
	StartedAt       time.Time `bun:"started_at"`
	LastSeenAt      time.Time `bun:"last_seen_at"`
}

// RoundUSD rounds an amount of US dollars to a millionth, the precision costs are kept at.
func RoundUSD(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// LastBuildExpr is the build the last try of the trace aliased tr ran on (NULL before any
// sandbox started), and LastBuildDigestExpr that build's digest ("" without one), in SQL.
const (
	LastBuildExpr       = "(SELECT inst.build_id FROM instances AS inst WHERE inst.trace_id = tr.id ORDER BY inst.attempt DESC, inst.created_at DESC LIMIT 1)"
	LastBuildDigestExpr = "COALESCE((SELECT b.digest FROM builds AS b WHERE b.id = " + LastBuildExpr + "), '')"
)
