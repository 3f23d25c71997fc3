package envserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is anything that carries an MCP tool definition and handles its calls: the Go
// counterpart of the contract's BaseTool. [Server.AddTool] and [Hub.AddTool] accept any Tool;
// [NewTool] builds one from a typed function and [RawTool] wraps an MCP SDK tool as it is.
//
// Embed a *BaseTool in a struct to give a tool its own state.
type Tool interface {
	// MCPTool returns the tool's definition. Its name must match ^[a-zA-Z0-9_-]{1,128}$ and its
	// input schema must describe an object.
	MCPTool() *mcp.Tool
	// Handle answers one tools/call request.
	Handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error)
}

// BaseTool is a [Tool] made of an MCP tool definition and its handler.
type BaseTool struct {
	tool    *mcp.Tool
	handler mcp.ToolHandler
}

// MCPTool returns the tool definition.
func (t *BaseTool) MCPTool() *mcp.Tool { return t.tool }

// Handle calls the tool's handler.
func (t *BaseTool) Handle(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return t.handler(ctx, req)
}

// RawTool wraps an MCP SDK tool definition and handler so that it can be registered as it is:
// no schema is derived, arguments are neither validated nor decoded, and the handler's result
// goes to the client unchanged. The definition must not be modified after registration.
func RawTool(tool *mcp.Tool, handler mcp.ToolHandler) *BaseTool {
	return &BaseTool{tool: tool, handler: handler}
}

// ToolFunc is the shape of a typed tool: In is decoded from the call's arguments (its JSON
// Schema, derived from the type and its `json` and `jsonschema` struct tags, is the tool's
// input schema) and Out becomes the result's structured content (and a JSON text block).
//
// In must be a struct or a map (or any, for "no arguments"); Out a struct or a map (or any, for
// no output schema), because clients accept only object schemas there. A returned error becomes
// a tool error (a result with IsError set) that the agent sees, except a *jsonrpc.Error, which
// is sent as a protocol error. The call's MCP request is available through [CallRequest].
type ToolFunc[In, Out any] func(ctx context.Context, in In) (Out, error)

// ToolOption adjusts a tool definition built by [NewTool] or [AddTool].
type ToolOption func(*mcp.Tool)

// WithTitle sets a tool's human-readable title.
func WithTitle(title string) ToolOption { return func(t *mcp.Tool) { t.Title = title } }

// WithAnnotations sets a tool's behaviour hints (read-only, destructive, idempotent, ...).
func WithAnnotations(a *mcp.ToolAnnotations) ToolOption {
	return func(t *mcp.Tool) { t.Annotations = a }
}

// NewTool builds a [Tool] from a typed function, deriving its input and output schemas.
func NewTool[In, Out any](name, description string, fn ToolFunc[In, Out], opts ...ToolOption) (*BaseTool, error) {
	if err := ValidateToolName(name); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("tool %q: nil function", name)
	}
	tool := &mcp.Tool{Name: name, Description: description}
	for _, opt := range opts {
		opt(tool)
	}
	inSchema, inResolved, _, err := objectSchema[In](false)
	if err != nil {
		return nil, fmt.Errorf("tool %q: input schema: %w", name, err)
	}
	tool.InputSchema = inSchema
	outSchema, outResolved, outZero, err := objectSchema[Out](true)
	if err != nil {
		return nil, fmt.Errorf("tool %q: output schema: %w", name, err)
	}
	if reflect.TypeFor[Out]() != reflect.TypeFor[any]() {
		tool.OutputSchema = outSchema
	} else {
		outResolved = nil
	}
	return &BaseTool{tool: tool, handler: typedHandler(fn, inResolved, outResolved, outZero)}, nil
}

// Registry is where tools can be registered: a [*Server] (visible tools) or a [*Hub] (hidden
// tools reached through the hub's dispatcher).
type Registry interface {
	AddTool(t Tool) error
	AddRawTool(tool *mcp.Tool, handler mcp.ToolHandler) error
}

// AddTool registers a typed function as a tool of r and returns fn unchanged, so that the
// function stays callable (and composable) in Go. It returns an error when the name is invalid
// or already taken, or when a schema cannot be derived from In or Out; nothing is registered
// then.
func AddTool[In, Out any](r Registry, name, description string, fn ToolFunc[In, Out], opts ...ToolOption) (ToolFunc[In, Out], error) {
	t, err := NewTool(name, description, fn, opts...)
	if err != nil {
		return fn, err
	}
	if err := r.AddTool(t); err != nil {
		return fn, err
	}
	return fn, nil
}

// MustAddTool is [AddTool] for the main package of an environment, where a registration error
// is a programming error: it panics instead of returning the error.
func MustAddTool[In, Out any](r Registry, name, description string, fn ToolFunc[In, Out], opts ...ToolOption) ToolFunc[In, Out] {
	if _, err := AddTool(r, name, description, fn, opts...); err != nil {
		panic(err)
	}
	return fn
}

