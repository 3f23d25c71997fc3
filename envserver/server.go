package envserver

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Server is an environment server: an MCP server with the lifecycle, hubs, scenarios and
// transports of the environment-server contract. Create it with [New], register tools, hubs,
// resources and scenarios, then call [Server.Run]. Registration may also happen while the
// server runs (for example from the initialize hook); clients are told about the change.
//
// A Server's methods are safe for concurrent use.
type Server struct {
	name            string
	version         string
	instructions    string
	logger          *slog.Logger
	env             any
	shutdownTimeout time.Duration
	requiredEnv     []string
	httpOpts        HTTPOptions
	mcp             *mcp.Server

	mu         sync.Mutex
	names      map[string]string // tool names taken by visible tools and hub dispatchers → kind
	resources  map[string]bool   // resource URIs and templates registered through envserver
	completers map[completionKey]CompleteFunc
	agentView  map[*mcp.ServerSession]bool // sessions that asked for the agent's view (MetaAgentView)
	hubs       []*Hub
	scenarios  []scenarioEntry
	internal   map[*mcp.ServerSession]bool // introspection sessions, which skip the initialize hook
	onInit     InitFunc
	onShutdown ShutdownFunc

	// initMu is held while the initialize hook runs, so that a second session's initialize
	// waits for the environment to be ready instead of racing the first.
	initMu   sync.Mutex
	initDone bool
	initErr  error

	shutdownOnce sync.Once
	shutdownErr  error
	stopped      chan struct{} // closed once the shutdown hook has run
	terminating  atomic.Bool   // SIGTERM received: Run must wait for the shutdown hook
}

// InitFunc is an initialize hook. See [Server.OnInitialize].
type InitFunc func(ctx context.Context, ic *InitContext) error

// ShutdownFunc is a shutdown hook. See [Server.OnShutdown].
type ShutdownFunc func(ctx context.Context) error

// Option configures a [Server] at [New].
type Option func(*config)

type config struct {
	version         string
	instructions    string
	logger          *slog.Logger
	env             any
	shutdownTimeout time.Duration
	mcpOptions      mcp.ServerOptions
	requiredEnv     []string
	http            HTTPOptions
}

// WithInstructions sets the instructions sent to clients in the initialize result.
func WithInstructions(instructions string) Option {
	return func(c *config) { c.instructions = instructions }
}

// WithRequiredEnv declares the environment variables the environment needs to work (an API key,
// a region): scenarios://list carries them as required_env, Proctor records them in the build's
// lock, and `POST /v2/env-vars/check` reports those an environment has no variable for. The
// server itself starts whether or not they are set.
func WithRequiredEnv(names ...string) Option {
	return func(c *config) { c.requiredEnv = append(c.requiredEnv, names...) }
}

// WithVersion sets the version reported in the MCP handshake (default "dev").
func WithVersion(version string) Option { return func(c *config) { c.version = version } }

// WithLogger sets the logger of the server's own events (default: slog.Default(), which writes
// to stderr). It must never write to stdout, which belongs to the stdio transport.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithEnv sets the environment state that tools reach with [Env] and hubs with [Hub.Env].
func WithEnv(env any) Option { return func(c *config) { c.env = env } }

// WithShutdownTimeout bounds how long the shutdown hook may run after SIGTERM (default 10s;
// container runtimes kill the process after their own grace period anyway).
func WithShutdownTimeout(d time.Duration) Option {
	return func(c *config) { c.shutdownTimeout = d }
}

// WithMCPOptions passes options to the underlying MCP SDK server (the contract's "further
// arguments passed to the framework"). Instructions set with [WithInstructions] win. Unless
// opts restricts them itself, the protocol versions are narrowed to those that use the
// initialize handshake; see [New].
func WithMCPOptions(opts mcp.ServerOptions) Option {
	return func(c *config) { c.mcpOptions = opts }
}

