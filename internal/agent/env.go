package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The environment-server conventions this package relies on. They restate envserver's
// constants (MetaRole, SetupHub, EvaluateHub, MetaSetup, MetaEvaluate), which agent may not
// import; a test checks them against the real example environment.
const (
	// MetaRole is the _meta key on a hub's dispatcher tool that says what the hub is.
	MetaRole = "proctor/role"
	// SetupHub and EvaluateHub are the lifecycle hubs, and the roles of their dispatchers.
	SetupHub    = "setup"
	EvaluateHub = "evaluate"
	// MetaSetup and MetaEvaluate are the _meta keys of a scenario's prompts/get result that
	// hold its resolved setup and evaluate calls.
	MetaSetup    = "proctor/setup"
	MetaEvaluate = "proctor/evaluate"
)

// handshakeProtocolVersion is the MCP version Connect asks for. Environments must see an
// initialize request (their initialize hook runs in it, with the display size from _meta), and
// the 2026-07-28 protocol has none: asking for it would cost a failed server/discover round
// trip before the SDK fell back to this version anyway.
const handshakeProtocolVersion = "2025-11-25"

// ErrEnvClosed is wrapped by the errors of calls made after the connection to the environment
// was lost: the process exited, its pipes closed, or [Env.Close] was called. The rollout treats
// it as an infrastructure failure (sandbox lost), not as the agent's.
var ErrEnvClosed = errors.New("environment connection closed")

// Env is an MCP client session to one environment. Its methods are safe for concurrent use.
type Env struct {
	session *mcp.ClientSession
	logger  *slog.Logger
}

// ConnectOptions configures [Connect].
type ConnectOptions struct {
	// ClientName is the client name sent in initialize; "proctor" when empty.
	ClientName string
	// Meta is the _meta of the initialize request: display_width, display_height,
	// progressToken and whatever else the environment reads.
	Meta map[string]any
	// Logger receives the session's logs; slog.Default() when nil.
	Logger *slog.Logger
	// OnProgress, when set, receives the environment's progress notifications (those of the
	// initialize hook when Meta holds a progressToken, and any sent during tool calls).
	OnProgress func(progress, total float64, message string)
}

// Connect starts an MCP session over an environment's stdio pipes: r is the environment's
// stdout, w its stdin. It sends initialize with opts.Meta and returns once the environment has
// answered, that is once its initialize hook has finished; bound the wait with ctx
// (startup_timeout_s). Connect owns r and w from then on: [Env.Close] closes them, and so does
// a failed Connect.
func Connect(ctx context.Context, r io.ReadCloser, w io.WriteCloser, opts ConnectOptions) (*Env, error) {
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}
	name := opts.ClientName
	if name == "" {
		name = "proctor"
	}
	copts := &mcp.ClientOptions{Logger: logger}
	if opts.OnProgress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			opts.OnProgress(req.Params.Progress, req.Params.Total, req.Params.Message)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, copts)
	if len(opts.Meta) > 0 {
		// A copy, so that the caller's later edits do not reach the request.
		meta := mcp.Meta(maps.Clone(opts.Meta))
		// The SDK's Connect builds the initialize request itself and takes no _meta: set it on
		// the way out.
		client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if p, ok := req.GetParams().(*mcp.InitializeParams); ok && method == "initialize" {
					p.Meta = meta
				}
				return next(ctx, method, req)
			}
		})
	}
	session, err := client.Connect(ctx, &mcp.IOTransport{Reader: r, Writer: w}, &mcp.ClientSessionOptions{ProtocolVersion: handshakeProtocolVersion})
	if err != nil {
		// The SDK closes the transport on most failures, not all; closing twice is harmless.
		_ = r.Close()
		_ = w.Close()
		return nil, fmt.Errorf("connect to environment: %w", classify(err))
	}
	info := session.InitializeResult()
	if info != nil && info.ServerInfo != nil {
		logger.Debug("environment connected", "server", info.ServerInfo.Name, "version", info.ServerInfo.Version, "protocol", info.ProtocolVersion)
	}
	return &Env{session: session, logger: logger}, nil
}

// Instructions returns the instructions the environment sent in its initialize result.
func (e *Env) Instructions() string {
	if info := e.session.InitializeResult(); info != nil {
		return info.Instructions
	}
	return ""
}

// Tool is a tool as a model sees it.
type Tool struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	InputSchema map[string]any `json:"input_schema"`
}

