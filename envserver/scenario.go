package envserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"text/template"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ScenariosURI is the resource listing an environment's scenarios with their argument schemas.
const ScenariosURI = "scenarios://list"

// Scenario is a task an environment offers: a prompt for the agent, parameterised by Args,
// with the setup call that prepares the state and the evaluate call that scores the attempt.
// Args must be a struct (or map); its JSON Schema is the scenario's argument schema.
//
// A platform runs a scenario with arguments A as: call Setup, give the rendered prompt to the
// agent, let it work with the visible tools, call Evaluate and read its [EvaluationResult].
// Scenarios are listed as MCP prompts (prompts/get renders the prompt; its _meta holds the two
// calls with their arguments resolved) and in the resource scenarios://list.
type Scenario[Args any] struct {
	// Name identifies the scenario (and its prompt); it must be a valid tool name.
	Name string
	// Title is an optional human-readable name.
	Title string
	// Description says what the scenario asks of the agent.
	Description string
	// Prompt is a text/template executed with the Args value, for example
	// "Add these todos: {{join .Items \", \"}}". Functions: json, join.
	Prompt string
	// Setup is the hub call that prepares the scenario; the zero Call means none.
	Setup Call
	// Evaluate is the hub call that scores the attempt; the zero Call means none.
	Evaluate Call
}

