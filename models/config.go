package models

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
)

// The typed JSON columns of tasks, traces and builds. The API's request and response bodies use
// these types as they are (their struct tags are the OpenAPI schema), and the engine reads them
// without converting through maps.

// RuntimeConfig says how an environment's sandbox runs (spec: Runtime config). A trace's runtime
// config, when set, overrides its task version's field by field.
type RuntimeConfig struct {
	Image     string            `json:"image,omitempty" maxLength:"500" doc:"The environment's image"`
	Limits    *RuntimeLimits    `json:"limits,omitempty"`
	Resources *RuntimeResources `json:"resources,omitempty"`
	// Network lets the environment reach beyond loopback; by default it cannot.
	Network *bool `json:"network,omitempty" doc:"Allow network access beyond loopback (default false): to public addresses, through the sandbox's egress proxy (never the worker's host or its private networks)"`
	// AllowedHosts, with Network, are the only hosts it reaches.
	AllowedHosts []string `json:"allowed_hosts,omitempty" maxItems:"100" maxLength:"253" pattern:"^((\\*\\.)?[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\\.?|[0-9A-Fa-f.]*:[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*)$" doc:"Proctor extension: with network, the only hosts reachable: a name (pypi.org), every name under a domain (*.pythonhosted.org) or an address; empty: any public host"`
	// AgentsInside lets a brought agent deployed to run inside an environment run in this one.
	AgentsInside *bool `json:"agents_inside,omitempty" doc:"Proctor extension: a brought agent deployed with placement inside may run in this environment, in its working directory (default false)"`
}

// RuntimeLimits bound an attempt's time.
type RuntimeLimits struct {
	RunTimeoutS     *float64 `json:"run_timeout_s,omitempty" minimum:"1" maximum:"604800" doc:"Seconds an attempt may run"`
	StartupTimeoutS *float64 `json:"startup_timeout_s,omitempty" minimum:"1" maximum:"86400" doc:"Seconds the environment may take to start"`
}

// RuntimeResources are what a sandbox is given.
type RuntimeResources struct {
	CPU      *float64     `json:"cpu,omitempty" minimum:"0.1" maximum:"256" doc:"CPU cores"`
	MemoryMB *int         `json:"memory_mb,omitempty" minimum:"16" maximum:"4194304"`
	GPU      *GPUResource `json:"gpu,omitempty"`
}

// GPUResource asks for whole GPUs of one type.
type GPUResource struct {
	Count int    `json:"count" minimum:"0" maximum:"64"`
	Type  string `json:"type,omitempty" maxLength:"100" pattern:"^[a-zA-Z0-9_.-]*$" example:"h100"`
}

// Over returns rc with every field it leaves unset taken from base.
func (rc RuntimeConfig) Over(base RuntimeConfig) RuntimeConfig {
	out := base
	if rc.Image != "" {
		out.Image = rc.Image
	}
	if rc.Network != nil {
		out.Network = rc.Network
	}
	if rc.AllowedHosts != nil {
		out.AllowedHosts = rc.AllowedHosts
	}
	if rc.AgentsInside != nil {
		out.AgentsInside = rc.AgentsInside
	}
	if rc.Limits != nil {
		l := RuntimeLimits{}
		if base.Limits != nil {
			l = *base.Limits
		}
		if rc.Limits.RunTimeoutS != nil {
			l.RunTimeoutS = rc.Limits.RunTimeoutS
		}
		if rc.Limits.StartupTimeoutS != nil {
			l.StartupTimeoutS = rc.Limits.StartupTimeoutS
		}
		out.Limits = &l
	}
	if rc.Resources != nil {
		r := RuntimeResources{}
		if base.Resources != nil {
			r = *base.Resources
		}
		if rc.Resources.CPU != nil {
			r.CPU = rc.Resources.CPU
		}
		if rc.Resources.MemoryMB != nil {
			r.MemoryMB = rc.Resources.MemoryMB
		}
		if rc.Resources.GPU != nil {
			r.GPU = rc.Resources.GPU
		}
		out.Resources = &r
	}
	return out
}

// BuildRuntime is a build's runtime config: the spec's fields, and how the built environment's
// server is started.
type BuildRuntime struct {
	RuntimeConfig
	// Command is the environment server's argv (builds for the process provider record the built
	// binary here).
	Command []string `json:"command,omitempty"`
	// Placement is where a brought agent's build runs: PlacementBeside (the default, in a
	// sandbox of its own) or PlacementInside (in the environment's working directory).
	Placement string `json:"placement,omitempty"`
}

