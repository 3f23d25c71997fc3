package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Inference routes: what a model call was made for.
const (
	RouteAgent       = "agent"       // a model step of an attempt
	RouteCompletions = "completions" // POST /v2/completions
)

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
	CreatedAt        time.Time  `bun:"created_at"`
}

// RecordInference writes one model call's row.
func (s *Store) RecordInference(ctx context.Context, l *InferenceLog) error {
	if l.ID == uuid.Nil {
		l.ID = uuid.New()
	}
	if l.CreatedAt.IsZero() {
		l.CreatedAt = now()
	}
	if _, err := s.DB.NewInsert().Model(l).Exec(ctx); err != nil {
		return fmt.Errorf("record inference: %w", err)
	}
	return nil
}

// ModelLogs pages, newest first, the caller's team's calls of a model the caller can see.
func (s *Store) ModelLogs(ctx context.Context, c *Caller, modelID uuid.UUID, limit, offset int) ([]InferenceLog, int, error) {
	var m LLMModel
	if err := visibleModels(s.DB.NewSelect().Model(&m), c).Where("m.id = ?", modelID).Scan(ctx); err != nil {
		return nil, 0, notFound(err, "model")
	}
	var logs []InferenceLog
	total, err := s.DB.NewSelect().Model(&logs).Where("model_id = ? AND team_id = ?", modelID, c.TeamID).
		OrderExpr("created_at DESC, id DESC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("model logs: %w", err)
	}
	return logs, int(total), nil
}
