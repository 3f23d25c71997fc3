package agent

import (
	"errors"
	"reflect"
	"testing"
)

func TestFilterTools(t *testing.T) {
	tools := []Tool{{Name: "add_todo"}, {Name: "list_todos"}, {Name: "complete_todo"}, {Name: "delete_todo"}, {Name: "browser"}}
	tests := []struct {
		name string
		cfg  AgentConfig
		want []string
	}{
		{"no patterns: every tool", AgentConfig{}, []string{"add_todo", "list_todos", "complete_todo", "delete_todo", "browser"}},
		{"allowed: only matching tools", AgentConfig{AllowedTools: []string{"*_todo", "browser"}}, []string{"add_todo", "complete_todo", "delete_todo", "browser"}},
		{"disallowed: all but matching tools", AgentConfig{DisallowedTools: []string{"delete_*", "b?owser"}}, []string{"add_todo", "list_todos", "complete_todo"}},
		{"both: allowed minus disallowed", AgentConfig{AllowedTools: []string{"*todo*"}, DisallowedTools: []string{"delete_todo"}}, []string{"add_todo", "list_todos", "complete_todo"}},
		{"character classes", AgentConfig{AllowedTools: []string{"[al]*"}}, []string{"add_todo", "list_todos"}},
		{"allowed that matches nothing: no tools", AgentConfig{AllowedTools: []string{"shell"}}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := toolNames(FilterTools(tools, tt.cfg))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FilterTools = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseAgentConfig(t *testing.T) {
	tests := []struct {
		name    string
		in      map[string]any
		want    AgentConfig
		wantErr bool
	}{
		{"nil is the zero config", nil, AgentConfig{}, false},
		{"as decoded from JSON", map[string]any{
			"allowed_tools": []any{"*_todo"}, "disallowed_tools": []any{"delete_*"}, "system_prompt": "Be brief.", "model_params": map[string]any{"x": 1},
		}, AgentConfig{AllowedTools: []string{"*_todo"}, DisallowedTools: []string{"delete_*"}, SystemPrompt: "Be brief."}, false},
		{"as built in Go", map[string]any{"allowed_tools": []string{"a"}}, AgentConfig{AllowedTools: []string{"a"}}, false},
		{"nulls are absent", map[string]any{"allowed_tools": nil, "system_prompt": nil}, AgentConfig{}, false},
		{"a pattern list that is a string", map[string]any{"allowed_tools": "*_todo"}, AgentConfig{}, true},
		{"a pattern that is not a string", map[string]any{"disallowed_tools": []any{"a", 3.0}}, AgentConfig{}, true},
		{"a malformed pattern", map[string]any{"allowed_tools": []any{"[a-"}}, AgentConfig{}, true},
		{"a system prompt that is not a string", map[string]any{"system_prompt": []any{"x"}}, AgentConfig{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAgentConfig(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Errorf("err = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseAgentConfig = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestSystemPromptAppendsTheAgentConfigs(t *testing.T) {
	tests := []struct {
		task, extra, want string
	}{
		{"You manage todos.", "Be brief.", "You manage todos.\n\nBe brief."},
		{"You manage todos.", "", "You manage todos."},
		{"", "Be brief.", "Be brief."},
		{"  You manage todos.\n", "\nBe brief. ", "You manage todos.\n\nBe brief."},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := SystemPrompt(tt.task, AgentConfig{SystemPrompt: tt.extra}); got != tt.want {
			t.Errorf("SystemPrompt(%q, %q) = %q, want %q", tt.task, tt.extra, got, tt.want)
		}
	}
}

func TestParseValidation(t *testing.T) {
	got, err := ParseValidation([]map[string]any{
		{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}},
		{"name": "list_todos"},
		{"name": "list_todos", "arguments": nil, "comment": "ignored"},
	})
	want := []Call{
		{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{Name: "list_todos", Arguments: map[string]any{}},
		{Name: "list_todos", Arguments: map[string]any{}},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ParseValidation = %+v, %v; want %+v", got, err, want)
	}
	if calls, err := ParseValidation(nil); err != nil || len(calls) != 0 {
		t.Errorf("ParseValidation(nil) = %v, %v; want no calls", calls, err)
	}
	for name, bad := range map[string]map[string]any{
		"no name":                     {"arguments": map[string]any{}},
		"a name that is not a string": {"name": 3.0},
		"arguments that are a list":   {"name": "x", "arguments": []any{1}},
	} {
		if _, err := ParseValidation([]map[string]any{bad}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}