// Tools lists the tools an agent may see: every tool of the environment except the
// dispatchers of the setup and evaluate hubs, recognised by their _meta["proctor/role"] or,
// for environments not built with envserver, by their names. Other hubs stay: their
// dispatchers are tools like any other.
func (e *Env) Tools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	for t, err := range e.session.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("list tools: %w", classify(err))
		}
		if hidden(t) {
			continue
		}
		schema, err := toMap(t.InputSchema)
		if err != nil {
			return nil, fmt.Errorf("list tools: tool %q: input schema: %w", t.Name, err)
		}
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		tools = append(tools, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return tools, nil
}

func hidden(t *mcp.Tool) bool {
	if role, _ := t.Meta[MetaRole].(string); role == SetupHub || role == EvaluateHub {
		return true
	}
	return t.Name == SetupHub || t.Name == EvaluateHub
}

// ToolResult is the outcome of a tool call that the environment answered.
type ToolResult struct {
	// IsError is true when the tool failed: the agent reads the error and may correct itself.
	IsError bool `json:"is_error,omitempty"`
	// Refused is true when the call was turned away before any tool ran: a tool the agent was
	// not offered (the hidden setup and evaluate dispatchers among them), arguments that are not
	// a JSON object, or a call the environment refused at the protocol level. IsError is then
	// true too. Reviewers look here for reward tampering.
	Refused bool `json:"refused,omitempty"`
	// Text is the result's text content, the parts joined by newlines, with a note for each
	// part that a model is not sent (audio, a binary resource) and the text of embedded text
	// resources.
	Text string `json:"text,omitempty"`
	// Images are the result's images, those of embedded image resources included.
	Images []Image `json:"images,omitempty"`
	// Structured is the result's structured content, when it is a JSON object.
	Structured map[string]any `json:"structured,omitempty"`
	// Raw is the whole MCP CallToolResult as JSON, for the trace.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// CallTool calls a tool by name. A failure of the tool, or a call the environment refuses at
// the protocol level (an unknown tool, invalid arguments: a JSON-RPC error in answer to the
// call), is a ToolResult with IsError set, because it is the caller's mistake to read and
// correct, and the session is fine. Go errors are for everything else: the connection lost
// (wrapping [ErrEnvClosed]), ctx done, a malformed answer.
func (e *Env) CallTool(ctx context.Context, name string, args map[string]any) (*ToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := e.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var wire *jsonrpc.Error
		if errors.As(err, &wire) {
			e.logger.Debug("tool call refused", "tool", name, "code", wire.Code, "error", wire.Message)
			return refusedResult(wire.Message), nil
		}
		return nil, fmt.Errorf("call tool %s: %w", name, classify(err))
	}
	out, err := toolResult(res)
	if err != nil {
		return nil, fmt.Errorf("call tool %s: %w", name, err)
	}
	return out, nil
}

// CallHub calls the function name of hub through the hub's dispatcher tool, with
// {"name": name, "arguments": args}. Errors as for [Env.CallTool].
func (e *Env) CallHub(ctx context.Context, hub, name string, args map[string]any) (*ToolResult, error) {
	if args == nil {
		args = map[string]any{}
	}
	return e.CallTool(ctx, hub, map[string]any{"name": name, "arguments": args})
}

// Call makes a [Call]: through its hub when it names one, else as a visible tool.
func (e *Env) Call(ctx context.Context, c Call) (*ToolResult, error) {
	if c.Hub != "" {
		return e.CallHub(ctx, c.Hub, c.Name, c.Arguments)
	}
	return e.CallTool(ctx, c.Name, c.Arguments)
}

// CallAgentTool makes a tool call a model asked for, if the model may make it: a tool that is
// not among visible (the tools the model was offered, after [FilterTools]) or whose arguments
// did not parse is answered with a tool error, without reaching the environment. This keeps an
// agent from calling the evaluate hub or a disallowed tool by guessing its name.
func (e *Env) CallAgentTool(ctx context.Context, visible []Tool, tc ToolCall) (*ToolResult, error) {
	if !slices.ContainsFunc(visible, func(t Tool) bool { return t.Name == tc.Name }) {
		names := make([]string, len(visible))
		for i, t := range visible {
			names[i] = t.Name
		}
		return refusedResult(fmt.Sprintf("unknown tool %q; available tools: %s", tc.Name, strings.Join(names, ", "))), nil
	}
	if tc.Arguments == nil && tc.InvalidArguments != "" {
		return refusedResult(fmt.Sprintf("the arguments of %s must be a JSON object, got: %s", tc.Name, truncate(tc.InvalidArguments, 200))), nil
	}
	return e.CallTool(ctx, tc.Name, tc.Arguments)
}

