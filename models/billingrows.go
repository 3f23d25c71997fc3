package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// BudgetRow is the part of a job's row its budget reads (its running sums are scan-only fields
// of Job, which a plain select leaves out).
type BudgetRow struct {
	bun.BaseModel       `bun:"table:jobs,alias:j"`
	ID                  uuid.UUID  `bun:"id,type:uuid"`
	Status              string     `bun:"status"`
	Kind                string     `bun:"kind"`
	TeamID              uuid.UUID  `bun:"team_id,type:uuid"`
	CreatedBy           *uuid.UUID `bun:"created_by,type:uuid"`
	MaxCostUSD          *float64   `bun:"max_cost_usd"`
	SpentInferenceUSD   float64    `bun:"spent_inference_usd"`
	SpentEnvironmentUSD float64    `bun:"spent_environment_usd"`
}

// InferenceLog is one model call through the inference gateway.
type InferenceLog struct {
	bun.BaseModel    `bun:"table:inference_logs,alias:il"`
	ID               uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID           uuid.UUID  `bun:"team_id,type:uuid"`
	ModelID          uuid.UUID  `bun:"model_id,type:uuid"`
	Route            string     `bun:"route"`
	Status           string     `bun:"status"` // ok or error
	ErrorCode        string     `bun:"error_code"`
	PromptTokens     int        `bun:"prompt_tokens"`
	CompletionTokens int        `bun:"completion_tokens"`
	TotalTokens      int        `bun:"total_tokens"`
	Cost             float64    `bun:"cost"`
	DurationMS       int        `bun:"duration_ms"`
	Streaming        bool       `bun:"streaming"`
	TraceID          *uuid.UUID `bun:"trace_id,type:uuid"`
	UserID           *uuid.UUID `bun:"user_id,type:uuid"`
	APIKeyID         *uuid.UUID `bun:"api_key_id,type:uuid"`
	BYOK             bool       `bun:"byok"`
	ByokCredentialID *uuid.UUID `bun:"byok_credential_id,type:uuid"`
	// CheckpointID is the checkpoint that answered (a fork's head), if any.
	CheckpointID *uuid.UUID `bun:"checkpoint_id,type:uuid"`
	CreatedAt    time.Time  `bun:"created_at"`
}

// InferenceDaily is one day of a team's calls with the same dimensions (absent ids are "").
type InferenceDaily struct {
	bun.BaseModel    `bun:"table:inference_daily,alias:inference_daily"`
	TeamID           uuid.UUID `bun:"team_id,pk,type:uuid"`
	Day              string    `bun:"day,pk"` // YYYY-MM-DD, UTC
	ModelID          string    `bun:"model_id,pk"`
	UserID           string    `bun:"user_id,pk"`
	APIKeyID         string    `bun:"api_key_id,pk"`
	ByokCredential   string    `bun:"byok_credential,pk"`
	BYOK             bool      `bun:"byok,pk"`
	Route            string    `bun:"route,pk"`
	Requests         int64     `bun:"requests"`
	Cost             float64   `bun:"cost"`
	PromptTokens     int64     `bun:"prompt_tokens"`
	CompletionTokens int64     `bun:"completion_tokens"`
}

// SpendingLimit is a ceiling in USD per week or month for one API key or one member.
type SpendingLimit struct {
	bun.BaseModel    `bun:"table:spending_limits,alias:sl"`
	ID               uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID           uuid.UUID  `bun:"team_id,type:uuid"`
	APIKeyID         *uuid.UUID `bun:"api_key_id,type:uuid"`
	MembershipID     *int64     `bun:"membership_id"`
	ParentLimitID    *uuid.UUID `bun:"parent_limit_id,type:uuid"`
	ThresholdPercent float64    `bun:"threshold_percent"`
	Interval         string     `bun:"period"`
	AmountUSD        float64    `bun:"amount_usd"`
	Action           string     `bun:"action"`
	Enabled          bool       `bun:"enabled"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

// Reached says whether spend has reached the limit's threshold.
func (l *SpendingLimit) Reached(spend float64) bool {
	return spend >= l.AmountUSD*l.ThresholdPercent/100
}

// LimitAlert is the alert of one alert limit for one period.
type LimitAlert struct {
	bun.BaseModel `bun:"table:limit_alerts,alias:la"`
	LimitID       uuid.UUID  `bun:"limit_id,pk,type:uuid"`
	PeriodStart   time.Time  `bun:"period_start,pk"`
	Recipient     string     `bun:"recipient"`
	SpendUSD      float64    `bun:"spend_usd"`
	CreatedAt     time.Time  `bun:"created_at"`
	SentAt        *time.Time `bun:"sent_at"`
	// Limit is the alert's limit, for the mail.
	Limit *SpendingLimit `bun:"-"`
}
