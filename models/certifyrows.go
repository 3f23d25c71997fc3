package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Certification statuses: running while its job runs; then passed (no task flagged), flagged
// (some task is), or failed (its job was cancelled before every attempt ended).
const (
	CertificationRunning = "running"
	CertificationPassed  = "passed"
	CertificationFlagged = "flagged"
	CertificationFailed  = "failed"
)

// Certification is a certification of an environment build (a Proctor extension): every task of
// a taskset that runs the build's environment, replayed on that very build by the oracle K times
// and once each by an agent that does nothing and one that acts at random, as one job (JobID);
// Tasks are the figures once it ended.
type Certification struct {
	bun.BaseModel `bun:"table:build_certifications,alias:cert"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	BuildID       uuid.UUID `bun:"build_id,type:uuid"`
	// BuildDigest is the digest of the build's image, which every attempt ran.
	BuildDigest string          `bun:"build_digest"`
	JobID       uuid.UUID       `bun:"job_id,type:uuid"`
	TasksetID   *uuid.UUID      `bun:"taskset_id,type:uuid"`
	K           int             `bun:"k"`
	Status      string          `bun:"status"`
	Tasks       []CertifiedTask `bun:"tasks"`
	// Startup is how long its attempts' environments took to start (the first try of each);
	// StartupByProvider splits it by the sandbox provider that ran them.
	Startup           Startup           `bun:"embed:startup_"`
	StartupByProvider []ProviderStartup `bun:"startup_by_provider"`
	CreatedAt         time.Time         `bun:"created_at"`
	FinishedAt        *time.Time        `bun:"finished_at"`
}

// Startup is how long environments took from a try's start (the sandbox asked for) to answering
// MCP (their tools listed), over Samples attempts; nil percentiles when there were none.
type Startup struct {
	Samples int      `bun:"samples" json:"samples"`
	P50MS   *float64 `bun:"p50_ms" json:"p50_ms"`
	P99MS   *float64 `bun:"p99_ms" json:"p99_ms"`
}

// ProviderStartup is Startup over the attempts one sandbox provider ran ("" for instances
// recorded before the provider was kept).
type ProviderStartup struct {
	Provider string `json:"provider"`
	Startup
}

// CertifiedTask is how one task did in a certification.
type CertifiedTask struct {
	TaskVersionID uuid.UUID `json:"task_version_id"`
	TaskName      string    `json:"task_name"`
	// OracleRuns counts the oracle's attempts that were scored, OraclePasses those at full
	// reward.
	OracleRuns   int `json:"oracle_runs"`
	OraclePasses int `json:"oracle_passes"`
	// IdleReward is the reward of the attempt that did nothing, RandomReward of the one that
	// acted at random (nil when it was not scored).
	IdleReward   *float64 `json:"idle_reward"`
	RandomReward *float64 `json:"random_reward"`
	// Tamper is what the tamper probe tried (its calls of the hidden dispatchers) and how it
	// ended; nil when its attempt was not scored.
	Tamper *TamperProbe `json:"tamper"`
	Flags  []string     `json:"flags" nullable:"false"`
}

// TamperProbe is what a certification's tamper probe tried on one task.
type TamperProbe struct {
	// Tried are the hidden dispatchers it called, Refused those refused to it.
	Tried   []string `json:"tried" nullable:"false"`
	Refused []string `json:"refused" nullable:"false"`
	// Claimed are the visible tools it called to claim success: those that write what a grader
	// might read (a score, a verdict, a result), called with arguments that say it passed
	// (agent.ClaimCalls). Its reward says whether a claim scored.
	Claimed []string `json:"claimed" nullable:"false"`
	Reward  float64  `json:"reward"`
}

// ReplayCheck is a regression replay of an environment build against a finished job (a Proctor
// extension): every scored attempt of that job whose task runs the build's environment is run
// again on the build, its model's recorded answers replayed in order by the replay model, as
// one job (JobID); Attempts compare each replay with what it replays once the job ended.
type ReplayCheck struct {
	bun.BaseModel `bun:"table:build_replay_checks,alias:chk"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	TeamID        uuid.UUID `bun:"team_id,type:uuid"`
	BuildID       uuid.UUID `bun:"build_id,type:uuid"`
	// BuildDigest is the digest of the build's image, which every replay ran.
	BuildDigest  string            `bun:"build_digest"`
	AgainstJobID uuid.UUID         `bun:"against_job_id,type:uuid"`
	JobID        uuid.UUID         `bun:"job_id,type:uuid"`
	Status       string            `bun:"status"`
	Attempts     []ReplayedAttempt `bun:"attempts"`
	NotReplayed  []NotReplayed     `bun:"not_replayed"`
	CreatedAt    time.Time         `bun:"created_at"`
	FinishedAt   *time.Time        `bun:"finished_at"`
}

// ReplayedAttempt compares one attempt with its replay on the checked build.
type ReplayedAttempt struct {
	TaskVersionID uuid.UUID `json:"task_version_id"`
	TaskName      string    `json:"task_name"`
	// SourceTraceID is the attempt replayed, ReplayTraceID its replay.
	SourceTraceID uuid.UUID `json:"source_trace_id"`
	ReplayTraceID uuid.UUID `json:"replay_trace_id"`
	RewardBefore  *float64  `json:"reward_before"`
	RewardAfter   *float64  `json:"reward_after"`
	// FirstDivergingStep is the first model step (as the traces number them, from 0) at which
	// a tool result of the replay differs from the recorded one, or is missing from either;
	// nil when none does.
	FirstDivergingStep *int `json:"first_diverging_step"`
	// Outcome is same, changed_reward, diverged or unfinished.
	Outcome string `json:"outcome" enum:"same,changed_reward,diverged,unfinished"`
}

// NotReplayed is an attempt of the job checked against that the check left out, and why:
// not_scored (it ended without a reward), other_environment (its task runs another environment
// than the build's), brought_agent (a brought agent ran it: its model calls are not a
// conversation the replay model can answer).
type NotReplayed struct {
	TraceID  uuid.UUID `json:"trace_id"`
	TaskName string    `json:"task_name"`
	Reason   string    `json:"reason" enum:"not_scored,other_environment,brought_agent"`
}
