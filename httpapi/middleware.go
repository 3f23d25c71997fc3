package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/go-chi/chi/v5"

	"github.com/proctorhq/proctor/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

type (
	requestIDKey struct{}
	loggerKey    struct{}
)

// requestIDFrom is the id the requestID middleware gave the request ("" outside one).
func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// loggerFrom is the server's logger a request carries (for code Huma calls without the server).
func loggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// requestID takes a sane X-Request-Id from the client or makes one, and echoes it.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id == "" || len(id) > 128 || strings.ContainsFunc(id, func(c rune) bool { return c < 0x21 || c > 0x7e }) {
			b := make([]byte, 12)
			rand.Read(b) //nolint:errcheck // crypto/rand does not fail
			id = hex.EncodeToString(b)
		}
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(context.WithValue(r.Context(), requestIDKey{}, id), loggerKey{}, s.log)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog observes each request: one structured line, a count in the metrics and a server
// span, the last two by the route pattern it matched (known once the router has served it).
// The span continues the caller's traceparent, and the line carries its trace id.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// Probes and scrapes, every few seconds, are logged at debug level and not traced.
		probe := r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics"
		ctx, span := r.Context(), trace.SpanFromContext(r.Context())
		if !probe {
			ctx = tracing.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", bound(r.URL.Path))))
			defer span.End()
			r = r.WithContext(ctx)
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		status := cmp.Or(sw.status, http.StatusOK)
		route := ""
		if rctx := chi.RouteContext(r.Context()); rctx != nil {
			route = rctx.RoutePattern()
		}
		if route != "" {
			span.SetName(r.Method + " " + route)
			span.SetAttributes(attribute.String("http.route", route))
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
		if s.metrics != nil {
			s.metrics.Request(route, r.Method, status, time.Since(start))
		}
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		} else if probe {
			level = slog.LevelDebug
		}
		s.log.Log(ctx, level, "http request",
			"request_id", requestIDFrom(ctx), "method", bound(r.Method), "path", bound(r.URL.Path),
			"status", sw.status, "bytes", sw.bytes, "duration_ms", float64(time.Since(start).Microseconds())/1000)
	})
}

// recoverPanics turns a handler panic into a logged 500 with the envelope.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "panic in handler", "request_id", requestIDFrom(r.Context()),
					"panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				writeError(w, http.StatusInternalServerError, "internal error")
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// securityHeaders are sent with every response: no MIME sniffing, no referrer leaving the API,
// and no framing of its pages. (The docs page sets its own Content-Security-Policy.)
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// newRouter is a router with every request's middleware, in order, that answers an unknown
// route or method with the error envelope.
func (s *Server) newRouter() chi.Router {
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog, s.recoverPanics, securityHeaders, closeUnreadBodies, s.rejectControlChars)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, bound("no route for "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", strings.Join(allowedMethods(r, req), ", "))
		writeError(w, http.StatusMethodNotAllowed, bound(req.Method+" is not allowed on "+req.URL.Path))
	})
	return r
}

// allowedMethods lists the methods routes serve on req's path, for a 405's Allow header (RFC
// 9110 §15.5.6), which chi sends only from its own handler.
func allowedMethods(routes chi.Routes, req *http.Request) []string {
	path := req.URL.RawPath
	if path == "" {
		path = req.URL.Path
	}
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return out
}

// documentMethodNotAllowed says in the document what a method a path does not list answers. An
// operation cannot carry it (it is the answer when there is no operation), so the description
// says it and components.responses holds its shape, for clients that read one.
func documentMethodNotAllowed(cfg *huma.Config) {
	cfg.Info.Description += " A method a path does not list answers 405 Method Not Allowed in the envelope (code `method_not_allowed`), " +
		"with an `Allow` header naming the methods the path serves (components.responses.MethodNotAllowed)."
	if cfg.Components.Responses == nil {
		cfg.Components.Responses = map[string]*huma.Response{}
	}
	cfg.Components.Responses["MethodNotAllowed"] = &huma.Response{
		Description: "Method Not Allowed: the path serves other methods, which Allow names",
		Headers:     map[string]*huma.Param{"Allow": {Description: "The methods the path serves, comma-separated", Schema: &huma.Schema{Type: huma.TypeString}}},
		Content: map[string]*huma.MediaType{"application/json": {
			Schema: cfg.Components.Schemas.Schema(reflect.TypeFor[apiError](), true, "")}},
	}
}