// ErrInvalidName is returned (wrapped) for tool, hub and scenario names outside
// ^[a-zA-Z0-9_-]{1,128}$.
var ErrInvalidName = errors.New("invalid name")

// ErrDuplicate is returned (wrapped) when a name or URI is registered twice.
var ErrDuplicate = errors.New("already registered")

// ValidateToolName reports whether name matches ^[a-zA-Z0-9_-]{1,128}$, the names every MCP
// client accepts (the SDK itself also allows dots, which some clients reject).
func ValidateToolName(name string) error {
	if name == "" || len(name) > 128 {
		return fmt.Errorf("%w %q: must be 1 to 128 characters", ErrInvalidName, name)
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("%w %q: only letters, digits, '_' and '-' are allowed", ErrInvalidName, name)
		}
	}
	return nil
}

// checkDefinition rejects what the SDK would panic on, so that a bad raw tool is an error at
// registration rather than a crash.
func checkDefinition(t Tool) (*mcp.Tool, error) {
	if t == nil || t.MCPTool() == nil {
		return nil, errors.New("nil tool")
	}
	def := t.MCPTool()
	if err := ValidateToolName(def.Name); err != nil {
		return nil, err
	}
	switch s := def.InputSchema.(type) {
	case nil:
		return nil, fmt.Errorf("tool %q: missing input schema", def.Name)
	case *jsonschema.Schema:
		if s == nil || s.Type != "object" {
			return nil, fmt.Errorf("tool %q: input schema must have type \"object\"", def.Name)
		}
	default:
		var m map[string]any
		if err := remarshal(def.InputSchema, &m); err != nil {
			return nil, fmt.Errorf("tool %q: input schema is not a JSON object: %w", def.Name, err)
		}
		if m["type"] != "object" {
			return nil, fmt.Errorf("tool %q: input schema must have type \"object\"", def.Name)
		}
	}
	return def, nil
}

// objectSchema derives the JSON Schema of T the way the MCP SDK does (pointers followed, any
// meaning "any object") and insists on an object, which is all that clients accept for tool
// input and output schemas.
func objectSchema[T any](output bool) (*jsonschema.Schema, *jsonschema.Resolved, any, error) {
	rt := reflect.TypeFor[T]()
	var zero any
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
		zero = reflect.Zero(rt).Interface()
	}
	var schema *jsonschema.Schema
	if rt == reflect.TypeFor[any]() {
		schema = &jsonschema.Schema{Type: "object"}
	} else {
		s, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
		if err != nil {
			return nil, nil, nil, err
		}
		schema = s
	}
	if schema.Type != "object" {
		return nil, nil, nil, fmt.Errorf("%v is not a struct or map (schema type %q)", rt, schema.Type)
	}
	if output {
		nonNullArrays(schema)
	}
	resolved, err := schema.Resolve(&jsonschema.ResolveOptions{ValidateDefaults: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return schema, resolved, zero, nil
}

// typedHandler turns fn into an MCP handler with the semantics of the SDK's typed tools:
// defaults applied and arguments validated before the call, output validated after it, errors
// reported to the agent as tool errors.
func typedHandler[In, Out any](fn ToolFunc[In, Out], in, out *jsonschema.Resolved, outZero any) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var raw json.RawMessage
		if req != nil && req.Params != nil {
			raw = req.Params.Arguments
		}
		args, err := decodeArguments[In](raw, in)
		if err != nil {
			return toolError(err), nil
		}
		res, err := fn(withCallRequest(ctx, req), args)
		if err != nil {
			var wire *jsonrpc.Error
			if errors.As(err, &wire) {
				return nil, wire
			}
			return toolError(err), nil
		}
		var value any = res
		if outZero != nil && reflect.ValueOf(value).IsNil() {
			// A nil *T must not reach the client as null where an object is promised.
			value = outZero
		}
		if value == nil {
			return &mcp.CallToolResult{Content: []mcp.Content{}}, nil
		}
		body, err := json.Marshal(value)
		if err != nil {
			return nil, fmt.Errorf("marshal tool output: %w", err)
		}
		if string(body) == "null" {
			// A nil map: the schema promises an object.
			body = []byte("{}")
		}
		if out != nil {
			var v any
			if err := json.Unmarshal(body, &v); err != nil {
				return nil, fmt.Errorf("decode tool output: %w", err)
			}
			// A nil slice is sent as [] where the schema promises an array (see nonNullArrays).
			if filled, changed := fillNullArrays(out.Schema(), v); changed {
				v = filled
				if body, err = json.Marshal(v); err != nil {
					return nil, fmt.Errorf("marshal tool output: %w", err)
				}
			}
			if err := out.Validate(v); err != nil {
				return nil, fmt.Errorf("tool output does not match its schema: %w", err)
			}
		}
		var content []mcp.Content
		if cc, ok := value.(contentCarrier); ok {
			content = append(content, cc.toolContent()...)
			if string(body) == "{}" && len(content) > 0 {
				// Blocks only: no JSON text of an empty object after them.
				return &mcp.CallToolResult{StructuredContent: json.RawMessage(body), Content: content}, nil
			}
		}
		return &mcp.CallToolResult{
			StructuredContent: json.RawMessage(body),
			Content:           append(content, &mcp.TextContent{Text: string(body)}),
		}, nil
	}
}