// New creates an environment server named name (the name clients see in the MCP handshake).
//
// The server negotiates only protocol versions that begin with the initialize handshake
// (2025-11-25 and older): the sessionless 2026-07-28 protocol has no initialize request, so the
// initialize hook could never run. Clients that prefer it fall back to the handshake.
func New(name string, opts ...Option) *Server {
	cfg := config{version: "dev", shutdownTimeout: 10 * time.Second}
	for _, opt := range opts {
		opt(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	mopts := cfg.mcpOptions
	if cfg.instructions != "" {
		mopts.Instructions = cfg.instructions
	}
	if len(mopts.SupportedProtocolVersions) == 0 {
		mopts.SupportedProtocolVersions = handshakeVersions()
	}
	// Clients may subscribe to resources (Updated notifies them) and ask for completions (of
	// what CompletePromptArgument and CompleteResourceArgument register).
	var srv *Server
	if mopts.SubscribeHandler == nil && mopts.UnsubscribeHandler == nil {
		mopts.SubscribeHandler = func(context.Context, *mcp.SubscribeRequest) error { return nil }
		mopts.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
	}
	if mopts.CompletionHandler == nil {
		mopts.CompletionHandler = func(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			return srv.complete(ctx, req)
		}
	}
	s := &Server{
		name:            name,
		version:         cfg.version,
		instructions:    mopts.Instructions,
		logger:          cfg.logger,
		env:             cfg.env,
		shutdownTimeout: cfg.shutdownTimeout,
		requiredEnv:     slices.Clone(cfg.requiredEnv),
		httpOpts:        cfg.http,
		mcp:             mcp.NewServer(&mcp.Implementation{Name: name, Version: cfg.version}, &mopts),
		names:           map[string]string{},
		resources:       map[string]bool{},
		completers:      map[completionKey]CompleteFunc{},
		agentView:       map[*mcp.ServerSession]bool{},
		internal:        map[*mcp.ServerSession]bool{},
		stopped:         make(chan struct{}),
	}
	srv = s
	s.mcp.AddReceivingMiddleware(s.initializeMiddleware, s.agentViewMiddleware)
	return s
}

// handshakeVersions are the protocol versions the SDK supports that start with initialize.
func handshakeVersions() []string {
	return slices.DeleteFunc(mcp.SupportedProtocolVersions(), func(v string) bool {
		return v >= "2026-07-28"
	})
}

// MCP returns the underlying MCP SDK server, for everything envserver does not wrap: prompts,
// resource templates, middleware, completions. Tools added here directly bypass envserver's
// name checks.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Name returns the server's name.
func (s *Server) Name() string { return s.name }

// OnInitialize sets the initialize hook: fn runs during the first MCP initialize request the
// server receives, before the result is sent, and at most once per server however many clients
// connect; initialize requests of other sessions wait for it. While it runs, fd 1 points at
// stderr. If fn fails, that initialize request (and every later one) fails with its error, and
// the client is sent a progress notification "Initialization failed: <err>" when it gave a
// progress token. Set it before [Server.Run].
func (s *Server) OnInitialize(fn InitFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onInit = fn
}

// OnShutdown sets the shutdown hook: fn runs when the process receives SIGTERM during
// [Server.Run] (container termination), or when [Server.Shutdown] is called, and at most once
// per server. It never runs on SIGINT (hot reload) or when Run's context is cancelled. Its
// error is logged; it does not change how the server stops.
func (s *Server) OnShutdown(fn ShutdownFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onShutdown = fn
}

// Shutdown runs the shutdown hook (once per server: later and concurrent calls wait for the
// first and return its result) and then stops [Server.Run]. It returns the hook's error.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		hook := s.onShutdown
		s.mu.Unlock()
		if hook != nil {
			s.logger.Info("running shutdown hook", "server", s.name)
			if err := safeCall(func() error { return hook(ctx) }); err != nil {
				s.shutdownErr = fmt.Errorf("shutdown hook: %w", err)
				s.logger.Error("shutdown hook failed", "server", s.name, "error", err)
			}
		}
		close(s.stopped)
	})
	return s.shutdownErr
}

// AddTool registers a visible tool. It returns an error (and registers nothing) when the name
// is invalid or taken by another tool or hub, or when the input schema is not an object schema.
func (s *Server) AddTool(t Tool) error {
	def, err := checkDefinition(t)
	if err != nil {
		return fmt.Errorf("add tool: %w", err)
	}
	s.mu.Lock()
	if kind, ok := s.names[def.Name]; ok {
		s.mu.Unlock()
		return fmt.Errorf("add tool %q: %w (as a %s)", def.Name, ErrDuplicate, kind)
	}
	s.names[def.Name] = "tool"
	s.mu.Unlock()
	env, logger := s.env, s.logger
	handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return t.Handle(withEnv(withCallRequest(withLogger(ctx, logger), req), env), req)
	}
	if err := safeCall(func() error { s.mcp.AddTool(def, handler); return nil }); err != nil {
		s.mu.Lock()
		delete(s.names, def.Name)
		s.mu.Unlock()
		return fmt.Errorf("add tool %q: %w", def.Name, err)
	}
	return nil
}

// AddRawTool registers an MCP SDK tool and handler as they are: see [RawTool].
func (s *Server) AddRawTool(tool *mcp.Tool, handler mcp.ToolHandler) error {
	return s.AddTool(RawTool(tool, handler))
}

// ResourceFunc produces the content of a resource: a string or []byte is sent as text, any
// other value as JSON (for example a metadata object with provider, status, live view URL and
// timestamp).
type ResourceFunc func(ctx context.Context) (any, error)

// Resource registers a resource at uri, of the form <scheme>://<name>. It returns an error for
// a URI without a scheme or one already registered through envserver.
func (s *Server) Resource(uri, description string, fn ResourceFunc) error {
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" || fn == nil {
		return fmt.Errorf("add resource %q: want <scheme>://<name> and a function", uri)
	}
	name := strings.Trim(u.Host+u.Path, "/")
	if name == "" {
		name = uri
	}
	return s.addResource(&mcp.Resource{URI: uri, Name: name, Description: description, MIMEType: "application/json"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			v, err := fn(withEnv(ctx, s.env))
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", uri, err)
			}
			return resourceResult(uri, v)
		})
}

func (s *Server) addResource(r *mcp.Resource, h mcp.ResourceHandler) error {
	s.mu.Lock()
	if s.resources[r.URI] {
		s.mu.Unlock()
		return fmt.Errorf("add resource %q: %w", r.URI, ErrDuplicate)
	}
	s.resources[r.URI] = true
	s.mu.Unlock()
	if err := safeCall(func() error { s.mcp.AddResource(r, h); return nil }); err != nil {
		s.mu.Lock()
		delete(s.resources, r.URI)
		s.mu.Unlock()
		return fmt.Errorf("add resource %q: %w", r.URI, err)
	}
	return nil
}

func resourceResult(uri string, v any) (*mcp.ReadResourceResult, error) {
	var text, mime string
	switch v := v.(type) {
	case string:
		text, mime = v, "text/plain"
	case []byte:
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{bytesContents(uri, v)}}, nil
	case Blob:
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: v.MIMEType, Blob: v.Data}}}, nil
	case *Blob:
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: v.MIMEType, Blob: v.Data}}}, nil
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("read %s: marshal: %w", uri, err)
		}
		text, mime = string(b), "application/json"
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mime, Text: text}}}, nil
}

// safeCall turns a panic of fn (user hooks, or the SDK rejecting a definition) into an error,
// so that none crosses out of this package.
func safeCall(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return fn()
}
