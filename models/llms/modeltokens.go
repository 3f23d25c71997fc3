package llms

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
)

// RecordModelCallTokens keeps a call's tokens, before its assistant event (which names them) is
// written. A call whose event is never written (a step retried, two writers at one place) leaves
// a row that no event names, which nothing reads: tokens are never paired with another call's
// answer.
func (s *Store) RecordModelCallTokens(ctx context.Context, t models.ModelCallTokens) error {
	t.CreatedAt = models.Now()
	if _, err := s.DB.NewInsert().Model(&t).Exec(ctx); err != nil {
		return fmt.Errorf("record the tokens of a call of trace %s: %w", t.TraceID, err)
	}
	return nil
}

// ModelCallTokensOf reads the tokens kept for the named calls of a trace, by call id.
func (s *Store) ModelCallTokensOf(ctx context.Context, traceID uuid.UUID, callIDs []uuid.UUID) (map[uuid.UUID]models.ModelCallTokens, error) {
	out := map[uuid.UUID]models.ModelCallTokens{}
	if len(callIDs) == 0 {
		return out, nil
	}
	var rows []models.ModelCallTokens
	if err := s.DB.NewSelect().Model(&rows).Where("trace_id = ? AND call_id IN (?)", traceID, bun.In(callIDs)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("model call tokens of trace %s: %w", traceID, err)
	}
	for _, r := range rows {
		out[r.CallID] = r
	}
	return out, nil
}
