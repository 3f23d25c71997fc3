// Package agentport serves what a brought agent reaches during one attempt (README, "Bringing
// your agent"): the attempt's environment as an MCP server over streamable HTTP, and the models
// over the providers' own APIs (OpenAI chat completions, Anthropic messages, and their model
// lists), all behind one key that is valid for this attempt only and dies with it (Close).
//
// The port decides nothing about recording: it hands each tool call and each model call to
// its Handler (which makes it and writes the trace), numbers the model calls, and refuses the
// one past the attempt's step bound, ending the agent's run (LimitReached).
package agentport

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/egress"
	"github.com/proctorhq/proctor/internal/inference"
)

// Protocols of the model endpoints.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
)

// Handler makes and records the calls a brought agent makes through the port.
type Handler interface {
	// CallTool makes a tool call in the environment, and records it. A call to a tool the port
	// does not offer is handed over too: the Handler refuses it without reaching the
	// environment, and records the refusal (the port then answers the agent).
	CallTool(ctx context.Context, name string, args map[string]any) (*agent.ToolResult, error)
	// Model relays model call number step (from 0) in protocol to w, and records it; an error
	// is returned only when nothing was written (the port answers it).
	Model(ctx context.Context, step int, protocol string, body map[string]json.RawMessage, header http.Header, w http.ResponseWriter) error
}

// Config is one attempt's port.
type Config struct {
	// Tools are the environment's tools as the agent may see them (no setup or evaluate
	// dispatcher), and Instructions the environment's own.
	Tools        []agent.Tool
	Instructions string
	// Models are the model names the agent may call (the launch's); they are what the model
	// lists answer.
	Models []string
	// MaxSteps bounds the model calls: the call past it is refused and LimitReached closes.
	MaxSteps int
	Handler  Handler
	Logger   *slog.Logger
	// Egress, when set, serves the port's proxy requests (egress.IsProxyRequest): the agent's
	// way out to the network, for a task that allows it, on the same port as its endpoints.
	Egress http.Handler
}

// Port is one attempt's port. It listens where it is told to (Serve): on a listener inside the
// agent's sandbox, which confines the agent to the port, or on the worker's loopback
// (ListenLoopback), for an agent that shares the worker's network.
type Port struct {
	key string
	cfg Config
	srv *http.Server

	mu      sync.Mutex
	steps   int
	limited chan struct{}
	limitOn sync.Once
	// stopped closes with the first Stop a Handler answered, kept in stop.
	stopped chan struct{}
	stopOn  sync.Once
	stop    *Stop
}

// New makes a port with a fresh key; it serves nothing until Serve or ListenLoopback.
func New(cfg Config) (*Port, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	p := &Port{key: "pa-" + hex.EncodeToString(b), cfg: cfg, limited: make(chan struct{}), stopped: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "proctor-environment", Version: "1"}, &mcp.ServerOptions{Instructions: cfg.Instructions})
	offered := map[string]bool{}
	for _, t := range cfg.Tools {
		server.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, p.callTool)
		offered[t.Name] = true
	}
	server.AddReceivingMiddleware(p.recordRefused(offered))
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Logger: cfg.Logger})
	mux := http.NewServeMux()
	// The MCP endpoint carries the key in its path, so that an MCP client needs nothing but
	// the URL; the model endpoints take it as their SDKs send keys.
	mux.Handle("/mcp/"+p.key, mcpHandler)
	mux.Handle("POST /openai/chat/completions", p.authorized(p.model(OpenAI)))
	mux.Handle("GET /openai/models", p.authorized(http.HandlerFunc(p.openAIModels)))
	mux.Handle("POST /anthropic/v1/messages", p.authorized(p.model(Anthropic)))
	mux.Handle("GET /anthropic/v1/models", p.authorized(http.HandlerFunc(p.anthropicModels)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/mcp/") {
			writeError(w, http.StatusUnauthorized, "authentication_error", "this MCP endpoint's key is not valid (it is valid for its own attempt only)")
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "no such endpoint: the agent port serves /mcp/KEY, /openai/chat/completions, /openai/models, /anthropic/v1/messages and /anthropic/v1/models")
	})
	handler := http.Handler(mux)
	if cfg.Egress != nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if egress.IsProxyRequest(r) {
				cfg.Egress.ServeHTTP(w, r)
				return
			}
			mux.ServeHTTP(w, r)
		})
	}
	p.srv = &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	return p, nil
}

