package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/trajectory"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// readExport reads an export's lines.
func readExport(t *testing.T, r response) []ExportLine {
	t.Helper()
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "application/x-ndjson") {
		t.Fatalf("export = %d %s: %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var lines []ExportLine
	sc := bufio.NewScanner(bytes.NewReader(r.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l ExportLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %d is no JSON object: %v: %s", len(lines), err, sc.Bytes())
		}
		lines = append(lines, l)
	}
	return lines
}

// GET /v2/jobs/{id}/export streams a job's attempts as JSON Lines, each with its conversation in
// OpenAI's chat format (the last try's only), filtered, and resumable from any line's cursor.
func TestExportJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		bucket, err := blob.NewLocalBucket(t.TempDir(), blob.Options{PublicBaseURL: "http://files.test", SigningKey: []byte("k")})
		if err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, s, Options{Bucket: bucket})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"ex","tasks":[{"name":"solve","prompt":"p"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)
		const n = 120 // more than a page
		traces := make([]rollouts.LaunchTrace, n)
		for i := range traces {
			traces[i] = rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID, GroupID: fmt.Sprintf("g%d", i/4)}
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "export", MaxSteps: 5, GroupSize: 4, MaxConcurrent: 1, Traces: traces})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		// The first attempt: a lost try (superseded), then a second with a whole conversation.
		first := traces[0].TraceID
		rollouts.Of(s).TransitionTrace(ctx, first, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 1})
		rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{{TraceID: first, Seq: 0, Kind: models.EventUser, Text: "lost",
			Data: models.EventData(models.UserEventData{Message: agent.Message{Role: agent.RoleUser, Content: "from the lost try"}}), StartedAt: now, Attempt: 1}})
		if _, err := rollouts.Of(s).SupersedeAttempt(ctx, first, 1); err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).TransitionTrace(ctx, first, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 2})
		call := agent.ToolCall{ID: "call_1", Name: "look", Arguments: map[string]any{"at": "screen"}}
		ev := func(seq int, kind, text string, data any) models.TraceEvent {
			return models.TraceEvent{TraceID: first, Seq: seq, Kind: kind, Text: text, Data: models.EventData(data), StartedAt: now, Attempt: 2}
		}
		rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{
			ev(1, models.EventSystem, "be brief", models.SystemEventData{Tools: []agent.Tool{{Name: "look", Description: "see", InputSchema: map[string]any{"type": "object"}}}}),
			ev(2, models.EventUser, "p", models.UserEventData{Message: agent.Message{Role: agent.RoleUser, Content: "p"}}),
			ev(3, models.EventAssistant, "", models.AssistantEventData{Step: 0, Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}},
				Usage: agent.Usage{InputTokens: 30, OutputTokens: 5}}),
			ev(4, models.EventToolCall, "look", models.ToolCallEventData{Step: 0, CallID: "call_1", Name: "look", Arguments: call.Arguments}),
			ev(5, models.EventToolResult, "a cat", models.ToolResultEventData{Step: 0, CallID: "call_1", Name: "look",
				Message: agent.Message{Role: agent.RoleTool, ToolCallID: "call_1", Content: "a cat", Images: []agent.Image{{MIMEType: "image/png", Key: "shots/1.png"}}},
				Images:  []agent.Image{{MIMEType: "image/png", Key: "shots/1.png"}}}),
			ev(6, models.EventAssistant, "done", models.AssistantEventData{Step: 1, Message: agent.Message{Role: agent.RoleAssistant, Content: "done"},
				Usage: agent.Usage{InputTokens: 50, OutputTokens: 2}}),
			ev(7, models.EventEvaluate, "", models.EvaluateEventData{Reward: 1}),
		})
		one, half := 1.0, 0.5
		rollouts.Of(s).TransitionTrace(ctx, first, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one, StopReason: models.StopDone,
			EvaluationResult: &models.EvaluationResult{Reward: 1, Content: "seen"}})
		// Others: half completed at 0.5, one invalidated, the rest left pending.
		for _, tr := range traces[1:60] {
			rollouts.Of(s).TransitionTrace(ctx, tr.TraceID, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 1})
			rollouts.Of(s).TransitionTrace(ctx, tr.TraceID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &half, StopReason: models.StopDone})
		}
		if _, err := rollouts.Of(s).SetTracesValidity(ctx, f.caller, []uuid.UUID{traces[1].TraceID}, false); err != nil {
			t.Fatal(err)
		}

		path := "/v2/jobs/" + job.ID.String() + "/export"
		all := readExport(t, f.do("GET", path, "key", nil))
		if len(all) != n {
			t.Fatalf("%d lines, want %d", len(all), n)
		}
		for i, l := range all {
			if l.TraceID != traces[i].TraceID || l.GroupID != traces[i].GroupID {
				t.Fatalf("line %d is attempt %s of group %s, want %s of %s: not in launch order", i, l.TraceID, l.GroupID, traces[i].TraceID, traces[i].GroupID)
			}
		}
		l := all[0]
		roles := []string{}
		for _, m := range l.Messages {
			roles = append(roles, m.Role)
		}
		if strings.Join(roles, ",") != "system,user,assistant,tool,user,assistant" || l.Tries != 2 || l.Steps != 2 ||
			l.Usage != (ExportUsage{PromptTokens: 80, CompletionTokens: 7}) || l.Reward == nil || *l.Reward != 1 || !strings.Contains(string(l.EvaluationResult), `"seen"`) ||
			l.TaskName != "solve" || l.ModelName != "oracle" || len(l.Tools) != 1 || l.Tools[0].Function.Name != "look" {
			t.Fatalf("the first line = %+v (roles %v)", l, roles)
		}
		if tc := l.Messages[2].ToolCalls; len(tc) != 1 || tc[0].ID != "call_1" || tc[0].Function.Arguments != `{"at":"screen"}` || !l.Messages[2].Content.IsZero() {
			t.Errorf("the assistant's tool call = %+v", l.Messages[2])
		}
		if m := l.Messages[3]; m.ToolCallID != "call_1" || m.Content.Text == nil || *m.Content.Text != "a cat\n[1 image(s): in the next user message]" {
			t.Errorf("the tool result = %+v", m)
		}
		if parts := l.Messages[4].Content.Parts; len(parts) != 2 || parts[1].Type != "image_url" || !strings.HasPrefix(parts[1].ImageURL.URL, "http://files.test/") {
			t.Errorf("the tool result's image = %+v, want a signed URL in a user message", l.Messages[4])
		}
		checkOpenAIMessages(t, l.Messages)
		if strings.Contains(fmt.Sprint(l.Messages), "from the lost try") {
			t.Error("the lost try's messages were exported")
		}

		// Filters.
		for _, tc := range []struct {
			query string
			want  int
		}{
			{"?valid_only=true", n - 1},
			{"?status=completed", 60},
			{"?status=completed,pending", n},
			{"?min_reward=0.75", 1},
			{"?max_reward=0.5", 59},
			{"?category=live", n - 60},
			{"?category=successful&valid_only=true", 1},
		} {
			if got := len(readExport(t, f.do("GET", path+tc.query, "key", nil))); got != tc.want {
				t.Errorf("export%s: %d lines, want %d", tc.query, got, tc.want)
			}
		}

		// Resumed from any line, an export goes on with the next: across a page's end too.
		for _, from := range []int{0, 49, 50, 73, n - 1} {
			rest := readExport(t, f.do("GET", path+"?cursor="+all[from].Cursor, "key", nil))
			if len(rest) != n-from-1 || (len(rest) > 0 && rest[0].TraceID != all[from+1].TraceID) {
				t.Errorf("resumed after line %d: %d lines, want %d from %s", from, len(rest), n-from-1, all[min(from+1, n-1)].TraceID)
			}
		}

		wantValidation(t, f.do("GET", path+"?cursor=nope", "key", nil), "query.cursor")
		wantValidation(t, f.do("GET", path+"?status=sleeping", "key", nil), "query.status[0]")
		wantEnvelope(t, f.do("GET", "/v2/jobs/"+uuid.NewString()+"/export", "key", nil), 404, "not_found")
	})
}

// checkOpenAIMessages reads each exported message with the OpenAI SDK's own types for a chat
// completion request's messages, and writes it back: what the SDK reads is all there was (but
// step, Proctor's own field), so a loader of OpenAI's format sees every part, images included.
func checkOpenAIMessages(t *testing.T, msgs []trajectory.Message) {
	t.Helper()
	for i, m := range msgs {
		ours, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var theirs openai.ChatCompletionMessageParamUnion
		if err := json.Unmarshal(ours, &theirs); err != nil {
			t.Errorf("message %d does not read as OpenAI's: %v\n%s", i, err, ours)
			continue
		}
		back, err := json.Marshal(theirs)
		if err != nil {
			t.Fatal(err)
		}
		var want, got map[string]any
		json.Unmarshal(ours, &want) //nolint:errcheck // ours was marshalled just now
		json.Unmarshal(back, &got)  //nolint:errcheck // as was theirs
		delete(want, "step")
		if !reflect.DeepEqual(want, got) {
			t.Errorf("message %d reads differently with the OpenAI SDK:\n ours:   %s\n theirs: %s", i, ours, back)
		}
	}
}
