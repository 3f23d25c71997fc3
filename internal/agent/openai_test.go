package agent

import (
	"context"
	"errors"
	"net"
	"reflect"
	"testing"
	"time"
)

const openAIToolCallReply = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "test-model-0613",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
    "role": "assistant", "content": null,
    "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add_todo", "arguments": "{\"title\": \"buy milk\"}"}}]
  }}],
  "usage": {"prompt_tokens": 52, "completion_tokens": 17, "total_tokens": 69}
}`

const openAIFinalReply = `{
  "id": "chatcmpl-2", "object": "chat.completion", "created": 2, "model": "test-model-0613",
  "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Added buy milk."}}],
  "usage": {"prompt_tokens": 90, "completion_tokens": 5, "total_tokens": 95}
}`

func newTestOpenAI(t *testing.T, srv *scriptedServer) Model {
	t.Helper()
	temp := 0.0
	m, err := NewOpenAI(OpenAIConfig{BaseURL: srv.srv.URL + "/v1", APIKey: "sk-test", Model: "test-model", Temperature: &temp, MaxTokens: 256, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestOpenAIToolCallThenFinalAnswer(t *testing.T) {
	// Ambient configuration must not leak into requests to a server it was not meant for.
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	t.Setenv("OPENAI_API_KEY", "sk-ambient")
	srv := newScriptedServer(t, reply{status: 200, body: openAIToolCallReply}, reply{status: 200, body: openAIFinalReply})
	model := newTestOpenAI(t, srv)
	ctx := testContext(t)
	req := StepRequest{
		System:   "You manage a todo list.",
		Messages: []Message{{Role: RoleUser, Content: "Add buy milk."}},
		Tools:    todoTools,
	}

	first, err := model.Step(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	wantCall := ToolCall{ID: "call_1", Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}
	if first.Done || len(first.Message.ToolCalls) != 1 || !reflect.DeepEqual(first.Message.ToolCalls[0], wantCall) {
		t.Fatalf("first step = %+v, want one tool call %+v and not done", first, wantCall)
	}
	if first.Message.Role != RoleAssistant || first.Usage != (Usage{InputTokens: 52, OutputTokens: 17}) ||
		first.Model != "test-model-0613" || first.StopReason != "tool_calls" {
		t.Errorf("first step = %+v, want role assistant, usage 52/17, the served model, stop reason tool_calls", first)
	}

	got := srv.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if r.method != "POST" || r.path != "/v1/chat/completions" {
		t.Errorf("request %s %s, want POST /v1/chat/completions", r.method, r.path)
	}
	if auth := r.header.Get("Authorization"); auth != "Bearer sk-test" {
		t.Errorf("Authorization = %q, want the configured key", auth)
	}
	if org := r.header.Get("OpenAI-Organization"); org != "" {
		t.Errorf("OpenAI-Organization = %q: the environment's OPENAI_ORG_ID leaked into the request", org)
	}
	checks := []struct {
		what string
		got  any
		want any
	}{
		{"model", dig(r.body, "model"), "test-model"},
		{"temperature", dig(r.body, "temperature"), 0.0},
		{"max_completion_tokens", dig(r.body, "max_completion_tokens"), 256.0},
		{"system message role", dig(r.body, "messages", 0, "role"), "system"},
		{"system prompt", dig(r.body, "messages", 0, "content"), "You manage a todo list."},
		{"user message", dig(r.body, "messages", 1, "content"), "Add buy milk."},
		{"tool type", dig(r.body, "tools", 0, "type"), "function"},
		{"tool name", dig(r.body, "tools", 0, "function", "name"), "add_todo"},
		{"tool description", dig(r.body, "tools", 0, "function", "description"), "Add a todo to the list"},
		{"tool schema", dig(r.body, "tools", 0, "function", "parameters"), map[string]any{
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
		Message{Role: RoleTool, ToolCallID: "call_1", Content: `{"todo":{"id":1,"title":"buy milk"}}`})
	second, err := model.Step(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !second.Done || second.Message.Content != "Added buy milk." || len(second.Message.ToolCalls) != 0 {
		t.Errorf("second step = %+v, want the final answer, done", second)
	}
	if second.Usage != (Usage{InputTokens: 90, OutputTokens: 5}) {
		t.Errorf("second usage = %+v, want 90/5", second.Usage)
	}
	r = srv.requests()[1]
	checks = []struct {
		what string
		got  any
		want any
	}{
		{"assistant role", dig(r.body, "messages", 2, "role"), "assistant"},
		{"assistant tool call id", dig(r.body, "messages", 2, "tool_calls", 0, "id"), "call_1"},
		{"assistant tool call type", dig(r.body, "messages", 2, "tool_calls", 0, "type"), "function"},
		{"assistant tool call name", dig(r.body, "messages", 2, "tool_calls", 0, "function", "name"), "add_todo"},
		{"assistant tool call arguments", dig(r.body, "messages", 2, "tool_calls", 0, "function", "arguments"), `{"title":"buy milk"}`},
		{"tool role", dig(r.body, "messages", 3, "role"), "tool"},
		{"tool_call_id", dig(r.body, "messages", 3, "tool_call_id"), "call_1"},
		{"tool content", dig(r.body, "messages", 3, "content"), `{"todo":{"id":1,"title":"buy milk"}}`},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("second request %s = %#v, want %#v", c.what, c.got, c.want)
		}
	}
}

func TestOpenAIFailedToolCallsAreMarkedForTheModel(t *testing.T) {
	srv := newScriptedServer(t, reply{status: 200, body: openAIFinalReply})
	model := newTestOpenAI(t, srv)
	_, err := model.Step(testContext(t), StepRequest{Messages: []Message{
		{Role: RoleUser, Content: "Complete todo 9."},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_9", Name: "complete_todo", Arguments: map[string]any{"id": 9}}}},
		{Role: RoleTool, ToolCallID: "call_9", Content: "no todo with id 9", IsError: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := dig(srv.requests()[0].body, "messages", 2, "content"); got != "Error: no todo with id 9" {
		t.Errorf("tool message content = %q, want the error marked, since tool messages have no error flag", got)
	}
}

func TestOpenAIArgumentsThatAreNotAnObjectAreKeptForTheToolStepToRefuse(t *testing.T) {
	bad := `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"tool_calls",
	  "message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","type":"function","function":{"name":"add_todo","arguments":"{\"title\": \"buy"}}]}}],
	  "usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	srv := newScriptedServer(t, reply{status: 200, body: bad})
	step, err := newTestOpenAI(t, srv).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := ToolCall{ID: "call_x", Name: "add_todo", InvalidArguments: `{"title": "buy`}
	if step.Done || len(step.Message.ToolCalls) != 1 || !reflect.DeepEqual(step.Message.ToolCalls[0], want) {
		t.Errorf("step = %+v, want the call kept with its invalid arguments %+v", step, want)
	}
}