// Serve serves the port on ln until Close, which closes ln.
func (p *Port) Serve(ln net.Listener) {
	go p.srv.Serve(ln) //nolint:errcheck // ends with Close
}

// ListenLoopback serves the port on a fresh address of the worker's loopback, and returns its
// root URL, http://127.0.0.1:PORT.
func (p *Port) ListenLoopback() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("agent port: %w", err)
	}
	p.Serve(ln)
	return "http://" + ln.Addr().String(), nil
}

// Start makes a port and serves it on the worker's loopback; root is its URL.
func Start(cfg Config) (p *Port, root string, err error) {
	if p, err = New(cfg); err != nil {
		return nil, "", err
	}
	if root, err = p.ListenLoopback(); err != nil {
		return nil, "", err
	}
	return p, root, nil
}

// Key is the attempt's key.
func (p *Port) Key() string { return p.key }

// Env is what the agent's process is given to reach the port at root (its URL as the agent
// sees it): the MCP endpoint, the base URLs and keys the OpenAI and Anthropic SDKs read.
func (p *Port) Env(root string) map[string]string {
	return map[string]string{
		"PROCTOR_MCP_URL":    root + "/mcp/" + p.key,
		"PROCTOR_API_KEY":    p.key,
		"OPENAI_BASE_URL":    root + "/openai",
		"OPENAI_API_KEY":     p.key,
		"ANTHROPIC_BASE_URL": root + "/anthropic",
		"ANTHROPIC_API_KEY":  p.key,
	}
}

// Steps counts the model calls the port let through.
func (p *Port) Steps() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.steps
}

// LimitReached is closed when the agent asked for a model call past MaxSteps.
func (p *Port) LimitReached() <-chan struct{} { return p.limited }

// Close stops the port: its key answers nothing from then on, and calls in flight are cut.
func (p *Port) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := p.srv.Shutdown(ctx); err != nil {
		return p.srv.Close()
	}
	return nil
}

// authorized admits requests that carry the key as a bearer token or as x-api-key.
func (p *Port) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		if got == "" {
			got = r.Header.Get("X-Api-Key")
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(p.key)) != 1 {
			writeError(w, http.StatusUnauthorized, "authentication_error", "the key is not this attempt's (an attempt's key is valid during its attempt only)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// maxModelBody bounds a model request's body.
const maxModelBody = 32 << 20

// model serves one provider's model endpoint: the step is numbered (or refused past the
// bound) and handed to the Handler.
func (p *Port) model(protocol string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxModelBody))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", fmt.Sprintf("the request is over %d bytes", maxModelBody))
			return
		}
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil || body == nil {
			writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not a JSON object")
			return
		}
		step, ok := p.takeStep()
		if !ok {
			writeError(w, http.StatusBadRequest, "invalid_request_error",
				fmt.Sprintf("this attempt's step limit (max_steps %d) is reached: no more model calls; the attempt ends and is evaluated", p.cfg.MaxSteps))
			return
		}
		if err := p.cfg.Handler.Model(r.Context(), step, protocol, body, r.Header, w); err != nil {
			var bad *BadRequest
			if errors.As(err, &bad) {
				writeError(w, http.StatusBadRequest, "invalid_request_error", bad.Message)
				return
			}
			var stop *Stop
			if errors.As(err, &stop) {
				p.stopOn.Do(func() { p.stop = stop; close(p.stopped) })
				// 402, which the providers' SDKs do not retry (they retry 429 and 5xx).
				writeError(w, http.StatusPaymentRequired, stop.Kind, stop.Message)
				return
			}
			p.cfg.Logger.Warn("agent port: model call", "protocol", protocol, "step", step, "error", err)
			writeError(w, http.StatusBadGateway, "api_error", "the model cannot be called: "+err.Error())
		}
	})
}

