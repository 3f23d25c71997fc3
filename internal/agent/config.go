package agent

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrInvalidConfig is wrapped by the errors of [ParseAgentConfig] and [ParseValidation]: the
// task is wrong, and running it again will not help.
var ErrInvalidConfig = errors.New("invalid task configuration")

// AgentConfig is the part of a task's agent_config this package understands. Other keys are
// left to whoever reads them.
type AgentConfig struct {
	// AllowedTools, when not empty, are the only tools offered: glob patterns in path.Match
	// syntax ("*", "?", "[a-z]"), matched against tool names.
	AllowedTools []string `json:"allowed_tools,omitempty"`
	// DisallowedTools are never offered, whatever AllowedTools says.
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	// SystemPrompt is appended to the task's system prompt.
	SystemPrompt string `json:"system_prompt,omitempty"`
}

// ParseAgentConfig reads an agent_config object as stored with the task. A nil or empty map is
// the zero config. Keys of the wrong type and malformed patterns are errors wrapping
// [ErrInvalidConfig]; unknown keys are ignored.
func ParseAgentConfig(m map[string]any) (AgentConfig, error) {
	var cfg AgentConfig
	var errs []error
	var err error
	if cfg.AllowedTools, err = patterns(m, "allowed_tools"); err != nil {
		errs = append(errs, err)
	}
	if cfg.DisallowedTools, err = patterns(m, "disallowed_tools"); err != nil {
		errs = append(errs, err)
	}
	if v, ok := m["system_prompt"]; ok && v != nil {
		s, isString := v.(string)
		if !isString {
			errs = append(errs, fmt.Errorf("agent_config.system_prompt: want a string, got %T", v))
		}
		cfg.SystemPrompt = s
	}
	if len(errs) > 0 {
		return AgentConfig{}, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return cfg, nil
}

// patterns reads a list of glob patterns: a JSON array of strings (as decoded, []any) or a
// []string given by Go code.
func patterns(m map[string]any, key string) ([]string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return nil, nil
	}
	var list []string
	switch x := v.(type) {
	case []string:
		list = x
	case []any:
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("agent_config.%s[%d]: want a string, got %T", key, i, e)
			}
			list = append(list, s)
		}
	default:
		return nil, fmt.Errorf("agent_config.%s: want a list of glob patterns, got %T", key, v)
	}
	for i, p := range list {
		// path.Match reports a malformed pattern only when it gets that far in the name;
		// matching against the pattern itself makes it scan the whole pattern.
		if _, err := path.Match(p, p); err != nil {
			return nil, fmt.Errorf("agent_config.%s[%d]: pattern %q: %w", key, i, p, err)
		}
	}
	return list, nil
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
		// ParseAgentConfig rejected malformed patterns; one that slipped in through a
		// hand-built config matches nothing.
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

// ParseValidation reads a task's validation calls: objects {"name": tool, "arguments": {...}}
// naming visible tools, in the order the oracle replays them. "arguments" may be absent or
// null (no arguments); other keys are ignored.
func ParseValidation(entries []map[string]any) ([]Call, error) {
	calls := make([]Call, 0, len(entries))
	var errs []error
	for i, e := range entries {
		name, ok := e["name"].(string)
		if !ok || strings.TrimSpace(name) == "" {
			errs = append(errs, fmt.Errorf("validation[%d].name: want the name of a tool, got %v", i, e["name"]))
			continue
		}
		args := map[string]any{}
		if v, present := e["arguments"]; present && v != nil {
			m, isObject := v.(map[string]any)
			if !isObject {
				errs = append(errs, fmt.Errorf("validation[%d].arguments: want an object, got %T", i, v))
				continue
			}
			args = m
		}
		calls = append(calls, Call{Name: name, Arguments: args})
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return calls, nil
}