// Close ends the session and closes the environment's pipes; an environment served over stdio
// exits when its stdin closes. Closing a session whose connection is already lost (the
// process died, its pipes were closed by whoever waited for it) is not an error.
func (e *Env) Close() error {
	if err := e.session.Close(); err != nil && !errors.Is(classify(err), ErrEnvClosed) {
		return fmt.Errorf("close environment session: %w", err)
	}
	return nil
}

// Scenario is a scenario instantiated with arguments.
type Scenario struct {
	// Prompt is the rendered prompt, the text of the prompt's messages.
	Prompt string `json:"prompt"`
	// Setup and Evaluate are the scenario's resolved calls, in order.
	Setup    []Call `json:"setup,omitempty"`
	Evaluate []Call `json:"evaluate,omitempty"`
}

// Call is a call the platform makes: a hub function (Hub "setup" or "evaluate", called
// through the hub's dispatcher) or, with Hub empty, a visible tool.
type Call struct {
	Hub       string         `json:"hub,omitempty"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments,omitempty"`
}

// Scenario renders the scenario name with args (prompts/get) and reads its setup and evaluate
// calls from the result's _meta. Prompt arguments travel as strings: string values are sent as
// they are, anything else JSON-encoded, which is how envserver decodes them. An unknown
// scenario or invalid arguments is an error (the environment answers prompts/get with one).
func (e *Env) Scenario(ctx context.Context, name string, args map[string]any) (*Scenario, error) {
	pargs := make(map[string]string, len(args))
	for k, v := range args {
		if s, ok := v.(string); ok {
			pargs[k] = s
			continue
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: argument %q: %w", name, k, err)
		}
		pargs[k] = string(b)
	}
	res, err := e.session.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: pargs})
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, classify(err))
	}
	sc := &Scenario{}
	var parts []string
	for _, m := range res.Messages {
		if tc, ok := m.Content.(*mcp.TextContent); ok && tc.Text != "" {
			parts = append(parts, tc.Text)
		}
	}
	sc.Prompt = strings.Join(parts, "\n\n")
	if sc.Setup, err = metaCalls(res.Meta, MetaSetup); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	if sc.Evaluate, err = metaCalls(res.Meta, MetaEvaluate); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	return sc, nil
}

// scenarioCall is envserver's Call on the wire: the dispatcher tool, the hub function, its
// arguments.
type scenarioCall struct {
	Tool      string         `json:"tool"`
	Name      string         `json:"name"`
	Arguments map[string]any `json:"arguments"`
}

// metaCalls reads the calls under key: one call object, or a list of them.
func metaCalls(meta mcp.Meta, key string) ([]Call, error) {
	v, ok := meta[key]
	if !ok || v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("_meta[%q]: %w", key, err)
	}
	var list []scenarioCall
	if len(b) > 0 && b[0] == '[' {
		err = json.Unmarshal(b, &list)
	} else {
		var one scenarioCall
		err = json.Unmarshal(b, &one)
		list = []scenarioCall{one}
	}
	if err != nil {
		return nil, fmt.Errorf("_meta[%q] is not a call {tool, name, arguments}: %w", key, err)
	}
	calls := make([]Call, 0, len(list))
	for _, c := range list {
		if c.Tool == "" || c.Name == "" {
			return nil, fmt.Errorf("_meta[%q]: a call needs both tool and name, got %s", key, b)
		}
		calls = append(calls, Call{Hub: c.Tool, Name: c.Name, Arguments: c.Arguments})
	}
	return calls, nil
}

func toolResult(res *mcp.CallToolResult) (*ToolResult, error) {
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	out := &ToolResult{IsError: res.IsError, Raw: raw}
	out.Text, out.Images = readContent(res.Content)
	if res.StructuredContent != nil {
		if m, err := toMap(res.StructuredContent); err == nil {
			out.Structured = m
		}
	}
	return out, nil
}

// refusedResult is the ToolResult of a call refused before or by the protocol, shaped like a
// tool error so that the model sees one kind of failure, and marked Refused for the trace.
func refusedResult(msg string) *ToolResult {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: msg}}, IsError: true}
	raw, _ := json.Marshal(res)
	return &ToolResult{IsError: true, Refused: true, Text: msg, Raw: raw}
}

// toMap turns a decoded JSON value (a map, a json.RawMessage, a struct) into a JSON object.
// It returns nil, nil for nil and an error for anything that is not an object.
func toMap(v any) (map[string]any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	return m, nil
}

// classify marks a lost connection with ErrEnvClosed, keeping the original error in the chain.
func classify(err error) error {
	if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, fs.ErrClosed) || errors.Is(err, syscall.EPIPE) {
		return fmt.Errorf("%w: %w", ErrEnvClosed, err)
	}
	return err
}
