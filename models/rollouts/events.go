package rollouts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// Log sources.
const (
	LogWorker = "worker"
	LogEnv    = "env"
)

// AppendTraceEvents writes events; one whose (trace_id, seq) exists is skipped, so a retried
// writer never duplicates an event.
func (s *Store) AppendTraceEvents(ctx context.Context, events []models.TraceEvent) error {
	return s.appendTraceEvents(ctx, s.DB, events)
}

func (s *Store) appendTraceEvents(ctx context.Context, db bun.IDB, events []models.TraceEvent) error {
	if len(events) == 0 {
		return nil
	}
	for i := range events {
		if len(events[i].Data) == 0 {
			events[i].Data = json.RawMessage(`{}`)
		}
		if events[i].ID == "" {
			events[i].ID = fmt.Sprintf("%s-%d", events[i].TraceID, events[i].Seq)
		}
	}
	if s.Dialect == models.Postgres {
		return appendTraceEventsPG(ctx, db, events)
	}
	if err := models.InsertInBatches(ctx, db, events, "CONFLICT (trace_id, seq) DO NOTHING"); err != nil {
		return fmt.Errorf("append trace events: %w", err)
	}
	return nil
}

// OpenTry writes a try's opening events (the system prompt, the setup calls, the first user
// message), numbered on from the trace's last event, and, when running is set, turns the trace
// running, in one transaction. It sets the events' Seq and ID. The number is read here, as late
// as it can be: past a superseded try's writer that was still appending while this try started.
func (s *Store) OpenTry(ctx context.Context, traceID uuid.UUID, events []models.TraceEvent, running bool) error {
	err := s.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		seq, err := latestSeq(ctx, tx, traceID)
		if err != nil {
			return err
		}
		for i := range events {
			events[i].Seq, events[i].ID = seq+1+i, ""
		}
		if err := s.appendTraceEvents(ctx, tx, events); err != nil {
			return err
		}
		if running {
			_, err = transition(tx, traceID, TraceUpdate{Status: models.TraceRunning}).Exec(ctx)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("open try of trace %s: %w", traceID, err)
	}
	return nil
}

// appendTraceEventsPG inserts events as one array per column (unnest): Postgres parses eleven
// array literals instead of a VALUES row per event, which doubles the ingest rate of large
// batches.
func appendTraceEventsPG(ctx context.Context, db bun.IDB, events []models.TraceEvent) error {
	n := len(events)
	traceIDs, seqs, ids, attempts := make([]uuid.UUID, n), make([]int, n), make([]string, n), make([]int, n)
	kinds, texts, parents, data := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	superseded, started, ended := make([]bool, n), make([]time.Time, n), make([]*time.Time, n)
	for i, e := range events {
		traceIDs[i], seqs[i], ids[i], attempts[i] = e.TraceID, e.Seq, e.ID, e.Attempt
		kinds[i], texts[i], parents[i], data[i] = e.Kind, e.Text, e.ParentID, string(e.Data)
		superseded[i], started[i], ended[i] = e.Superseded, e.StartedAt, e.EndedAt
	}
	_, err := db.NewRaw(`INSERT INTO trace_events (trace_id, seq, id, attempt, kind, text, parent_id, data, superseded, started_at, ended_at)
		SELECT * FROM unnest(?::uuid[], ?::int[], ?::text[], ?::int[], ?::text[], ?::text[], ?::text[], ?::jsonb[], ?::bool[], ?::timestamptz[], ?::timestamptz[])
		ON CONFLICT (trace_id, seq) DO NOTHING`,
		pgdialect.Array(traceIDs), pgdialect.Array(seqs), pgdialect.Array(ids), pgdialect.Array(attempts), pgdialect.Array(kinds),
		pgdialect.Array(texts), pgdialect.Array(parents), pgdialect.Array(data), pgdialect.Array(superseded), pgdialect.Array(started),
		pgdialect.Array(ended)).Exec(ctx)
	if err != nil {
		return fmt.Errorf("append trace events: %w", err)
	}
	return nil
}

// TraceEvents lists a trace's events after sinceSeq, by seq; superseded events (of a failed try)
// are included only when asked for.
func (s *Store) TraceEvents(ctx context.Context, traceID uuid.UUID, sinceSeq int, withSuperseded bool) ([]models.TraceEvent, error) {
	var evs []models.TraceEvent
	q := s.DB.NewSelect().Model(&evs).Where("trace_id = ? AND seq > ?", traceID, sinceSeq)
	if !withSuperseded {
		q = q.Where("NOT superseded")
	}
	if err := q.Order("seq ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("trace events: %w", err)
	}
	return evs, nil
}

