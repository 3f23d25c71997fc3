package rollouts

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// LogCursor is where a page of a trace's log starts: after the line AfterSeq, or, when AfterMilli
// is set, after the lines stamped in that Unix millisecond and before it (a page's last
// timestamp).
type LogCursor struct {
	AfterSeq   int
	AfterMilli *int64
}

// LogPage is one page of a source of a trace's log, oldest first.
type LogPage struct {
	Lines []models.TraceLog
	// HasMore says more lines are stored after the page, to be read now.
	HasMore bool
}

// TraceLogPage pages one source of a trace's log in the order it was written (seq), so that both
// cursors read every line once: a page never ends inside a millisecond. It stops before the first
// millisecond it cannot hold whole within limit lines; a millisecond of more than limit lines
// alone is a page of its own, longer than limit. With holdLatest (an attempt still writing,
// read by timestamp) the latest millisecond stored is held back, since more of its lines may
// still come in the worker's next batch: a page that ended inside it would make the next
// timestamp cursor skip them.
func (s *Store) TraceLogPage(ctx context.Context, traceID uuid.UUID, source string, cur LogCursor, limit int, holdLatest bool) (*LogPage, error) {
	after := cur.AfterSeq
	if cur.AfterMilli != nil {
		// After the last line, in write order, stamped at or before the millisecond.
		if err := s.DB.NewSelect().Model((*models.TraceLog)(nil)).ColumnExpr("COALESCE(MAX(seq), -1)").
			Where("trace_id = ? AND source = ? AND time < ?", traceID, source, endOfMilli(*cur.AfterMilli)).Scan(ctx, &after); err != nil {
			return nil, fmt.Errorf("trace log page: %w", err)
		}
	}
	var rows []models.TraceLog
	if err := s.DB.NewSelect().Model(&rows).Where("trace_id = ? AND source = ? AND seq > ?", traceID, source, after).
		Order("seq ASC").Limit(int64(limit + 1)).Scan(ctx); err != nil {
		return nil, fmt.Errorf("trace log page: %w", err)
	}
	if len(rows) <= limit {
		if holdLatest {
			rows = rows[:startOfLastMilli(rows)]
		}
		return &LogPage{Lines: rows}, nil
	}
	if k := startOfLastMilli(rows[:limit+1]); k > 0 {
		return &LogPage{Lines: rows[:k], HasMore: true}, nil
	}
	// More than limit lines share the first millisecond: the page is that millisecond, whole,
	// up to the first line written after it that is stamped otherwise.
	m := rows[0].Time.UnixMilli()
	stop := -1
	if err := s.DB.NewSelect().Model((*models.TraceLog)(nil)).ColumnExpr("COALESCE(MIN(seq), -1)").
		Where("trace_id = ? AND source = ? AND seq > ?", traceID, source, after).
		Where("(time < ? OR time >= ?)", time.UnixMilli(m).UTC(), endOfMilli(m)).Scan(ctx, &stop); err != nil {
		return nil, fmt.Errorf("trace log page: %w", err)
	}
	if stop < 0 && holdLatest {
		return &LogPage{}, nil
	}
	q := s.DB.NewSelect().Model(&rows).Where("trace_id = ? AND source = ? AND seq > ?", traceID, source, after)
	if stop >= 0 {
		q = q.Where("seq < ?", stop)
	}
	rows = nil
	if err := q.Order("seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("trace log page: %w", err)
	}
	return &LogPage{Lines: rows, HasMore: stop >= 0}, nil
}

// endOfMilli is the instant just after Unix millisecond ms: a line was stamped in or before ms
// when its time is earlier.
func endOfMilli(ms int64) time.Time { return time.UnixMilli(ms + 1).UTC() }

// startOfLastMilli is the index of the first of the lines that end lines and share its last
// line's millisecond (0 when all do, or there are none).
func startOfLastMilli(lines []models.TraceLog) int {
	k := len(lines)
	for k > 0 && lines[k-1].Time.UnixMilli() == lines[len(lines)-1].Time.UnixMilli() {
		k--
	}
	return k
}
