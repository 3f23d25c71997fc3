package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// ModelCallTokens is what the upstream of a training policy (LLMModel.TrainingPolicy) returned of
// one model call's tokens, kept beside the trace, out of the event stream and workflow history;
// the assistant event of the call names it (AssistantEventData.TokensRef is CallID). Each field
// holds the JSON text of the upstream's own value, verbatim (a text column, which nothing
// re-encodes), or is empty where it returned none.
type ModelCallTokens struct {
	bun.BaseModel      `bun:"table:model_call_tokens"`
	TraceID            uuid.UUID `bun:"trace_id,pk,type:uuid"`
	CallID             uuid.UUID `bun:"call_id,pk,type:uuid"`
	PromptTokenIDs     string    `bun:"prompt_token_ids,nullzero"`
	CompletionTokenIDs string    `bun:"completion_token_ids,nullzero"`
	Logprobs           string    `bun:"logprobs,nullzero"`
	// Sampling is the sampling parameters the request carried, as a JSON object.
	Sampling  string    `bun:"sampling"`
	CreatedAt time.Time `bun:"created_at"`
}

// RecordModelCallTokens keeps a call's tokens, before its assistant event (which names them) is
// written. A call whose event is never written (a step retried, two writers at one place) leaves
// a row that no event names, which nothing reads: tokens are never paired with another call's
// answer.
func (s *Store) RecordModelCallTokens(ctx context.Context, t ModelCallTokens) error {
	t.CreatedAt = Now()
	if _, err := s.DB.NewInsert().Model(&t).Exec(ctx); err != nil {
		return fmt.Errorf("record the tokens of a call of trace %s: %w", t.TraceID, err)
	}
	return nil
}

// ModelCallTokensOf reads the tokens kept for the named calls of a trace, by call id.
func (s *Store) ModelCallTokensOf(ctx context.Context, traceID uuid.UUID, callIDs []uuid.UUID) (map[uuid.UUID]ModelCallTokens, error) {
	out := map[uuid.UUID]ModelCallTokens{}
	if len(callIDs) == 0 {
		return out, nil
	}
	var rows []ModelCallTokens
	if err := s.DB.NewSelect().Model(&rows).Where("trace_id = ? AND call_id IN (?)", traceID, bun.In(callIDs)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("model call tokens of trace %s: %w", traceID, err)
	}
	for _, r := range rows {
		out[r.CallID] = r
	}
	return out, nil
}
