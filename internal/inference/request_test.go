package inference

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/proctorhq/proctor/internal/agent"
)

func body(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var b map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestARequestIsReadAsTheAgentSentIt(t *testing.T) {
	png := []byte("\x89PNG fake")
	b64 := base64.StdEncoding.EncodeToString(png)
	image := agent.NewImage("image/png", png)
	tests := []struct {
		name     string
		protocol string
		body     string
		want     Request
	}{
		{"openai", ProtocolOpenAI, `{"model": "m", "messages": [
			{"role": "developer", "content": "You are terse."},
			{"role": "user", "content": [{"type": "text", "text": "What is here?"},
				{"type": "image_url", "image_url": {"url": "data:image/png;base64,` + b64 + `"}},
				{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
				{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}]},
			{"role": "assistant", "content": null, "tool_calls": [
				{"id": "c1", "type": "function", "function": {"name": "look", "arguments": "{\"at\": \"door\"}"}},
				{"id": "c2", "type": "function", "function": {"name": "look", "arguments": "not json"}},
				{"id": "c3", "type": "function", "function": {"name": "look", "arguments": ""}}]},
			{"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "a door"}]},
			{"role": "tool", "tool_call_id": "c2", "content": "bad arguments"}],
			"tools": [{"type": "function", "function": {"name": "look", "description": "Looks.", "parameters": {"type": "object"}}}]}`,
			Request{Messages: []agent.Message{
				{Role: "system", Content: "You are terse."},
				{Role: "user", Content: "What is here?\n[image: https://example.com/a.png]\n[input_audio part]", Images: []agent.Image{image}},
				{Role: "assistant", ToolCalls: []agent.ToolCall{{ID: "c1", Name: "look", Arguments: map[string]any{"at": "door"}},
					{ID: "c2", Name: "look", InvalidArguments: "not json"},
					{ID: "c3", Name: "look", Arguments: map[string]any{}}}}, // read as its answer was: no arguments
				{Role: "tool", ToolCallID: "c1", Content: "a door"},
				{Role: "tool", ToolCallID: "c2", Content: "bad arguments"},
			}, Tools: []agent.Tool{{Name: "look", Description: "Looks.", InputSchema: map[string]any{"type": "object"}}}}},
		{"anthropic", ProtocolAnthropic, `{"model": "m", "max_tokens": 10,
			"system": [{"type": "text", "text": "You are terse."}],
			"messages": [
				{"role": "user", "content": [{"type": "text", "text": "What is here?"},
					{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "` + b64 + `"}}]},
				{"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
					{"type": "text", "text": "Looking."}, {"type": "tool_use", "id": "c1", "name": "look", "input": {"at": "door"}}]},
				{"role": "user", "content": [
					{"type": "tool_result", "tool_use_id": "c1", "is_error": true, "content": [{"type": "text", "text": "no door"},
						{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "` + b64 + `"}}]},
					{"type": "text", "text": "Go on."}]},
				{"role": "user", "content": "Hurry."}],
			"tools": [{"name": "look", "description": "Looks.", "input_schema": {"type": "object"}}]}`,
			Request{Messages: []agent.Message{
				{Role: "system", Content: "You are terse."},
				{Role: "user", Content: "What is here?", Images: []agent.Image{image}},
				{Role: "assistant", Content: "Looking.", ToolCalls: []agent.ToolCall{{ID: "c1", Name: "look", Arguments: map[string]any{"at": "door"}}}},
				{Role: "tool", ToolCallID: "c1", Content: "no door", Images: []agent.Image{image}, IsError: true},
				{Role: "user", Content: "Go on."},
				{Role: "user", Content: "Hurry."},
			}, Tools: []agent.Tool{{Name: "look", Description: "Looks.", InputSchema: map[string]any{"type": "object"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRequest(tt.protocol, body(t, tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tt.want, "", " ")
				t.Errorf("ParseRequest =\n%s\nwant\n%s", g, w)
			}
		})
	}
	for _, bad := range []string{`{"messages": "hi"}`, `{"messages": [{"role": "user", "content": 7}]}`,
		`{"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": "%%%"}}]}]}`} {
		if _, err := ParseRequest(ProtocolAnthropic, body(t, bad)); err == nil {
			t.Errorf("ParseRequest(%s) read it", bad)
		}
	}
}
