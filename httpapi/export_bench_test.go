package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// BenchmarkExportPostgres is the export's throughput on a 10,000-attempt job on Postgres, each
// attempt a finished conversation of 10 model steps (a system and a user message, then an
// answer with a tool call, the call and its result per step: 32 events): GET
// /v2/jobs/{id}/export read to its end over HTTP, as JSON Lines and as Parquet, reporting
// attempts/s and MB/s of each. Run:
//
//	go test -run '^$' -bench ExportPostgres -benchtime 1x ./httpapi/
func BenchmarkExportPostgres(b *testing.B) {
	const attempts, steps = 10_000, 10
	s := storetest.Open(b, models.Postgres)
	f := newFixture(b, s, Options{})
	res, err := catalog.Of(s).UploadTasks(ctx, f.caller, catalog.Upload{TasksetName: "bench", Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "a", Prompt: "p"}}}})
	if err != nil {
		b.Fatal(err)
	}
	oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
	if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
		b.Fatal(err)
	}
	lts := make([]rollouts.LaunchTrace, attempts)
	for i := range lts {
		lts[i] = rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: res.TaskVersionIDs[0], ModelID: oracle.ID, MaxSteps: steps, GroupID: fmt.Sprint("g", i/8)}
	}
	job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "bench", MaxSteps: steps, GroupSize: 8, MaxConcurrent: 1, Traces: lts})
	if err != nil {
		b.Fatal(err)
	}
	one, at := 1.0, time.Now().UTC()
	var batch []models.TraceEvent
	for _, lt := range lts {
		batch = append(batch, attemptEvents(lt.TraceID, steps, at)...)
		if len(batch) >= 3200 {
			if err := rollouts.Of(s).AppendTraceEvents(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
		if _, err := rollouts.Of(s).TransitionTrace(ctx, lt.TraceID, rollouts.TraceUpdate{Status: models.TraceCompleted, StopReason: models.StopDone, Reward: &one,
			Attempt: 1, StartTime: &at, EndTime: &at}); err != nil {
			b.Fatal(err)
		}
	}
	if err := rollouts.Of(s).AppendTraceEvents(ctx, batch); err != nil {
		b.Fatal(err)
	}
	read := func(format string) (int64, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest("GET", f.srv.URL+"/v2/jobs/"+job.ID.String()+"/export?format="+format, nil)
		req.Header.Set("Authorization", "Bearer "+f.key)
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Body.Close()
		n, err := io.Copy(io.Discard, r.Body)
		if err != nil || r.StatusCode != 200 {
			b.Fatalf("export %s: %d, %v", format, r.StatusCode, err)
		}
		return n, time.Since(start)
	}
	b.ResetTimer()
	for b.Loop() {
		for _, format := range []string{"jsonl", "parquet"} {
			n, took := read(format)
			b.ReportMetric(float64(attempts)/took.Seconds(), format+"_attempts/s")
			b.ReportMetric(float64(n)/1e6/took.Seconds(), format+"_MB/s")
			b.ReportMetric(float64(n)/1e6, format+"_MB")
		}
	}
}

// attemptEvents are a finished attempt's events: its opening, then steps of an answer with a
// tool call, the call and its result.
func attemptEvents(traceID uuid.UUID, steps int, at time.Time) []models.TraceEvent {
	system := "You manage a todo list. Think step by step; call tools to act; answer without tool calls when the task is done."
	evs := []models.TraceEvent{
		{Kind: models.EventSystem, Text: system, Data: models.EventData(models.SystemEventData{Tools: []agent.Tool{{Name: "add_todo",
			Description: "Add a todo.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}}})},
		{Kind: models.EventUser, Text: "Add ten todos.", Data: models.EventData(models.UserEventData{Message: agent.Message{Role: agent.RoleUser, Content: "Add ten todos."}})},
	}
	for i := range steps {
		call := fmt.Sprint("call_", i)
		args := map[string]any{"title": fmt.Sprint("todo number ", i)}
		evs = append(evs,
			models.TraceEvent{Kind: models.EventAssistant, Data: models.EventData(models.AssistantEventData{Step: i, Message: agent.Message{Role: agent.RoleAssistant,
				Content: "I will add the next todo.", ToolCalls: []agent.ToolCall{{ID: call, Name: "add_todo", Arguments: args}}}, Usage: agent.Usage{InputTokens: 900, OutputTokens: 40}})},
			models.TraceEvent{Kind: models.EventToolCall, Data: models.EventData(models.ToolCallEventData{Step: i, CallID: call, Name: "add_todo", Arguments: args})},
			models.TraceEvent{Kind: models.EventToolResult, Text: "added", Data: models.EventData(models.ToolResultEventData{Step: i, CallID: call,
				Message: agent.Message{Role: agent.RoleTool, Content: fmt.Sprintf("added todo %d: todo number %d", i+1, i), ToolCallID: call}})},
		)
	}
	for i := range evs {
		evs[i].TraceID, evs[i].Seq, evs[i].ID, evs[i].Attempt, evs[i].StartedAt = traceID, i, fmt.Sprintf("%s-%d", traceID, i), 1, at
	}
	return evs
}