// decodeArguments applies schema defaults, validates and decodes raw call arguments. Absent or
// null arguments count as {} so that defaults still apply.
func decodeArguments[T any](raw json.RawMessage, resolved *jsonschema.Resolved) (T, error) {
	var zero T
	m := map[string]any{}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return zero, fmt.Errorf("arguments must be a JSON object: %w", err)
		}
	}
	if resolved != nil {
		if err := resolved.ApplyDefaults(&m); err != nil {
			return zero, fmt.Errorf("applying argument defaults: %w", err)
		}
		if err := resolved.Validate(m); err != nil {
			return zero, fmt.Errorf("validating arguments: %w", err)
		}
	}
	var v T
	if err := remarshal(m, &v); err != nil {
		return zero, fmt.Errorf("decoding arguments: %w", err)
	}
	return v, nil
}

func toolError(err error) *mcp.CallToolResult {
	var res mcp.CallToolResult
	res.SetError(err)
	return &res
}

func toolErrorf(format string, args ...any) *mcp.CallToolResult {
	return toolError(fmt.Errorf(format, args...))
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

type ctxKey int

const (
	callRequestKey ctxKey = iota
	envKey
)

func withCallRequest(ctx context.Context, req *mcp.CallToolRequest) context.Context {
	return context.WithValue(ctx, callRequestKey, req)
}

// CallRequest returns the MCP request of the tool call that ctx belongs to, for typed tools
// that need the session (progress, logging) or the call's _meta. It returns nil outside a
// tool call.
func CallRequest(ctx context.Context) *mcp.CallToolRequest {
	req, _ := ctx.Value(callRequestKey).(*mcp.CallToolRequest)
	return req
}

// Env returns the environment state visible to the tool call that ctx belongs to: the hub's
// env for a hub tool ([Hub.SetEnv], falling back to the server's), the server's env
// ([WithEnv]) for a visible tool. ok is false when there is none or it is not a T.
func Env[T any](ctx context.Context) (T, bool) {
	v, ok := ctx.Value(envKey).(T)
	return v, ok
}

func withEnv(ctx context.Context, env any) context.Context {
	if env == nil {
		return ctx
	}
	return context.WithValue(ctx, envKey, env)
}

// EvaluationResult is what an evaluate tool returns: the reward of the attempt and whether the
// task is finished, as the tool's structured content.
// TaskFaultPrefix starts the text of the tool error a [TaskFault] becomes.
const TaskFaultPrefix = "task fault: "

// TaskFault is the error an evaluate function returns when the task itself is broken rather than
// the attempt poor (a grader that wrote no score, or two; a check past its time): a platform ends
// the attempt in error, with Reason, instead of scoring it 0. Its tool error's text starts with
// TaskFaultPrefix.
type TaskFault struct{ Reason string }

func (f *TaskFault) Error() string { return TaskFaultPrefix + f.Reason }

type EvaluationResult struct {
	Reward  float64        `json:"reward" jsonschema:"score of the attempt, usually between 0 and 1"`
	Done    bool           `json:"done" jsonschema:"whether the task is finished"`
	Content string         `json:"content,omitempty" jsonschema:"human-readable explanation of the score"`
	Info    map[string]any `json:"info,omitempty" jsonschema:"details of the evaluation"`
}

// nonNullArrays makes the slices of a derived schema plain arrays: the schema package gives a Go
// slice the type ["null","array"] (a nil slice marshals to null), a union that schema checkers
// flag as unportable and that tells clients nothing useful. Typed outputs send a nil slice as []
// instead (fillNullArrays); a field that may be absent says so with omitempty.
func nonNullArrays(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	if len(s.Types) == 2 && slices.Contains(s.Types, "null") && slices.Contains(s.Types, "array") {
		s.Type, s.Types = "array", nil
	}
	nonNullArrays(s.Items)
	nonNullArrays(s.AdditionalProperties)
	for _, p := range s.Properties {
		nonNullArrays(p)
	}
	for _, d := range s.Defs {
		nonNullArrays(d)
	}
}

// fillNullArrays replaces the nulls of v where s promises an array by empty arrays.
func fillNullArrays(s *jsonschema.Schema, v any) (any, bool) {
	if s == nil {
		return v, false
	}
	switch x := v.(type) {
	case nil:
		if s.Type == "array" {
			return []any{}, true
		}
	case map[string]any:
		changed := false
		for k, pv := range x {
			ps := s.Properties[k]
			if ps == nil {
				ps = s.AdditionalProperties
			}
			if nv, ok := fillNullArrays(ps, pv); ok {
				x[k], changed = nv, true
			}
		}
		return x, changed
	case []any:
		changed := false
		for i, item := range x {
			if nv, ok := fillNullArrays(s.Items, item); ok {
				x[i], changed = nv, true
			}
		}
		return x, changed
	}
	return v, false
}