// Call is a call of a hub function: the dispatcher tool Tool (a hub name, for example "setup")
// with {"name": Name, "arguments": Arguments}. When Arguments is nil, the scenario's own
// arguments are passed, so a setup or evaluate function usually takes the scenario's Args.
type Call struct {
	Tool      string         `json:"tool"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// ToolArguments returns the arguments of the dispatcher tool call, {"name", "arguments"}.
func (c Call) ToolArguments() map[string]any {
	return map[string]any{"name": c.Name, "arguments": c.Arguments}
}

func (c Call) zero() bool { return c.Tool == "" && c.Name == "" && c.Arguments == nil }

// resolve fills in the scenario's arguments when the call has none of its own.
func (c Call) resolve(args map[string]any) *Call {
	if c.zero() {
		return nil
	}
	if c.Arguments == nil {
		c.Arguments = args
	}
	return &c
}

// ScenarioInfo is one entry of scenarios://list.
type ScenarioInfo struct {
	Name            string             `json:"name"`
	Title           string             `json:"title,omitempty"`
	Description     string             `json:"description,omitempty"`
	ArgumentsSchema *jsonschema.Schema `json:"arguments_schema"`
	// Prompt is the prompt template, as declared.
	Prompt   string `json:"prompt"`
	Setup    *Call  `json:"setup,omitempty"`
	Evaluate *Call  `json:"evaluate,omitempty"`
}

// ScenarioList is the body of scenarios://list.
type ScenarioList struct {
	Scenarios []ScenarioInfo `json:"scenarios"`
	// RequiredEnv are the environment variables the environment declared it needs
	// ([WithRequiredEnv]).
	RequiredEnv []string `json:"required_env,omitempty"`
}

// Meta keys of a prompts/get result for a scenario: the resolved setup and evaluate calls.
const (
	MetaSetup    = "proctor/setup"
	MetaEvaluate = "proctor/evaluate"
)

// RenderedScenario is a scenario instantiated with arguments.
type RenderedScenario struct {
	Prompt    string         `json:"prompt"`
	Arguments map[string]any `json:"arguments"`
	Setup     *Call          `json:"setup,omitempty"`
	Evaluate  *Call          `json:"evaluate,omitempty"`
}

type scenarioEntry struct {
	info   ScenarioInfo
	render func(args map[string]any) (*RenderedScenario, error)
}

// AddScenario declares a scenario of s. It returns an error for an invalid or duplicate name,
// an Args type that is not an object, or a prompt that is not a valid template. The hubs the
// calls name may be mounted later; [Server.Run] checks that they exist.
func AddScenario[Args any](s *Server, sc Scenario[Args]) error {
	entry, err := newScenarioEntry(sc)
	if err != nil {
		return err
	}
	if err := s.addScenario(entry); err != nil {
		return fmt.Errorf("add scenario %q: %w", sc.Name, err)
	}
	prompt := &mcp.Prompt{Name: sc.Name, Title: sc.Title, Description: sc.Description, Arguments: promptArguments(entry.info.ArgumentsSchema)}
	if err := safeCall(func() error { s.mcp.AddPrompt(prompt, entry.getPrompt); return nil }); err != nil {
		return fmt.Errorf("add scenario %q: %w", sc.Name, err)
	}
	return nil
}

// newScenarioEntry validates sc (its name, the schema of Args, the prompt template and the
// calls) and compiles it into what the server keeps.
func newScenarioEntry[Args any](sc Scenario[Args]) (scenarioEntry, error) {
	if err := ValidateToolName(sc.Name); err != nil {
		return scenarioEntry{}, fmt.Errorf("add scenario: %w", err)
	}
	schema, resolved, _, err := objectSchema[Args](false)
	if err != nil {
		return scenarioEntry{}, fmt.Errorf("add scenario %q: arguments: %w", sc.Name, err)
	}
	tmpl, err := template.New(sc.Name).Option("missingkey=error").Funcs(templateFuncs).Parse(sc.Prompt)
	if err != nil {
		return scenarioEntry{}, fmt.Errorf("add scenario %q: prompt: %w", sc.Name, err)
	}
	for _, c := range []Call{sc.Setup, sc.Evaluate} {
		if !c.zero() && (c.Tool == "" || c.Name == "") {
			return scenarioEntry{}, fmt.Errorf("add scenario %q: a call needs both Tool and Name", sc.Name)
		}
	}
	return scenarioEntry{
		info: ScenarioInfo{
			Name: sc.Name, Title: sc.Title, Description: sc.Description, ArgumentsSchema: schema,
			Prompt: sc.Prompt, Setup: sc.Setup.resolve(nil), Evaluate: sc.Evaluate.resolve(nil),
		},
		render: scenarioRenderer(sc, resolved, tmpl),
	}, nil
}

// scenarioRenderer returns the function that instantiates sc with arguments: defaults applied,
// validated against resolved, decoded into Args for the prompt template tmpl.
func scenarioRenderer[Args any](sc Scenario[Args], resolved *jsonschema.Resolved, tmpl *template.Template) func(map[string]any) (*RenderedScenario, error) {
	return func(args map[string]any) (*RenderedScenario, error) {
		if args == nil {
			args = map[string]any{}
		}
		if err := resolved.ApplyDefaults(&args); err != nil {
			return nil, fmt.Errorf("scenario %s: applying argument defaults: %w", sc.Name, err)
		}
		if err := resolved.Validate(args); err != nil {
			return nil, fmt.Errorf("scenario %s: invalid arguments: %w", sc.Name, err)
		}
		var typed Args
		if err := remarshal(args, &typed); err != nil {
			return nil, fmt.Errorf("scenario %s: decoding arguments: %w", sc.Name, err)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, typed); err != nil {
			return nil, fmt.Errorf("scenario %s: rendering prompt: %w", sc.Name, err)
		}
		return &RenderedScenario{Prompt: b.String(), Arguments: args, Setup: sc.Setup.resolve(args), Evaluate: sc.Evaluate.resolve(args)}, nil
	}
}

// addScenario keeps entry, refusing a name already taken; the first scenario also registers
// the resource scenarios://list.
func (s *Server) addScenario(entry scenarioEntry) error {
	s.mu.Lock()
	for _, e := range s.scenarios {
		if e.info.Name == entry.info.Name {
			s.mu.Unlock()
			return ErrDuplicate
		}
	}
	first := len(s.scenarios) == 0
	s.scenarios = append(s.scenarios, entry)
	s.mu.Unlock()
	if !first {
		return nil
	}
	err := s.addResource(&mcp.Resource{
		URI: ScenariosURI, Name: "scenarios", MIMEType: "application/json",
		Description: "The scenarios of this environment: arguments schema, prompt template, setup and evaluate calls.",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return resourceResult(ScenariosURI, s.Scenarios())
	})
	if err != nil && !errors.Is(err, ErrDuplicate) {
		return err
	}
	return nil
}

// getPrompt answers prompts/get for the scenario: the rendered prompt as a user message, the
// resolved setup and evaluate calls in _meta.
func (e scenarioEntry) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, err := decodePromptArguments(e.info.ArgumentsSchema, req.Params.Arguments)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", e.info.Name, err)
	}
	r, err := e.render(args)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{
		Meta:        r.meta(),
		Description: e.info.Description,
		Messages:    []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: r.Prompt}}},
	}, nil
}

// meta is the _meta of a prompts/get result: the calls a platform makes around the attempt.
func (r *RenderedScenario) meta() mcp.Meta {
	meta := mcp.Meta{}
	if r.Setup != nil {
		meta[MetaSetup] = r.Setup
	}
	if r.Evaluate != nil {
		meta[MetaEvaluate] = r.Evaluate
	}
	return meta
}

// Scenarios returns the declared scenarios, as scenarios://list lists them.
func (s *Server) Scenarios() ScenarioList {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := ScenarioList{Scenarios: make([]ScenarioInfo, 0, len(s.scenarios)), RequiredEnv: slices.Clone(s.requiredEnv)}
	for _, e := range s.scenarios {
		list.Scenarios = append(list.Scenarios, e.info)
	}
	return list
}

// RenderScenario instantiates a declared scenario with args (validated against its schema,
// defaults applied): the prompt and the setup and evaluate calls.
func (s *Server) RenderScenario(name string, args map[string]any) (*RenderedScenario, error) {
	s.mu.Lock()
	var render func(map[string]any) (*RenderedScenario, error)
	for _, e := range s.scenarios {
		if e.info.Name == name {
			render = e.render
		}
	}
	s.mu.Unlock()
	if render == nil {
		return nil, fmt.Errorf("render scenario %q: no such scenario", name)
	}
	return render(args)
}

// checkScenarios verifies that every scenario call names a mounted hub and one of its tools.
func (s *Server) checkScenarios() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	hubs := map[string]*Hub{}
	for _, h := range s.hubs {
		hubs[h.name] = h
	}
	var errs []error
	for _, e := range s.scenarios {
		for _, c := range []*Call{e.info.Setup, e.info.Evaluate} {
			if c == nil {
				continue
			}
			h, ok := hubs[c.Tool]
			if !ok {
				errs = append(errs, fmt.Errorf("scenario %s: no hub %q is mounted", e.info.Name, c.Tool))
				continue
			}
			if _, ok := h.lookup(c.Name); !ok {
				errs = append(errs, fmt.Errorf("scenario %s: hub %s has no function %q", e.info.Name, c.Tool, c.Name))
			}
		}
	}
	return errors.Join(errs...)
}

var templateFuncs = template.FuncMap{
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	"join": func(v []string, sep string) string { return strings.Join(v, sep) },
}

// promptArguments describes the scenario's arguments as MCP prompt arguments, which are
// strings: non-string arguments are passed JSON-encoded.
func promptArguments(schema *jsonschema.Schema) []*mcp.PromptArgument {
	names := make([]string, 0, len(schema.Properties))
	for name := range schema.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range schema.Required {
		required[r] = true
	}
	args := make([]*mcp.PromptArgument, 0, len(names))
	for _, name := range names {
		p := schema.Properties[name]
		desc := p.Description
		if !isStringSchema(p) {
			desc = strings.TrimSpace(desc + " (JSON-encoded)")
		}
		args = append(args, &mcp.PromptArgument{Name: name, Description: desc, Required: required[name]})
	}
	return args
}

func isStringSchema(s *jsonschema.Schema) bool {
	return s != nil && (s.Type == "string" || len(s.Types) == 1 && s.Types[0] == "string")
}

// decodePromptArguments turns prompt arguments (strings) back into JSON values: strings stay
// strings where the schema says string, everything else is parsed as JSON.
func decodePromptArguments(schema *jsonschema.Schema, in map[string]string) (map[string]any, error) {
	out := map[string]any{}
	for name, raw := range in {
		if p, ok := schema.Properties[name]; ok && isStringSchema(p) {
			out[name] = raw
			continue
		}
		var v any
		if err := json.Unmarshal([]byte(raw), &v); err != nil {
			return nil, fmt.Errorf("argument %q must be JSON: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}
