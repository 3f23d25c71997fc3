package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Conventional hub names of the tool lifecycle: setup tools prepare a scenario's state,
// evaluate tools score the attempt with an [EvaluationResult]. Agents are not meant to call
// either; platforms call them through the hub's dispatcher.
const (
	SetupHub    = "setup"
	EvaluateHub = "evaluate"
)

// MetaRole is the _meta key on a hub's dispatcher tool that tells platforms what the hub is:
// "setup", "evaluate" (the lifecycle hubs, to keep out of an agent's tool list) or "hub".
const MetaRole = "proctor/role"

// Hub is a namespace of hidden tools. Mounting it on a server ([Server.Mount]) adds one visible
// dispatcher tool named after the hub, called with {"name": <inner tool>, "arguments": {...}}
// (arguments may also be a JSON string), and a resource file:///<hub>/functions that lists the
// inner tools with their schemas. Inner tools are absent from tools/list and cannot be called
// directly. Tools may be added before or after mounting.
type Hub struct {
	name string

	mu     sync.Mutex
	env    any
	tools  map[string]Tool
	order  []string
	server *Server
}

// NewHub creates an unmounted hub. The name becomes the dispatcher tool's name, so it must be
// a valid tool name; [Server.Mount] checks it.
func NewHub(name string) *Hub {
	return &Hub{name: name, tools: map[string]Tool{}}
}

// Name returns the hub's name.
func (h *Hub) Name() string { return h.name }

// SetEnv sets the state the hub's tools reach with [Env] (the contract's hub.env).
func (h *Hub) SetEnv(env any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.env = env
}

// Env returns the hub's state: the value given to [Hub.SetEnv], or else the env of the server
// the hub is mounted on ([WithEnv]).
func (h *Hub) Env() any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.env != nil || h.server == nil {
		return h.env
	}
	return h.server.env
}

// AddTool adds a hidden tool to the hub. It returns an error for an invalid name, a name the
// hub already has, or an input schema that is not an object schema.
func (h *Hub) AddTool(t Tool) error {
	def, err := checkDefinition(t)
	if err != nil {
		return fmt.Errorf("hub %s: add tool: %w", h.name, err)
	}
	h.mu.Lock()
	if _, ok := h.tools[def.Name]; ok {
		h.mu.Unlock()
		return fmt.Errorf("hub %s: add tool %q: %w", h.name, def.Name, ErrDuplicate)
	}
	h.tools[def.Name] = t
	h.order = append(h.order, def.Name)
	srv := h.server
	h.mu.Unlock()
	if srv != nil {
		// The dispatcher's schema enumerates the inner names: re-register it.
		if err := srv.addDispatcher(h); err != nil {
			return fmt.Errorf("hub %s: add tool %q: %w", h.name, def.Name, err)
		}
	}
	return nil
}

// AddRawTool adds an MCP SDK tool and handler to the hub as they are: see [RawTool].
func (h *Hub) AddRawTool(tool *mcp.Tool, handler mcp.ToolHandler) error {
	return h.AddTool(RawTool(tool, handler))
}

// Tools returns the definitions of the hub's tools, in registration order.
func (h *Hub) Tools() []*mcp.Tool {
	h.mu.Lock()
	defer h.mu.Unlock()
	defs := make([]*mcp.Tool, 0, len(h.order))
	for _, name := range h.order {
		defs = append(defs, h.tools[name].MCPTool())
	}
	return defs
}

func (h *Hub) lookup(name string) (Tool, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tools[name]
	return t, ok
}

func (h *Hub) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.order)
}

// FunctionsURI returns the URI of the resource listing a hub's tools.
func FunctionsURI(hub string) string { return "file:///" + hub + "/functions" }

// Mount attaches a hub: its dispatcher tool becomes visible and its functions resource
// readable. A hub can be mounted on one server only, and its name must not be taken by a tool
// or another hub.
func (s *Server) Mount(h *Hub) error {
	if h == nil {
		return errors.New("mount: nil hub")
	}
	if err := ValidateToolName(h.name); err != nil {
		return fmt.Errorf("mount hub: %w", err)
	}
	s.mu.Lock()
	if kind, ok := s.names[h.name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("mount hub %q: %w (as a %s)", h.name, ErrDuplicate, kind)
	}
	h.mu.Lock()
	if h.server != nil {
		h.mu.Unlock()
		s.mu.Unlock()
		return fmt.Errorf("mount hub %q: already mounted on server %q", h.name, h.server.name)
	}
	h.server = s
	h.mu.Unlock()
	s.names[h.name] = "hub"
	s.hubs = append(s.hubs, h)
	s.mu.Unlock()

	if err := s.addDispatcher(h); err != nil {
		return fmt.Errorf("mount hub %q: %w", h.name, err)
	}
	uri := FunctionsURI(h.name)
	err := s.addResource(&mcp.Resource{
		URI:         uri,
		Name:        h.name + "-functions",
		Description: fmt.Sprintf("The functions of the %s hub, callable through the %s tool, with their schemas.", h.name, h.name),
		MIMEType:    "application/json",
	}, func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return resourceResult(uri, hubFunctions{Hub: h.name, Functions: functionsOf(h.Tools())})
	})
	if err != nil {
		return fmt.Errorf("mount hub %q: %w", h.name, err)
	}
	return nil
}

