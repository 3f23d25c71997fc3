package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// ModelCallTokens is what the upstream of a training policy (LLMModel.TrainingPolicy) returned of
// one model call's tokens, kept beside the assistant event the call answered (TraceID, Seq) and out
// of the event stream and workflow history. Each field holds the JSON text of the upstream's own
// value, byte for byte (a text column, which nothing re-encodes), or is empty where it returned
// none.
type ModelCallTokens struct {
	bun.BaseModel      `bun:"table:model_call_tokens"`
	TraceID            uuid.UUID `bun:"trace_id,pk,type:uuid"`
	Seq                int       `bun:"seq,pk"`
	PromptTokenIDs     string    `bun:"prompt_token_ids,nullzero"`
	CompletionTokenIDs string    `bun:"completion_token_ids,nullzero"`
	Logprobs           string    `bun:"logprobs,nullzero"`
	// Sampling is the sampling parameters the request carried, as a JSON object.
	Sampling  string    `bun:"sampling"`
	CreatedAt time.Time `bun:"created_at"`
}

// RecordModelCallTokens keeps a call's tokens, before its assistant event is written: a call made
// again at the same place (a retried step whose event was never written) replaces them, so what
// is kept is always what the written event's call returned.
func (s *Store) RecordModelCallTokens(ctx context.Context, t ModelCallTokens) error {
	t.CreatedAt = now()
	_, err := s.DB.NewInsert().Model(&t).On("CONFLICT (trace_id, seq) DO UPDATE").
		Set("prompt_token_ids = EXCLUDED.prompt_token_ids, completion_token_ids = EXCLUDED.completion_token_ids, logprobs = EXCLUDED.logprobs, " +
			"sampling = EXCLUDED.sampling, created_at = EXCLUDED.created_at").Exec(ctx)
	if err != nil {
		return fmt.Errorf("record the tokens of trace %s event %d: %w", t.TraceID, t.Seq, err)
	}
	return nil
}

// ModelCallTokensOf reads the tokens kept for the traces' model calls, by trace and event seq.
func (s *Store) ModelCallTokensOf(ctx context.Context, traceIDs []uuid.UUID) (map[uuid.UUID]map[int]ModelCallTokens, error) {
	out := map[uuid.UUID]map[int]ModelCallTokens{}
	if len(traceIDs) == 0 {
		return out, nil
	}
	var rows []ModelCallTokens
	if err := s.DB.NewSelect().Model(&rows).Where("trace_id IN (?)", bun.In(traceIDs)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("model call tokens: %w", err)
	}
	for _, r := range rows {
		if out[r.TraceID] == nil {
			out[r.TraceID] = map[int]ModelCallTokens{}
		}
		out[r.TraceID][r.Seq] = r
	}
	return out, nil
}
