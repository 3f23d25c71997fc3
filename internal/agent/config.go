package agent

import (
	"path"
	"strings"
)

// AgentConfig is the part of a task's agent_config the agent loop uses (the platform stores it as
// models.AgentConfig, whose patterns are checked on upload).
type AgentConfig struct {
	// AllowedTools, when not empty, are the only tools offered: glob patterns in path.Match
	// syntax ("*", "?", "[a-z]"), matched against tool names.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// DisallowedTools are never offered, whatever AllowedTools says.
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	// SystemPrompt is appended to the task's system prompt.
	SystemPrompt string `json:"system_prompt,omitempty"`
}

// FilterTools returns the tools cfg offers: those matching one of cfg.AllowedTools (all of
// them when it is empty) and none of cfg.DisallowedTools, in their original order.
func FilterTools(tools []Tool, cfg AgentConfig) []Tool {
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		if len(cfg.AllowedTools) > 0 && !matchAny(cfg.AllowedTools, t.Name) {
			continue
		}
		if matchAny(cfg.DisallowedTools, t.Name) {
			continue
		}
		out = append(out, t)
	}
	return out
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		// Uploads reject malformed patterns; one that slipped in through a hand-built config
		// matches nothing.
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// SystemPrompt is the system prompt of an attempt: the task's, then the agent config's, as
// separate paragraphs; either may be empty.
func SystemPrompt(taskSystemPrompt string, cfg AgentConfig) string {
	task, extra := strings.TrimSpace(taskSystemPrompt), strings.TrimSpace(cfg.SystemPrompt)
	switch {
	case task == "":
		return extra
	case extra == "":
		return task
	}
	return task + "\n\n" + extra
}
