package trajectory

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

func urlOf(im agent.Image) string { return "https://images.example/" + im.SHA256 }

// agentTrace is the trace of a brought agent's calls: each call's request stored against the one
// before it (as the recorder does), its answer, and between calls the MCP tool calls and results
// the environment gave, which the agent forwarded as it chose.
type agentTrace struct {
	log    models.SentLog
	events []models.TraceEvent
}

func (a *agentTrace) call(t *testing.T, step int, msgs []agent.Message, tools []agent.Tool, answer agent.Message, tokens *uuid.UUID) *models.SentRequest {
	t.Helper()
	sent := a.log.Next(msgs, tools)
	d := models.AssistantEventData{Step: step, Message: answer, Usage: agent.Usage{InputTokens: 100, OutputTokens: 10}, TokensRef: tokens, Sent: sent}
	a.events = append(a.events, models.TraceEvent{Seq: len(a.events), Kind: models.EventAssistant, Text: answer.Content, Data: models.EventData(d)})
	return sent
}

func (a *agentTrace) toolResult(t *testing.T, step int, id string, images ...agent.Image) {
	t.Helper()
	a.events = append(a.events,
		models.TraceEvent{Seq: len(a.events), Kind: models.EventToolCall, Data: models.EventData(models.ToolCallEventData{Step: step})},
		models.TraceEvent{Seq: len(a.events) + 1, Kind: models.EventToolResult,
			Data: models.EventData(models.UserEventData{Message: agent.Message{Role: agent.RoleTool, ToolCallID: id, Content: "the environment's result", Images: images}})})
}