// TestOpenAIErrorsSayWhetherToRetry also pins that the SDK makes exactly one request per Step:
// retrying is the workflow's decision.
func TestOpenAIErrorsSayWhetherToRetry(t *testing.T) {
	tests := []struct {
		name           string
		reply          reply
		wantStatus     int
		wantRetryable  bool
		wantMessage    string
		wantRetryAfter time.Duration
	}{
		{"429 rate limited", reply{status: 429, headers: map[string]string{"retry-after": "2"},
			body: `{"error":{"message":"Rate limit reached","type":"requests"}}`}, 429, true, "Rate limit reached", 2 * time.Second},
		{"503 unavailable", reply{status: 503, body: `{"error":{"message":"overloaded"}}`}, 503, true, "overloaded", 0},
		{"500 with retry-after-ms", reply{status: 500, headers: map[string]string{"retry-after-ms": "250"},
			body: `{"error":{"message":"boom"}}`}, 500, true, "boom", 250 * time.Millisecond},
		{"408 timeout", reply{status: 408, body: `{}`}, 408, true, "{}", 0},
		{"409 conflict", reply{status: 409, body: `{"error":{"message":"busy"}}`}, 409, true, "busy", 0},
		{"400 bad request", reply{status: 400, body: `{"error":{"message":"context too long","type":"invalid_request_error"}}`}, 400, false, "context too long", 0},
		{"400 in vLLM's shape", reply{status: 400, body: `{"object":"error","message":"max_tokens too large","type":"BadRequestError","code":400}`}, 400, false, "max_tokens too large", 0},
		{"401 bad key", reply{status: 401, body: `{"error":{"message":"Incorrect API key"}}`}, 401, false, "Incorrect API key", 0},
		{"404 no such model", reply{status: 404, body: `{"error":{"message":"model not found"}}`}, 404, false, "model not found", 0},
		{"422 unprocessable", reply{status: 422, body: `{"detail":"bad field"}`}, 422, false, "bad field", 0},
		{"a 500 the server says not to retry", reply{status: 500, headers: map[string]string{"x-should-retry": "false"},
			body: `{"error":{"message":"permanent"}}`}, 500, false, "permanent", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newScriptedServer(t, tt.reply)
			_, err := newTestOpenAI(t, srv).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want an *APIError", err, err)
			}
			if apiErr.Provider != "openai" || apiErr.Status != tt.wantStatus || apiErr.Retryable != tt.wantRetryable ||
				apiErr.Message != tt.wantMessage || apiErr.RetryAfter != tt.wantRetryAfter {
				t.Errorf("err = %+v, want openai status %d retryable %v message %q retry after %v",
					apiErr, tt.wantStatus, tt.wantRetryable, tt.wantMessage, tt.wantRetryAfter)
			}
			if IsRetryable(err) != tt.wantRetryable {
				t.Errorf("IsRetryable = %v, want %v", IsRetryable(err), tt.wantRetryable)
			}
			if n := len(srv.requests()); n != 1 {
				t.Errorf("%d HTTP requests, want exactly 1: the SDK must not retry on its own", n)
			}
		})
	}
}

