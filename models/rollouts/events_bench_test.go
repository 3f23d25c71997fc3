package rollouts_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// BenchmarkTraceEventsPostgres measures the trace-event store on Postgres: how fast
// AppendTraceEvents ingests events, in batches of 100, against a raw COPY of the same rows
// (goal ≥ 50%), and the p99 of what a client following a live attempt costs the server
// (LatestSeq then TraceEvents since a recent seq, as GET /v2/trace/{id}/events does) with 1M
// events stored (goal < 10 ms). Run:
//
//	go test -run '^$' -bench TraceEventsPostgres -benchtime 1x ./models/rollouts/
func BenchmarkTraceEventsPostgres(b *testing.B) {
	const traces, perTrace, ingestTraces, batch = 1000, perTraceEvents, 50, 100
	for b.Loop() {
		url := storetest.PostgresURL(b)
		s := storetest.OpenURL(b, url)
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		c := storetest.Member(b, s, "bench", "bench@example.com")
		versions, oracle := storetest.LaunchFixture(b, s, c)
		lts := make([]rollouts.LaunchTrace, traces)
		for i := range lts {
			lts[i] = rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, MaxSteps: 10}
		}
		if _, _, err := rollouts.Of(s).LaunchJob(ctx, c, rollouts.Launch{Name: "bench", MaxSteps: 10, GroupSize: 1, MaxConcurrent: 1, Traces: lts}); err != nil {
			b.Fatal(err)
		}

		// The same rows, written once by the store and once by COPY, each into traces of its own.
		start := time.Now()
		for t := range ingestTraces {
			evs := eventsOf(lts[t].TraceID, perTrace)
			for i := 0; i < len(evs); i += batch {
				if err := rollouts.Of(s).AppendTraceEvents(ctx, evs[i:i+batch]); err != nil {
					b.Fatal(err)
				}
			}
		}
		appendRate := float64(ingestTraces*perTrace) / time.Since(start).Seconds()
		start = time.Now()
		copyEvents(b, conn, lts[ingestTraces:2*ingestTraces])
		copyRate := float64(ingestTraces*perTrace) / time.Since(start).Seconds()

		// Fill the store to 1M events, then follow random live attempts.
		copyEvents(b, conn, lts[2*ingestTraces:])
		if _, err := conn.Exec(ctx, "ANALYZE trace_events"); err != nil {
			b.Fatal(err)
		}
		var lat []float64
		for range 2000 {
			id := lts[rand.IntN(traces)].TraceID
			q := time.Now()
			latest, err := rollouts.Of(s).LatestSeq(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			evs, err := rollouts.Of(s).TraceEvents(ctx, id, latest-1-rand.IntN(5), false)
			if err != nil || len(evs) == 0 {
				b.Fatalf("poll: %d events, %v", len(evs), err)
			}
			lat = append(lat, time.Since(q).Seconds()*1000)
		}
		sort.Float64s(lat)
		b.ReportMetric(appendRate, "append_events/s")
		b.ReportMetric(copyRate, "copy_events/s")
		b.ReportMetric(appendRate/copyRate, "append/copy")
		b.ReportMetric(lat[len(lat)/2], "poll_p50_ms")
		b.ReportMetric(lat[len(lat)*99/100], "poll_p99_ms")
	}
}

// perTraceEvents is how many events each benchmark trace holds.
const perTraceEvents = 1000

// eventsOf makes n events of a trace shaped like an attempt's: a model answer with a tool call,
// then the call and its result.
func eventsOf(traceID uuid.UUID, n int) []models.TraceEvent {
	at := time.Now().UTC()
	evs := make([]models.TraceEvent, n)
	for i := range evs {
		args := map[string]any{"title": "buy milk"}
		var kind string
		var data any
		switch i % 3 {
		case 0:
			kind, data = models.EventAssistant, models.AssistantEventData{Step: i / 3, Message: agent.Message{Role: agent.RoleAssistant,
				ToolCalls: []agent.ToolCall{{ID: fmt.Sprint("call_", i), Name: "add_todo", Arguments: args}}}}
		case 1:
			kind, data = models.EventToolCall, models.ToolCallEventData{Step: i / 3, CallID: fmt.Sprint("call_", i-1), Name: "add_todo", Arguments: args}
		case 2:
			kind, data = models.EventToolResult, models.ToolResultEventData{Step: i / 3, CallID: fmt.Sprint("call_", i-2),
				Message: agent.Message{Role: agent.RoleTool, Content: "added todo 1: buy milk", ToolCallID: fmt.Sprint("call_", i-2)}}
		}
		evs[i] = models.TraceEvent{TraceID: traceID, Seq: i, ID: fmt.Sprintf("%s-%d", traceID, i), Attempt: 1, Kind: kind,
			Text: "added todo 1: buy milk", Data: models.EventData(data), StartedAt: at}
	}
	return evs
}

// copyEvents writes perTrace events of each trace with COPY.
func copyEvents(b *testing.B, conn *pgx.Conn, lts []rollouts.LaunchTrace) {
	cols := []string{"trace_id", "seq", "id", "attempt", "kind", "text", "parent_id", "data", "superseded", "started_at", "ended_at"}
	for _, lt := range lts {
		evs := eventsOf(lt.TraceID, perTraceEvents)
		rows := make([][]any, len(evs))
		for i, e := range evs {
			rows[i] = []any{e.TraceID, e.Seq, e.ID, e.Attempt, e.Kind, e.Text, e.ParentID, e.Data, e.Superseded, e.StartedAt, e.EndedAt}
		}
		if _, err := conn.CopyFrom(ctx, pgx.Identifier{"trace_events"}, cols, pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}
}