// Where a brought agent runs (BuildRuntime.Placement).
const (
	PlacementBeside = "beside"
	PlacementInside = "inside"
)

// Inside reports whether a brought agent's build runs inside the environment.
func (b BuildRuntime) Inside() bool { return b.Placement == PlacementInside }

// AgentConfig narrows and instructs the agent of a task. Keys it does not name are kept as they
// were uploaded (Extra) and exported back, for agents that read their own.
type AgentConfig struct {
	// AllowedTools, when not empty, are the only tools offered: glob patterns (path.Match syntax).
	AllowedTools []string `json:"allowed_tools,omitempty" maxItems:"1000" doc:"Only these tools are offered (glob patterns, e.g. \"browser_*\")"`
	// DisallowedTools are never offered, whatever AllowedTools says.
	DisallowedTools []string `json:"disallowed_tools,omitempty" maxItems:"1000" doc:"These tools are never offered (glob patterns)"`
	// SystemPrompt is appended to the task's system prompt.
	SystemPrompt string `json:"system_prompt,omitempty" maxLength:"200000" doc:"Appended to the task's system prompt"`
	// Extra holds the keys this type does not name.
	Extra map[string]any `json:"-"`

	_ struct{} `additionalProperties:"true"`
}

// agentConfigFields is AgentConfig's named part, for its JSON codec.
type agentConfigFields struct {
	AllowedTools    []string `json:"allowed_tools,omitempty"`
	DisallowedTools []string `json:"disallowed_tools,omitempty"`
	SystemPrompt    string   `json:"system_prompt,omitempty"`
}

// MarshalJSON writes the named keys and the extra ones in one object.
func (c AgentConfig) MarshalJSON() ([]byte, error) {
	named, err := json.Marshal(agentConfigFields{c.AllowedTools, c.DisallowedTools, c.SystemPrompt})
	if err != nil || len(c.Extra) == 0 {
		return named, err
	}
	all := map[string]any{}
	maps.Copy(all, c.Extra)
	var n map[string]any
	if err := json.Unmarshal(named, &n); err != nil {
		return nil, err
	}
	maps.Copy(all, n)
	return json.Marshal(all)
}

// UnmarshalJSON reads the named keys, with their types checked, and keeps the rest in Extra.
func (c *AgentConfig) UnmarshalJSON(b []byte) error {
	var f agentConfigFields
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("agent_config: %w", err)
	}
	var all map[string]any
	if err := json.Unmarshal(b, &all); err != nil {
		return fmt.Errorf("agent_config: %w", err)
	}
	for _, k := range []string{"allowed_tools", "disallowed_tools", "system_prompt"} {
		delete(all, k)
	}
	*c = AgentConfig{AllowedTools: f.AllowedTools, DisallowedTools: f.DisallowedTools, SystemPrompt: f.SystemPrompt}
	if len(all) > 0 {
		c.Extra = all
	}
	return nil
}

// Over returns c with every key it leaves unset taken from base: the named fields when empty,
// and the extra keys c does not name.
func (c AgentConfig) Over(base AgentConfig) AgentConfig {
	out := base
	if c.AllowedTools != nil {
		out.AllowedTools = c.AllowedTools
	}
	if c.DisallowedTools != nil {
		out.DisallowedTools = c.DisallowedTools
	}
	if c.SystemPrompt != "" {
		out.SystemPrompt = c.SystemPrompt
	}
	if len(c.Extra) > 0 {
		out.Extra = maps.Clone(base.Extra)
		if out.Extra == nil {
			out.Extra = map[string]any{}
		}
		maps.Copy(out.Extra, c.Extra)
	}
	return out
}

// Check reports malformed glob patterns, each with its location under at.
func (c AgentConfig) Check(at string) ValidationError {
	var verr ValidationError
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"allowed_tools", c.AllowedTools}, {"disallowed_tools", c.DisallowedTools}} {
		for i, p := range list.patterns {
			// path.Match reports a malformed pattern only when matching gets that far; matching
			// the pattern against itself makes it scan the whole pattern.
			if _, err := path.Match(p, p); err != nil {
				verr = append(verr, FieldError{Location: fmt.Sprintf("%s.%s[%d]", at, list.name, i), Message: "not a glob pattern: " + err.Error(), Value: p})
			}
		}
	}
	return verr
}

// ValidationCall is a tool call that, replayed in order by the oracle, should reach reward 1.0.
type ValidationCall struct {
	Name string `json:"name" minLength:"1" maxLength:"128" doc:"The tool to call"`
	// Arguments are the tool's own: their shape is the tool's input schema.
	Arguments map[string]any `json:"arguments,omitempty" doc:"Its arguments"`
}
