package envserver

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Paths served by the HTTP transports.
const (
	HTTPPath = "/mcp"     // streamable HTTP endpoint
	SSEPath  = "/sse"     // SSE endpoint (GET opens the stream, POST sends messages)
	DevPath  = "/proctor" // development endpoints: /proctor, /proctor/tools, /resources, /prompts
)

// RunOption selects how [Server.Run] serves.
type RunOption func(*runConfig)

type runConfig struct {
	transport string // "stdio", "http" or "sse"
	addr      string
	listener  net.Listener
}

// Stdio serves MCP over stdin and stdout, the default.
func Stdio() RunOption { return func(c *runConfig) { c.transport = "stdio" } }

// HTTP serves streamable HTTP at addr (for example ":8765") on path /mcp, with the development
// endpoints under /proctor.
func HTTP(addr string) RunOption {
	return func(c *runConfig) { c.transport, c.addr = "http", addr }
}

// SSE serves the SSE transport at addr on path /sse, with the development endpoints under
// /proctor.
func SSE(addr string) RunOption {
	return func(c *runConfig) { c.transport, c.addr = "sse", addr }
}

// Listener makes the HTTP or SSE transport serve on ln instead of listening on its address;
// Run closes it.
func Listener(ln net.Listener) RunOption { return func(c *runConfig) { c.listener = ln } }

// Transport returns the RunOption for a transport named on a command line: "stdio", "http"
// or "sse", the latter two on port (0 picks a free one; the URL is logged).
func Transport(name string, port int) (RunOption, error) {
	addr := ":" + strconv.Itoa(port)
	switch name {
	case "", "stdio":
		return Stdio(), nil
	case "http", "streamable-http":
		return HTTP(addr), nil
	case "sse":
		return SSE(addr), nil
	default:
		return nil, fmt.Errorf("unknown transport %q: want stdio, http or sse", name)
	}
}

// Run serves the environment until the client goes away (stdio), ctx is cancelled, or the
// process receives SIGTERM, in which case the shutdown hook runs first. SIGINT is left alone:
// by default it ends the process without the shutdown hook, as a hot reload should. Run returns
// nil when it stopped for one of those reasons, and an error when it could not serve or when a
// scenario names a hub function that does not exist.
func (s *Server) Run(ctx context.Context, opts ...RunOption) error {
	cfg := runConfig{transport: "stdio"}
	for _, opt := range opts {
		opt(&cfg)
	}
	if err := s.checkScenarios(); err != nil {
		return fmt.Errorf("run %s: %w", s.name, err)
	}
	select {
	case <-s.stopped:
		return fmt.Errorf("run %s: server already shut down", s.name)
	default:
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigterm := make(chan os.Signal, 1)
	signal.Notify(sigterm, syscall.SIGTERM)
	defer signal.Stop(sigterm)
	go func() {
		select {
		case <-sigterm:
			s.terminating.Store(true)
			s.logger.Info("SIGTERM received", "server", s.name)
			hookCtx, cancelHook := context.WithTimeout(context.WithoutCancel(ctx), s.shutdownTimeout)
			defer cancelHook()
			_ = s.Shutdown(hookCtx) // logged by Shutdown; not fatal
		case <-ctx.Done():
		}
	}()
	go func() {
		select {
		case <-s.stopped:
			cancel()
		case <-ctx.Done():
		}
	}()

	var err error
	switch cfg.transport {
	case "stdio":
		err = s.serveStdio(ctx)
	case "http", "sse":
		err = s.serveHTTP(ctx, cfg)
	default:
		err = fmt.Errorf("unknown transport %q", cfg.transport)
	}
	if s.terminating.Load() {
		// The client may have gone away while the hook runs; the process must not exit under it.
		<-s.stopped
	}
	if err != nil {
		return fmt.Errorf("run %s: %w", s.name, err)
	}
	return nil
}

func (s *Server) serveStdio(ctx context.Context) error {
	// The MCP stream keeps the original fd 1; fd 1 itself points at stderr while the server runs,
	// so that nothing else written to stdout (a tool's fmt.Print, a child process) reaches the
	// stream.
	out, err := dupStdout()
	if err != nil {
		return err
	}
	restore, err := stdoutToStderr()
	if err != nil {
		_ = out.Close()
		return err
	}
	defer restore()
	s.logger.Info("envserver serving", "server", s.name, "transport", "stdio")
	ss, err := s.mcp.Connect(ctx, &mcp.IOTransport{Reader: os.Stdin, Writer: out}, nil)
	if err != nil {
		_ = out.Close()
		return fmt.Errorf("connect stdio: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case <-ctx.Done():
		_ = ss.Close()
		<-done
		return nil
	case err := <-done:
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("stdio session: %w", err)
		}
		return nil
	}
}

func (s *Server) serveHTTP(ctx context.Context, cfg runConfig) error {
	ln := cfg.listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", cfg.addr); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.addr, err)
		}
	}
	handler, path := s.HTTPHandler(), HTTPPath
	if cfg.transport == "sse" {
		handler, path = s.SSEHandler(), SSEPath
	}
	hs := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	s.logger.Info("envserver serving", "server", s.name, "transport", cfg.transport,
		"url", "http://"+dialable(ln.Addr())+path, "dev", "http://"+dialable(ln.Addr())+DevPath)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve %s: %w", cfg.transport, err)
	case <-ctx.Done():
	}
	// Event streams never go idle, so a graceful shutdown can only be short.
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		_ = hs.Close()
	}
	<-served
	return nil
}

