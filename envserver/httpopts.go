package envserver

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPOptions configure the streamable HTTP transport ([Server.HTTPHandler], [HTTP]).
type HTTPOptions struct {
	// EventStore keeps the events of SSE streams so that a client that lost its connection
	// resumes where it left off (Last-Event-ID). Default: in memory, 10 MiB; NoEventStore turns
	// resumption off.
	EventStore mcp.EventStore
	// NoEventStore serves streams that cannot be resumed.
	NoEventStore bool
	// SessionTimeout closes sessions idle for this long (0: never).
	SessionTimeout time.Duration
	// Stateless serves every request on its own, without Mcp-Session-Id: no server-to-client
	// requests, notifications only within a request's answer. The initialize hook runs before
	// the first request is served (without progress: there is no initialize request).
	Stateless bool
	// JSONResponse answers requests with application/json instead of an SSE stream.
	JSONResponse bool
}

// WithHTTPOptions configures the streamable HTTP transport.
func WithHTTPOptions(o HTTPOptions) Option { return func(c *config) { c.http = o } }

func (s *Server) streamableOptions() *mcp.StreamableHTTPOptions {
	o := s.httpOpts
	opts := &mcp.StreamableHTTPOptions{SessionTimeout: o.SessionTimeout, Stateless: o.Stateless, JSONResponse: o.JSONResponse, EventStore: o.EventStore}
	if opts.EventStore == nil && !o.NoEventStore && !o.Stateless {
		opts.EventStore = mcp.NewMemoryEventStore(nil)
	}
	return opts
}

// statelessInit runs the initialize hook before a stateless server's first request (there is no
// initialize request to run it on); a failed hook fails every request, as it does initialize.
// Once the hook has succeeded, requests no longer take the hook's lock.
func (s *Server) statelessInit(next http.Handler) http.Handler {
	var ready atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !ready.Load() {
			if err := s.runInitHook(r.Context(), nil, nil); err != nil {
				http.Error(w, initFailure(err), http.StatusServiceUnavailable)
				return
			}
			ready.Store(true)
		}
		next.ServeHTTP(w, r)
	})
}
