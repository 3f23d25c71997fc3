package envserver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Default display size, used when the client's _meta does not give one.
const (
	DefaultDisplayWidth  = 1920
	DefaultDisplayHeight = 1080
)

// InitContext is what the initialize hook learns about the client that triggered it.
type InitContext struct {
	// Meta is the _meta of the client's initialize request; nil when it sent none.
	Meta mcp.Meta
	// Session is the MCP session being initialized. It is not yet initialized while the hook
	// runs: use it to send notifications, not requests.
	Session *mcp.ServerSession
	// Params are the client's initialize parameters (client info, capabilities, version).
	Params *mcp.InitializeParams
	// ProgressToken is Meta["progressToken"], or nil.
	ProgressToken any
	// DisplayWidth and DisplayHeight come from Meta["display_width"] and
	// Meta["display_height"], or default to 1920×1080.
	DisplayWidth, DisplayHeight int

	mu   sync.Mutex
	last float64 // last progress sent, reused by the failure notification
}

// Progress sends an MCP notifications/progress with the client's progress token (for
// example Progress(ctx, 40, 100, "seeding db")), and nothing when the client gave no token.
// Pass the hook's ctx, or one derived from it: the HTTP transports use it to deliver the
// notification on the initialize request's response stream.
func (ic *InitContext) Progress(ctx context.Context, progress, total float64, message string) error {
	if ic.ProgressToken == nil || ic.Session == nil {
		return nil
	}
	ic.mu.Lock()
	ic.last = progress
	ic.mu.Unlock()
	err := ic.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
		ProgressToken: ic.ProgressToken,
		Progress:      progress,
		Total:         total,
		Message:       message,
	})
	if err != nil {
		return fmt.Errorf("send initialize progress: %w", err)
	}
	return nil
}

func newInitContext(ss *mcp.ServerSession, params *mcp.InitializeParams) *InitContext {
	ic := &InitContext{Session: ss, Params: params, DisplayWidth: DefaultDisplayWidth, DisplayHeight: DefaultDisplayHeight}
	if params == nil {
		return ic
	}
	ic.Meta = params.Meta
	ic.ProgressToken = params.GetProgressToken()
	if w, ok := metaInt(params.Meta, "display_width"); ok {
		ic.DisplayWidth = w
	}
	if h, ok := metaInt(params.Meta, "display_height"); ok {
		ic.DisplayHeight = h
	}
	return ic
}

// metaInt reads a positive integer from _meta, accepting the number forms JSON decoders produce
// and numeric strings, which some clients send.
func metaInt(m mcp.Meta, key string) (int, bool) {
	var n int
	switch v := m[key].(type) {
	case float64:
		n = int(v)
	case int:
		n = v
	case int64:
		n = int(v)
	case json.Number:
		i, err := v.Int64()
		if err != nil {
			return 0, false
		}
		n = int(i)
	case string:
		i, err := strconv.Atoi(v)
		if err != nil {
			return 0, false
		}
		n = i
	default:
		return 0, false
	}
	return n, n > 0
}

// initializeMiddleware runs the initialize hook inside the initialize request, before the SDK
// builds the result, so that the result is sent only once the environment is ready.
func (s *Server) initializeMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "initialize" {
			return next(ctx, method, req)
		}
		ss, _ := req.GetSession().(*mcp.ServerSession)
		params, _ := req.GetParams().(*mcp.InitializeParams)
		s.mu.Lock()
		internal := s.internal[ss]
		s.mu.Unlock()
		s.noteAgentView(ss, params)
		if !internal {
			if err := s.runInitHook(ctx, ss, params); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: initFailure(err)}
			}
		}
		return next(ctx, method, req)
	}
}

// runInitHook runs the hook at most once per server. The outcome is kept: an environment whose
// setup failed stays failed for every later client rather than half-initialized.
func (s *Server) runInitHook(ctx context.Context, ss *mcp.ServerSession, params *mcp.InitializeParams) error {
	s.initMu.Lock()
	defer s.initMu.Unlock()
	ic := newInitContext(ss, params)
	if !s.initDone {
		s.initDone = true
		s.mu.Lock()
		hook := s.onInit
		s.mu.Unlock()
		if hook != nil {
			s.logger.Info("running initialize hook", "server", s.name)
			err := withStdoutToStderr(func() error {
				return safeCall(func() error { return hook(ctx, ic) })
			})
			if err != nil {
				s.initErr = err
				s.logger.Error("initialize hook failed", "server", s.name, "error", err)
			}
		}
	}
	if s.initErr != nil {
		ic.mu.Lock()
		last := ic.last
		ic.mu.Unlock()
		if err := ic.Progress(ctx, last, 100, initFailure(s.initErr)); err != nil {
			s.logger.Warn("cannot report initialize failure", "error", err)
		}
	}
	return s.initErr
}

// initFailure is the message clients see, in the progress notification and the error, when the
// initialize hook failed.
func initFailure(err error) string { return "Initialization failed: " + err.Error() }