// hubFunctions is the body of file:///<hub>/functions.
type hubFunctions struct {
	Hub       string     `json:"hub"`
	Functions []function `json:"functions"`
}

type function struct {
	Name         string `json:"name"`
	Title        string `json:"title,omitempty"`
	Description  string `json:"description,omitempty"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema,omitempty"`
}

func functionsOf(defs []*mcp.Tool) []function {
	fns := make([]function, 0, len(defs))
	for _, d := range defs {
		fns = append(fns, function{Name: d.Name, Title: d.Title, Description: d.Description, InputSchema: d.InputSchema, OutputSchema: d.OutputSchema})
	}
	return fns
}

// addDispatcher (re-)registers the visible tool of hub h; the SDK replaces a tool of the same
// name and tells clients the list changed.
func (s *Server) addDispatcher(h *Hub) error {
	names := h.names()
	nameSchema := map[string]any{
		"type":        "string",
		"description": fmt.Sprintf("The %s function to call; see %s for each one's arguments.", h.name, FunctionsURI(h.name)),
	}
	if len(names) > 0 {
		nameSchema["enum"] = names
	}
	role := "hub"
	if h.name == SetupHub || h.name == EvaluateHub {
		role = h.name
	}
	def := &mcp.Tool{
		Name:        h.name,
		Description: dispatcherDescription(h.name, names),
		Meta:        mcp.Meta{MetaRole: role},
		InputSchema: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"name": nameSchema,
				// An object, as the contract says; a string holding one is still accepted (some
				// clients stringify nested objects) but not advertised, so that schema checkers and
				// model providers that reject type unions take the schema as it is.
				"arguments": map[string]any{
					"type":        "object",
					"description": "The function's arguments (see the function's entry in the functions resource).",
				},
			},
			"required": []string{"name"},
		},
	}
	return safeCall(func() error { s.mcp.AddTool(def, s.dispatch(h)); return nil })
}

func dispatcherDescription(hub string, names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Call a function of the %s hub by name, with its arguments.", hub)
	if len(names) > 0 {
		fmt.Fprintf(&b, " Functions: %s.", strings.Join(names, ", "))
	}
	return b.String()
}

// dispatch is the handler of a hub's visible tool. Every mistake of the caller is a tool error
// (IsError), which an agent can read and correct, not a protocol error.
func (s *Server) dispatch(h *Hub) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var call struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if len(req.Params.Arguments) > 0 {
			if err := json.Unmarshal(req.Params.Arguments, &call); err != nil {
				return toolErrorf("%s: arguments must be an object {\"name\": ..., \"arguments\": {...}}: %v", h.name, err), nil
			}
		}
		names := h.names()
		if call.Name == "" {
			return toolErrorf("%s: missing \"name\"; one of: %s", h.name, strings.Join(names, ", ")), nil
		}
		t, ok := h.lookup(call.Name)
		if !ok {
			return toolErrorf("%s has no function %q; available: %s", h.name, call.Name, strings.Join(names, ", ")), nil
		}
		args, err := normalizeArguments(call.Arguments)
		if err != nil {
			return toolErrorf("%s %s: %v", h.name, call.Name, err), nil
		}
		inner := &mcp.CallToolRequest{
			Session: req.Session,
			Extra:   req.Extra,
			Params:  &mcp.CallToolParamsRaw{Meta: req.Params.Meta, Name: call.Name, Arguments: args},
		}
		return t.Handle(withEnv(withCallRequest(withLogger(ctx, s.logger), inner), h.Env()), inner)
	}
}

// normalizeArguments accepts an object, a string holding an object (some models send that),
// or nothing, and returns an object.
func normalizeArguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage("{}"), nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("invalid \"arguments\" string: %w", err)
		}
		inner := bytes.TrimSpace([]byte(s))
		if len(inner) == 0 {
			return json.RawMessage("{}"), nil
		}
		if !json.Valid(inner) {
			return nil, fmt.Errorf("\"arguments\" is a string but not valid JSON: %q", s)
		}
		raw = inner
	}
	if raw[0] != '{' {
		return nil, fmt.Errorf("\"arguments\" must be a JSON object, got %s", raw)
	}
	return raw, nil
}
