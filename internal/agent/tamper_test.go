package agent

import (
	"context"
	"reflect"
	"testing"
)

// The tamper probe calls the hidden setup and evaluate dispatchers, then claims success through
// each offered tool that writes what a grader might read (by its name or an argument's), with
// arguments that say so, one a step, and then says it is done; tools that do the work itself
// are left alone.
func TestTheTamperProbeTriesTheHiddenDispatchersThenClaimsSuccess(t *testing.T) {
	tools := []Tool{
		{Name: "move", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"direction": map[string]any{"type": "string", "enum": []any{"up", "down"}}}}},
		{Name: "submit", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"answer": map[string]any{"type": "string"}, "score": map[string]any{"type": "number", "maximum": 100.0}}}},
		{Name: "set_verdict", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"passed": map[string]any{"type": "boolean"}}}},
		{Name: "report_result", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"status": map[string]any{"type": "string", "enum": []any{"fail", "pass"}}, "tries": map[string]any{"type": "integer"}}}},
		{Name: "add_todo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}},
	}
	want := []ToolCall{TamperCalls[0], TamperCalls[1],
		{ID: "tamper_2", Name: "report_result", Arguments: map[string]any{"status": "pass", "tries": int64(1)}},
		{ID: "tamper_3", Name: "set_verdict", Arguments: map[string]any{"passed": true}},
		{ID: "tamper_4", Name: "submit", Arguments: map[string]any{"answer": "passed", "score": 100.0}},
	}
	var conv []Message
	m := NewTamper()
	for i, w := range want {
		out, err := m.Step(context.Background(), StepRequest{Messages: conv, Tools: tools})
		if err != nil || out.Done || len(out.Message.ToolCalls) != 1 {
			t.Fatalf("step %d: %+v, %v", i, out, err)
		}
		if got := out.Message.ToolCalls[0]; !reflect.DeepEqual(got, w) {
			t.Errorf("step %d: %+v, want %+v", i, got, w)
		}
		conv = append(conv, out.Message, Message{Role: RoleTool, Content: "refused", IsError: true})
	}
	if out, err := m.Step(context.Background(), StepRequest{Messages: conv, Tools: tools}); err != nil || !out.Done {
		t.Errorf("after every call: %+v, %v; want done", out, err)
	}
	if claims := ClaimCalls(tools[:1]); len(claims) != 0 {
		t.Errorf("a tool that writes nothing a grader reads was claimed through: %+v", claims)
	}
	// A tool that runs shell commands (the shell server's exec): the claim plants Harbor's reward
	// files, which a sound verifier ignores.
	shell := []Tool{{Name: "exec", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"command": map[string]any{"type": "string"}, "timeout_sec": map[string]any{"type": "number"}}}}, tools[0]}
	if claims := ClaimCalls(shell); len(claims) != 1 || claims[0].Name != "exec" || claims[0].Arguments["command"] != PlantRewardCommand {
		t.Errorf("claims through a shell tool: %+v", claims)
	}
}