// LatestSeq is the highest seq written for a trace, -1 when none.
func (s *Store) LatestSeq(ctx context.Context, traceID uuid.UUID) (int, error) {
	return latestSeq(ctx, s.DB, traceID)
}

func latestSeq(ctx context.Context, db bun.IDB, traceID uuid.UUID) (int, error) {
	var seq int
	if err := db.NewSelect().Model((*models.TraceEvent)(nil)).ColumnExpr("COALESCE(MAX(seq), -1)").Where("trace_id = ?", traceID).Scan(ctx, &seq); err != nil {
		return 0, fmt.Errorf("latest seq: %w", err)
	}
	return seq, nil
}

// SupersedeAttempt marks the events of one try of an attempt as superseded: they stay, for the
// record, but no longer count in the trajectory. A try whose evaluation recorded the attempt's
// outcome before its host was lost is not superseded: the finished trace is returned instead
// (nil while the attempt is open), and its outcome stands.
func (s *Store) SupersedeAttempt(ctx context.Context, traceID uuid.UUID, attempt int) (*models.Trace, error) {
	_, err := s.DB.NewUpdate().Model((*models.TraceEvent)(nil)).Set("superseded = ?", true).Where("trace_id = ? AND attempt = ?", traceID, attempt).
		Where("NOT EXISTS (SELECT 1 FROM traces WHERE id = ? AND status IN (?))", traceID, bun.In([]string{models.TraceCompleted, models.TraceError, models.TraceCancelled})).
		Exec(ctx)
	if err != nil {
		return nil, fmt.Errorf("supersede attempt: %w", err)
	}
	tr := new(models.Trace)
	if err := s.DB.NewSelect().Model(tr).Where("id = ?", traceID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("supersede attempt: %w", err)
	}
	if !Terminal(tr.Status) {
		return nil, nil
	}
	return tr, nil
}

// AppendTraceLogs writes log lines idempotently on (trace, source, seq).
func (s *Store) AppendTraceLogs(ctx context.Context, logs []models.TraceLog) error {
	if len(logs) == 0 {
		return nil
	}
	if err := models.InsertInBatches(ctx, s.DB, logs, "CONFLICT (trace_id, source, seq) DO NOTHING"); err != nil {
		return fmt.Errorf("append trace logs: %w", err)
	}
	return nil
}

// AppendLogLine appends one line to a source of a trace's log, at the seq after the last, in one
// statement. A line that loses a race for its seq to another writer's is tried again.
func (s *Store) AppendLogLine(ctx context.Context, traceID uuid.UUID, source, stream, line string, at time.Time) error {
	return appendLogLine(ctx, s.DB, traceID, source, stream, line, at)
}

func appendLogLine(ctx context.Context, db bun.IDB, traceID uuid.UUID, source, stream, line string, at time.Time) error {
	// Each round one of the racing writers wins: a writer loses at most as many rounds as there
	// are others.
	for range 16 {
		res, err := db.NewRaw(`INSERT INTO trace_logs (trace_id, source, seq, stream, line, time)
			SELECT ?, ?, COALESCE(MAX(seq), -1) + 1, ?, ?, ? FROM trace_logs WHERE trace_id = ? AND source = ?
			ON CONFLICT (trace_id, source, seq) DO NOTHING`, traceID, source, stream, line, at, traceID, source).Exec(ctx)
		if err != nil {
			return fmt.Errorf("append a log line: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n == 1 {
			return nil
		}
	}
	return fmt.Errorf("append a log line: %w: its seq kept being taken", models.ErrConflict)
}

// TraceLogs pages one source's lines of a trace after afterSeq; hasMore says a next page exists.
func (s *Store) TraceLogs(ctx context.Context, traceID uuid.UUID, source string, afterSeq, limit int) ([]models.TraceLog, bool, error) {
	var logs []models.TraceLog
	if err := s.DB.NewSelect().Model(&logs).Where("trace_id = ? AND source = ? AND seq > ?", traceID, source, afterSeq).
		Order("seq ASC").Limit(int64(limit + 1)).Scan(ctx); err != nil {
		return nil, false, fmt.Errorf("trace logs: %w", err)
	}
	if len(logs) > limit {
		return logs[:limit], true, nil
	}
	return logs, false, nil
}