func TestOpenAIUnreachableServerIsRetryable(t *testing.T) {
	srv := newScriptedServer(t)
	srv.srv.Close()
	_, err := newTestOpenAI(t, srv).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 0 || !apiErr.Retryable || !apiErr.Unreachable || apiErr.Message != "connection refused" {
		t.Fatalf("err = %v (%+v), want a retryable, unreachable *APIError with status 0 saying the connection was refused", err, apiErr)
	}
	// A server that takes the connection and drops it is not unreachable: it may be restarting.
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	m, nerr := NewOpenAI(OpenAIConfig{BaseURL: "http://" + ln.Addr().String() + "/v1", APIKey: "k", Model: "m", Logger: discardLogger()})
	if nerr != nil {
		t.Fatal(nerr)
	}
	_, err = m.Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if !errors.As(err, &apiErr) || !apiErr.Retryable || apiErr.Unreachable {
		t.Fatalf("err = %v (%+v), want a retryable *APIError that is not unreachable", err, apiErr)
	}
}

func TestOpenAICancelledContextIsNotAnAPIError(t *testing.T) {
	srv := newScriptedServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTestOpenAI(t, srv).Step(ctx, StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if !errors.Is(err, context.Canceled) || IsRetryable(err) {
		t.Fatalf("err = %v, want context.Canceled, not retryable", err)
	}
}

func TestOpenAICompletionWithoutChoicesIsABadResponse(t *testing.T) {
	srv := newScriptedServer(t, reply{status: 200, body: `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[]}`})
	_, err := newTestOpenAI(t, srv).Step(testContext(t), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if !errors.Is(err, ErrBadResponse) || IsRetryable(err) {
		t.Fatalf("err = %v, want ErrBadResponse, not retryable", err)
	}
}

func TestNewOpenAINeedsAModel(t *testing.T) {
	if _, err := NewOpenAI(OpenAIConfig{BaseURL: "http://127.0.0.1:1/v1"}); err == nil {
		t.Fatal("NewOpenAI without a model: want an error")
	}
}
