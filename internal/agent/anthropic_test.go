package agent

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

const anthropicToolUseReply = `{
  "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-20250101",
  "content": [
    {"type": "text", "text": "I'll add both."},
    {"type": "tool_use", "id": "toolu_1", "name": "add_todo", "input": {"title": "buy milk"}},
    {"type": "tool_use", "id": "toolu_2", "name": "add_todo", "input": {"title": "walk the dog"}}
  ],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 40, "output_tokens": 31, "cache_read_input_tokens": 10, "cache_creation_input_tokens": 0}
}`

const anthropicFinalReply = `{
  "id": "msg_2", "type": "message", "role": "assistant", "model": "claude-test-20250101",
  "content": [{"type": "text", "text": "Both added."}],
  "stop_reason": "end_turn", "stop_sequence": null,
  "usage": {"input_tokens": 120, "output_tokens": 4}
}`

func newTestAnthropic(t *testing.T, srv *scriptedServer, maxTokens int) Model {
	t.Helper()
	temp := 0.5
	m, err := NewAnthropic(AnthropicConfig{BaseURL: srv.srv.URL, APIKey: "sk-ant-test", Model: "claude-test", Temperature: &temp, MaxTokens: maxTokens, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestAnthropicToolUseThenFinalAnswer(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-ambient")
	t.Setenv("ANTHROPIC_CUSTOM_HEADERS", "X-Leak: yes")
	srv := newScriptedServer(t, reply{status: 200, body: anthropicToolUseReply}, reply{status: 200, body: anthropicFinalReply})
	model := newTestAnthropic(t, srv, 0)
	ctx := testContext(t)
	req := StepRequest{
		System:   "You manage a todo list.",
		Messages: []Message{{Role: RoleUser, Content: "Add buy milk and walk the dog."}},
		Tools:    todoTools,
	}

	first, err := model.Step(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantCalls := []ToolCall{
		{ID: "toolu_1", Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{ID: "toolu_2", Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
	}
	if first.Done || !reflect.DeepEqual(first.Message.ToolCalls, wantCalls) || first.Message.Content != "I'll add both." {
		t.Fatalf("first step = %+v, want the text and the calls %+v, not done", first, wantCalls)
	}
	// Cached prompt tokens count as input.
	if first.Usage != (Usage{InputTokens: 50, OutputTokens: 31}) || first.Model != "claude-test-20250101" || first.StopReason != "tool_use" {
		t.Errorf("first step = %+v, want usage 50/31, the served model, stop reason tool_use", first)
	}

	r := srv.requests()[0]
	if r.method != "POST" || r.path != "/v1/messages" {
		t.Errorf("request %s %s, want POST /v1/messages", r.method, r.path)
	}
	if key := r.header.Get("X-Api-Key"); key != "sk-ant-test" {
		t.Errorf("x-api-key = %q, want the configured key", key)
	}
	if r.header.Get("X-Leak") != "" {
		t.Error("ANTHROPIC_CUSTOM_HEADERS leaked into the request")
	}
	if r.header.Get("Anthropic-Version") == "" {
		t.Error("no anthropic-version header")
	}
	checks := []struct {
		what string
		got  any
		want any
	}{
		{"model", dig(r.body, "model"), "claude-test"},
		{"max_tokens", dig(r.body, "max_tokens"), float64(DefaultAnthropicMaxTokens)},
		{"temperature", dig(r.body, "temperature"), 0.5},
		{"system", dig(r.body, "system"), []any{map[string]any{"type": "text", "text": "You manage a todo list."}}},
		{"user turn", dig(r.body, "messages", 0), map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "Add buy milk and walk the dog."}}}},
		{"tool name", dig(r.body, "tools", 0, "name"), "add_todo"},
		{"tool description", dig(r.body, "tools", 0, "description"), "Add a todo to the list"},
		{"tool schema", dig(r.body, "tools", 0, "input_schema"), map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"title": map[string]any{"type": "string", "description": "what to do"}},
			"required":             []any{"title"},
			"additionalProperties": false,
		}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("first request %s = %#v, want %#v", c.what, c.got, c.want)
		}
	}

	req.Messages = append(req.Messages, first.Message,
		Message{Role: RoleTool, ToolCallID: "toolu_1", Content: "added 1"},
		Message{Role: RoleTool, ToolCallID: "toolu_2", Content: "title must not be empty", IsError: true})
	req.MaxTokens = 100
	second, err := model.Step(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Done || second.Message.Content != "Both added." || second.Usage != (Usage{InputTokens: 120, OutputTokens: 4}) {
		t.Errorf("second step = %+v, want the final answer, done, usage 120/4", second)
	}
	r = srv.requests()[1]
	wantAssistant := map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "text", "text": "I'll add both."},
		map[string]any{"type": "tool_use", "id": "toolu_1", "name": "add_todo", "input": map[string]any{"title": "buy milk"}},
		map[string]any{"type": "tool_use", "id": "toolu_2", "name": "add_todo", "input": map[string]any{"title": "walk the dog"}},
	}}
	// Both results in the one user turn that follows, each answering its tool_use.
	wantResults := map[string]any{"role": "user", "content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false,
			"content": []any{map[string]any{"type": "text", "text": "added 1"}}},
		map[string]any{"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
			"content": []any{map[string]any{"type": "text", "text": "title must not be empty"}}},
	}}
	checks = []struct {
		what string
		got  any
		want any
	}{
		{"turns", len(dig(r.body, "messages").([]any)), 3},
		{"assistant turn", dig(r.body, "messages", 1), wantAssistant},
		{"tool results turn", dig(r.body, "messages", 2), wantResults},
		{"max_tokens from the request", dig(r.body, "max_tokens"), 100.0},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("second request %s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestAnthropicErrorsSayWhetherToRetry(t *testing.T) {
	tests := []struct {
		name           string
		reply          reply
		wantStatus     int
		wantRetryable  bool
		wantMessage    string
		wantRetryAfter time.Duration
	}{
		{"429 rate limited", reply{status: 429, headers: map[string]string{"retry-after": "3"},
			body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of requests has exceeded your rate limit"}}`},
			429, true, "Number of requests has exceeded your rate limit", 3 * time.Second},
		{"503 unavailable", reply{status: 503, body: `{"type":"error","error":{"type":"api_error","message":"unavailable"}}`}, 503, true, "unavailable", 0},
		{"529 overloaded", reply{status: 529, body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, 529, true, "Overloaded", 0},
		{"400 invalid request", reply{status: 400, body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`},
			400, false, "messages: roles must alternate", 0},
		{"401 bad key", reply{status: 401, body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`}, 401, false, "invalid x-api-key", 0},
		{"403 forbidden", reply{status: 403, body: `{"type":"error","error":{"type":"permission_error","message":"no access"}}`}, 403, false, "no access", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptedServer(t, tt.reply)
			_, err := newTestAnthropic(t, srv, 0).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want an *APIError", err, err)
			}
			if apiErr.Provider != "anthropic" || apiErr.Status != tt.wantStatus || apiErr.Retryable != tt.wantRetryable ||
				apiErr.Message != tt.wantMessage || apiErr.RetryAfter != tt.wantRetryAfter {
				t.Errorf("err = %+v, want anthropic status %d retryable %v message %q retry after %v",
					apiErr, tt.wantStatus, tt.wantRetryable, tt.wantMessage, tt.wantRetryAfter)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d HTTP requests, want exactly 1: the SDK must not retry on its own", n)
			}
		})
	}
}

func TestAnthropicLargeMaxTokensNeedNoStreaming(t *testing.T) {
	// The SDK refuses non-streaming requests it expects to outlast its default timeout; the
	// adapter sets its own timeout, so a large bound is the server's business.
	srv := newScriptedServer(t, reply{status: 200, body: anthropicFinalReply})
	if _, err := newTestAnthropic(t, srv, 64000).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}); err != nil {
		t.Fatalf("Step with max_tokens 64000: %v", err)
	}
}

func TestAnthropicEmptyToolResultsAreSentWithoutContent(t *testing.T) {
	srv := newScriptedServer(t, reply{status: 200, body: anthropicFinalReply})
	_, err := newTestAnthropic(t, srv, 0).Step(testContext(t), StepRequest{Messages: []Message{
		{Role: RoleUser, Content: "clear it"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "toolu_1", Name: "clear"}}},
		{Role: RoleTool, ToolCallID: "toolu_1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	body := srv.requests()[0].body
	if got := dig(body, "messages", 1, "content", 0); !reflect.DeepEqual(got, map[string]any{"type": "tool_use", "id": "toolu_1", "name": "clear", "input": map[string]any{}}) {
		t.Errorf("tool_use = %#v, want empty input as {}", got)
	}
	if got := dig(body, "messages", 2, "content", 0); !reflect.DeepEqual(got, map[string]any{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": false}) {
		t.Errorf("tool_result = %#v, want no content block (empty text blocks are rejected)", got)
	}
}