// BadRequest is a Handler's refusal of a model call the agent must change (a model it may not
// call …); its message is the agent's to read.
type BadRequest struct{ Message string }

func (b *BadRequest) Error() string { return b.Message }

// Stop is a Handler's refusal of a model call that ends the agent's run (the attempt's job may
// spend no more, say): the agent is answered 402 with an error of type Kind and the Message, and
// Stopped closes.
type Stop struct{ Kind, Message string }

func (s *Stop) Error() string { return s.Message }

// Stopped is closed when a Handler refused a model call with a Stop; Stop then says which.
func (p *Port) Stopped() <-chan struct{} { return p.stopped }

// Stop is the Stop that closed Stopped (nil before).
func (p *Port) Stop() *Stop {
	select {
	case <-p.stopped:
		return p.stop
	default:
		return nil
	}
}

// takeStep numbers a model call, or refuses it past MaxSteps (and ends the agent's run).
func (p *Port) takeStep() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg.MaxSteps > 0 && p.steps >= p.cfg.MaxSteps {
		p.limitOn.Do(func() { close(p.limited) })
		return 0, false
	}
	p.steps++
	return p.steps - 1, true
}

// recordRefused hands the Handler a call to a tool the agent was not offered (the hidden setup
// and evaluate dispatchers, a guessed name), so that the refusal is in the trace where a
// reviewer looks for tampering; the agent is then answered as the MCP server answers any
// unknown tool (a JSON-RPC error). The Handler's CallTool refuses such a call itself: nothing
// reaches the environment.
func (p *Port) recordRefused(offered map[string]bool) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if call, ok := req.(*mcp.CallToolRequest); ok && method == "tools/call" && call.Params != nil && !offered[call.Params.Name] {
				var args map[string]any
				if raw := call.Params.Arguments; len(raw) > 0 {
					json.Unmarshal(raw, &args) //nolint:errcheck // recorded as they parse; the call is refused either way
				}
				if _, err := p.cfg.Handler.CallTool(ctx, call.Params.Name, args); err != nil {
					p.cfg.Logger.WarnContext(ctx, "record a refused tool call", "tool", call.Params.Name, "error", err)
				}
			}
			return next(ctx, method, req)
		}
	}
}

// callTool serves an MCP tools/call: the environment's answer, passed on as it came.
func (p *Port) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args map[string]any
	if raw := req.Params.Arguments; len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &args); err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the arguments must be a JSON object"}}}, nil
		}
	}
	res, err := p.cfg.Handler.CallTool(ctx, req.Params.Name, args)
	if err != nil {
		return nil, err
	}
	out := new(mcp.CallToolResult)
	if len(res.Raw) == 0 || json.Unmarshal(res.Raw, out) != nil {
		out = &mcp.CallToolResult{IsError: res.IsError, Content: []mcp.Content{&mcp.TextContent{Text: res.Text}}}
	}
	return out, nil
}

func (p *Port) openAIModels(w http.ResponseWriter, _ *http.Request) {
	data := make([]inference.OpenAIModel, len(p.cfg.Models))
	for i, m := range p.cfg.Models {
		data[i] = inference.OpenAIModel{ID: m, Object: "model", OwnedBy: "proctor"}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

func (p *Port) anthropicModels(w http.ResponseWriter, _ *http.Request) {
	data := make([]inference.AnthropicModel, len(p.cfg.Models))
	for i, m := range p.cfg.Models {
		data[i] = inference.AnthropicModel{ID: m, Type: "model", DisplayName: m, CreatedAt: time.Unix(0, 0).UTC()}
	}
	first, last := inference.AnthropicPage(data)
	writeJSON(w, http.StatusOK, map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
}

// writeError answers in a shape both providers' SDKs read: OpenAI's {"error": {"message",
// "type"}}, which Anthropic's SDK reads as well ({"type": "error", "error": {…}}).
func writeError(w http.ResponseWriter, status int, kind, msg string) {
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client may be gone
}