// dialable turns a listening address into one a client on this host can dial.
func dialable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}

// HTTPHandler returns the handler the HTTP transport serves: streamable HTTP on /mcp and the
// development endpoints under /proctor. Every session shares this server (and its once-only
// initialize hook).
func (s *Server) HTTPHandler() http.Handler {
	mux := http.NewServeMux()
	var mcpHandler http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, s.streamableOptions())
	if s.httpOpts.Stateless {
		mcpHandler = s.statelessInit(mcpHandler)
	}
	mux.Handle(HTTPPath, mcpHandler)
	s.devRoutes(mux, "http")
	return mux
}

// SSEHandler returns the handler the SSE transport serves: SSE on /sse and the development
// endpoints under /proctor.
func (s *Server) SSEHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle(SSEPath, mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s.mcp }, nil))
	s.devRoutes(mux, "sse")
	return mux
}

// Main is the whole main function of an environment program: it reads the flags --transport
// (stdio, http or sse; default stdio) and --port (default 8765; 0 picks a free one), builds the
// server with build and runs it, logging to stderr. SIGINT (a hot reload) stops serving without
// the shutdown hook; SIGTERM runs it first. On failure Main logs the error and exits with status 1.
func Main(build func(logger *slog.Logger) (*Server, error)) {
	os.Exit(MainArgs(filepath.Base(os.Args[0]), os.Args[1:], build))
}

// MainArgs is Main for a program that serves an environment as one of its commands: it reads
// the same flags from args, names the command name in its usage, and returns the exit status
// (2 for a flag error) instead of exiting.
func MainArgs(name string, args []string, build func(logger *slog.Logger) (*Server, error)) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	transport := fs.String("transport", "stdio", "MCP transport: stdio, http or sse")
	port := fs.Int("port", 8765, "port of the http and sse transports (0 picks a free one)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := runMain(build, logger, *transport, *port); err != nil {
		logger.Error("environment failed", "error", err)
		return 1
	}
	return 0
}

func runMain(build func(*slog.Logger) (*Server, error), logger *slog.Logger, transport string, port int) error {
	opt, err := Transport(transport, port)
	if err != nil {
		return err
	}
	srv, err := build(logger)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return srv.Run(ctx, opt)
}