func TestABroughtAgentsConversationIsWhatItSent(t *testing.T) {
	shot := agent.NewImage("image/png", []byte("a screenshot"))
	task := agent.NewImage("image/png", []byte("the task's picture"))
	tools := []agent.Tool{{Name: "look", InputSchema: map[string]any{"type": "object"}}}
	fewer := []agent.Tool{}
	a0 := agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{{ID: "c1", Name: "look", Arguments: map[string]any{"at": "door"}}}}
	a1 := agent.Message{Role: agent.RoleAssistant, Content: "Again.", ToolCalls: []agent.ToolCall{{ID: "c2", Name: "look", Arguments: map[string]any{}}}}
	a2 := agent.Message{Role: agent.RoleAssistant, Content: "Done."}
	tokens := uuid.New()

	var tr agentTrace
	first := []agent.Message{{Role: agent.RoleSystem, Content: "You are an agent."}, {Role: agent.RoleUser, Content: "Open the door.", Images: []agent.Image{task}}}
	if s := tr.call(t, 0, first, tools, a0, nil); s.Kept != 0 || len(s.Messages) != 2 || s.Tools == nil {
		t.Errorf("the first call stored %+v, want its 2 messages and its tools", s)
	}
	tr.toolResult(t, 0, "c1", shot) // the environment gave a screenshot; the agent forwards text only
	second := append(first[:2:2], a0, agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Content: "a door"})
	if s := tr.call(t, 1, second, tools, a1, &tokens); s.Kept != 2 || len(s.Messages) != 2 || s.Tools != nil {
		t.Errorf("the second call stored %+v, want 2 kept, 2 new, the same tools", s)
	}

	t.Run("its last request and answer", func(t *testing.T) {
		conv, err := FromEvents(tr.events, urlOf)
		if err != nil {
			t.Fatal(err)
		}
		zero, one := 0, 1
		want := []Message{
			{Role: "system", Content: Text("You are an agent.")},
			{Role: "user", Content: Content{Parts: []ContentPart{{Type: "text", Text: "Open the door."}, {Type: "image_url", ImageURL: &ImageURL{URL: urlOf(task)}}}}},
			{Role: "assistant", Step: &zero, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{"at":"door"}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: Text("a door")}, // no screenshot: the agent sent none
			{Role: "assistant", Step: &one, Content: Text("Again."), ToolCalls: []ToolCall{{ID: "c2", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{}`}}}},
		}
		check(t, conv, want)
		if len(conv.Kept) != 1 || conv.Kept[0] != (KeptCall{MessageIndex: 4, TokensRef: tokens}) {
			t.Errorf("kept calls = %+v, want step 1's tokens at message 4", conv.Kept)
		}
	})

	// The agent then rewrites its system prompt, drops the task's picture and offers no tools.
	tr.toolResult(t, 1, "c2", shot)
	third := []agent.Message{{Role: agent.RoleSystem, Content: "You are a careful agent."}, {Role: agent.RoleUser, Content: "Open the door."},
		a0, second[3], a1, {Role: agent.RoleTool, ToolCallID: "c2", Content: "still a door"}}
	if s := tr.call(t, 2, third, fewer, a2, nil); s.Kept != 0 || len(s.Messages) != 6 || s.Tools == nil || len(*s.Tools) != 0 {
		t.Errorf("the rewritten call stored %+v, want all 6 messages and no tools", s)
	}
	t.Run("as rewritten", func(t *testing.T) {
		conv, err := FromEvents(tr.events, urlOf)
		if err != nil {
			t.Fatal(err)
		}
		zero, one, two := 0, 1, 2
		check(t, conv, []Message{
			{Role: "system", Content: Text("You are a careful agent.")},
			{Role: "user", Content: Text("Open the door.")},
			{Role: "assistant", Step: &zero, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{"at":"door"}`}}}},
			{Role: "tool", ToolCallID: "c1", Content: Text("a door")},
			{Role: "assistant", Step: &one, Content: Text("Again."), ToolCalls: []ToolCall{{ID: "c2", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{}`}}}},
			{Role: "tool", ToolCallID: "c2", Content: Text("still a door")},
			{Role: "assistant", Step: &two, Content: Text("Done.")},
		})
		if len(conv.Tools) != 0 || conv.Steps != 3 || conv.Usage.InputTokens != 300 || conv.Usage.OutputTokens != 30 {
			t.Errorf("tools %+v, steps %d, usage %+v; want none, 3 and 300/30", conv.Tools, conv.Steps, conv.Usage)
		}
		if len(conv.Kept) != 1 || conv.Kept[0].MessageIndex != 4 {
			t.Errorf("kept calls = %+v, want step 1's at message 4", conv.Kept)
		}
	})
}

func TestTheBuiltInLoopsConversationIsRebuiltFromItsTurns(t *testing.T) {
	shot := agent.NewImage("image/png", []byte("a screenshot"))
	tools := []agent.Tool{{Name: "look", InputSchema: map[string]any{"type": "object"}}}
	ev := func(kind, text string, data any) models.TraceEvent {
		return models.TraceEvent{Kind: kind, Text: text, Data: models.EventData(data)}
	}
	call := agent.ToolCall{ID: "c1", Name: "look", Arguments: map[string]any{}}
	events := []models.TraceEvent{
		ev(models.EventSystem, "You are an agent.", models.SystemEventData{Tools: tools}),
		ev(models.EventUser, "Open the door.", models.UserEventData{Message: agent.Message{Role: agent.RoleUser, Content: "Open the door."}}),
		ev(models.EventAssistant, "", models.AssistantEventData{Step: 0, Message: agent.Message{Role: agent.RoleAssistant, ToolCalls: []agent.ToolCall{call}}}),
		ev(models.EventToolResult, "", models.UserEventData{Message: agent.Message{Role: agent.RoleTool, ToolCallID: "c1", Content: "a door", Images: []agent.Image{shot}}}),
		ev(models.EventAssistant, "Done.", models.AssistantEventData{Step: 1, Message: agent.Message{Role: agent.RoleAssistant, Content: "Done."}}),
	}
	conv, err := FromEvents(events, urlOf)
	if err != nil {
		t.Fatal(err)
	}
	zero, one := 0, 1
	check(t, conv, []Message{
		{Role: "system", Content: Text("You are an agent.")},
		{Role: "user", Content: Text("Open the door.")},
		{Role: "assistant", Step: &zero, ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "look", Arguments: `{}`}}}},
		{Role: "tool", ToolCallID: "c1", Content: Text("a door\n[1 image(s): in the next user message]")},
		{Role: "user", Content: Content{Parts: []ContentPart{{Type: "text", Text: "The image(s) of the result of call c1:"}, {Type: "image_url", ImageURL: &ImageURL{URL: urlOf(shot)}}}}},
		{Role: "assistant", Step: &one, Content: Text("Done.")},
	})
	if len(conv.Tools) != 1 || conv.Steps != 2 {
		t.Errorf("tools %+v and steps %d, want 1 and 2", conv.Tools, conv.Steps)
	}
}

func check(t *testing.T, conv *Conversation, want []Message) {
	t.Helper()
	if !reflect.DeepEqual(conv.Messages, want) {
		g, _ := json.MarshalIndent(conv.Messages, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Errorf("messages =\n%s\nwant\n%s", g, w)
	}
}

func TestAnswersAlikeKeepTheirOwnSteps(t *testing.T) {
	done := agent.Message{Role: agent.RoleAssistant, Content: "Done."}
	first, second := uuid.New(), uuid.New()
	var tr agentTrace
	ask := []agent.Message{{Role: agent.RoleUser, Content: "Say done."}}
	tr.call(t, 0, ask, nil, done, &first)
	tr.call(t, 1, append(ask[:1:1], done, agent.Message{Role: agent.RoleUser, Content: "Again."}), nil, done, &second)
	conv, err := FromEvents(tr.events, urlOf)
	if err != nil {
		t.Fatal(err)
	}
	zero, one := 0, 1
	check(t, conv, []Message{
		{Role: "user", Content: Text("Say done.")},
		{Role: "assistant", Step: &zero, Content: Text("Done.")},
		{Role: "user", Content: Text("Again.")},
		{Role: "assistant", Step: &one, Content: Text("Done.")},
	})
	if want := []KeptCall{{1, first}, {3, second}}; !reflect.DeepEqual(conv.Kept, want) {
		t.Errorf("kept calls = %+v, want each answer's own tokens %+v", conv.Kept, want)
	}
}
