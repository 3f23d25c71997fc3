package agent

import (
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
