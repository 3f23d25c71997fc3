package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"
)

// The conversation is stored as trace events and decoded again before every step: what a
// step produced must survive JSON unchanged, and the oracle must pick up where it was.
func TestConversationSurvivesAJSONRoundTrip(t *testing.T) {
	oracle := NewOracle(addTodosValidation)
	msgs := []Message{{Role: RoleUser, Content: "Add these todos."}}
	first, err := oracle.Step(context.Background(), StepRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	msgs = append(msgs, first.Message,
		Message{Role: RoleTool, ToolCallID: first.Message.ToolCalls[0].ID, Content: "no", IsError: true},
		Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "x", Name: "add_todo", InvalidArguments: "{oops"}}})
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	var rebuilt []Message
	if err := json.Unmarshal(b, &rebuilt); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt, msgs) {
		t.Errorf("rebuilt = %+v\nwant      %+v", rebuilt, msgs)
	}
	// Two assistant tool calls were made (one the oracle's, one malformed): the oracle counts
	// calls, not successes, so it is done with its two.
	next, err := oracle.Step(context.Background(), StepRequest{Messages: rebuilt})
	if err != nil {
		t.Fatal(err)
	}
	if !next.Done {
		t.Errorf("step after two calls = %+v, want done", next)
	}
}

func TestRetryAfterReadsEveryFormTheProvidersUse(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
	}{
		{"milliseconds", http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond},
		{"seconds", http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{"an HTTP date", http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second},
		{"a date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"garbage", http.Header{"Retry-After": {"soon"}}, 0},
		{"nothing", http.Header{}, 0},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.header, now); got != tt.want {
			t.Errorf("%s: retryAfter = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestParseArguments(t *testing.T) {
	tests := []struct {
		raw         string
		want        map[string]any
		wantInvalid bool
	}{
		{`{"title": "x"}`, map[string]any{"title": "x"}, false},
		{``, map[string]any{}, false},
		{`null`, map[string]any{}, false},
		{`"{\"title\": \"x\"}"`, map[string]any{"title": "x"}, false}, // encoded twice
		{`{"title": "x"`, nil, true},
		{`[1, 2]`, nil, true},
		{`"just text"`, nil, true},
	}
	for _, tt := range tests {
		got, invalid := ParseArguments(tt.raw)
		if !reflect.DeepEqual(got, tt.want) || (invalid != "") != tt.wantInvalid {
			t.Errorf("ParseArguments(%q) = %v, %q; want %v, invalid %v", tt.raw, got, invalid, tt.want, tt.wantInvalid)
		}
	}
}
