package agent

import (
	"context"
	"testing"
)

// The replay model answers the i-th step with the i-th recorded answer, ids and arguments as
// recorded, whatever the tool results say, and says it is done once they are all given; the
// record is not changed by whoever edits an answer.
func TestTheReplayModelAnswersWithTheRecordedAnswersInOrder(t *testing.T) {
	recorded := []Message{
		{Role: RoleAssistant, Content: "left first", ToolCalls: []ToolCall{{ID: "call_a", Name: "move", Arguments: map[string]any{"direction": "left"}}}},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_b", Name: "move", Arguments: map[string]any{"direction": "up"}},
			{ID: "call_c", Name: "board"}}},
		{Role: RoleAssistant, Content: "I reached 16."},
	}
	m := NewReplay(recorded)
	var conv []Message
	for i, want := range recorded {
		out, err := m.Step(context.Background(), StepRequest{Messages: conv})
		if err != nil {
			t.Fatal(err)
		}
		if out.Message.Content != want.Content || len(out.Message.ToolCalls) != len(want.ToolCalls) || out.Done != (len(want.ToolCalls) == 0) {
			t.Fatalf("step %d: %+v, want %+v", i, out, want)
		}
		for j, c := range out.Message.ToolCalls {
			if c.ID != want.ToolCalls[j].ID || c.Name != want.ToolCalls[j].Name || c.Arguments["direction"] != want.ToolCalls[j].Arguments["direction"] {
				t.Errorf("step %d call %d: %+v, want %+v", i, j, c, want.ToolCalls[j])
			}
			if c.Arguments != nil {
				c.Arguments["direction"] = "edited"
			}
		}
		conv = append(conv, out.Message, Message{Role: RoleTool, Content: "a different board than recorded"})
	}
	if recorded[0].ToolCalls[0].Arguments["direction"] != "left" {
		t.Errorf("editing an answer edited the record: %+v", recorded[0])
	}
	out, err := m.Step(context.Background(), StepRequest{Messages: conv})
	if err != nil || !out.Done || out.Model != ReplayModelName {
		t.Errorf("past the record: %+v, %v", out, err)
	}
}
