// Package httpapi serves the platform's REST API (/v2, specified in shared/spec/000: the contract for
// every route, field, default and bound) with Huma v2 on chi, and generates its OpenAPI 3.1 document
// from the operations' input and output structs: if the document is wrong, a struct is wrong.
//
// One file per resource group of the spec. Handlers parse, authorize, call the store (or start a
// workflow) and map to the response type; there is no SQL here and no HTTP type below this package.
// It may import models, temporal (names and inputs) and internal packages.
package httpapi

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/httpapi/docsui"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/tracing"
	"github.com/proctorhq/proctor/internal/webapp"
	"github.com/proctorhq/proctor/models"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// APIVersion is the version of the OpenAPI document, as in the spec's Versioning part.
const APIVersion = "2.0.0"

// HealthChecker is a dependency that /readyz asks; the Temporal client satisfies it.
type HealthChecker interface {
	CheckHealth(ctx context.Context) error
}

// Options are the server's dependencies and settings.
type Options struct {
	Store *models.Store
	// Metrics, when set, counts every request by route and status, and is served at /metrics
	// (in the Prometheus text format, without credentials: keep the port private).
	Metrics *metrics.Metrics
	// Tracing, when set, makes each request a server span (continuing an incoming traceparent)
	// named by its route; the workflows a request starts continue its trace.
	Tracing trace.TracerProvider
	// Temporal is checked by /readyz.
	Temporal HealthChecker
	// Workflows launches and cancels rollouts; without it those routes answer 503.
	Workflows Workflows
	// Builds starts and cancels builds; without it (or a Bucket) the build routes that need
	// it answer 503.
	Builds Builds
	// Bucket holds sources and artifacts; its signed URLs are handed to clients.
	Bucket blob.Bucket
	// Blob serves the local bucket's signed URLs under /blob/ when set.
	Blob   http.Handler
	Logger *slog.Logger
	// PublicURL is where clients reach this server; an https URL makes cookies Secure.
	PublicURL string
	// SessionTTL is how long a browser session lasts. Default 7 days.
	SessionTTL time.Duration
	// MaxBodyBytes bounds request bodies. Default 10 MiB.
	MaxBodyBytes int64
	// MaxJobAttempts bounds the attempts one run_list request launches. Default 100,000.
	MaxJobAttempts int
	// Secrets seals secret values at rest; without it the routes that take secrets answer 503.
	Secrets *secrets.Keyring
	// Uploads bounds task attachments.
	Uploads UploadLimits
	// DataQuota bounds each team's data files (zero fields: no bound).
	DataQuota models.DataQuota
	// CodecOrigin is the Temporal Web UI's origin (e.g. http://127.0.0.1:8233): with Secrets,
	// /codec/ serves it the payload codec so it shows encrypted payloads to team owners.
	CodecOrigin string
}

// Server is the HTTP API.
type Server struct {
	store         *models.Store
	bucket        blob.Bucket
	temporal      HealthChecker
	workflows     Workflows
	builds        Builds
	secrets       *secrets.Keyring
	dataQuota     models.DataQuota
	uploads       UploadLimits
	log           *slog.Logger
	sessionTTL    time.Duration
	secureCookies bool
	maxBodyBytes  int64
	maxAttempts   int
	throttle      *authThrottle
	publicURL     string
	router        chi.Router
	metrics       *metrics.Metrics
	tracer        trace.Tracer
	api           huma.API
	v2            *huma.Group
}

// New builds the router and registers every operation.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 7 * 24 * time.Hour
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 10 << 20
	}
	if o.MaxJobAttempts <= 0 {
		o.MaxJobAttempts = 100_000
	}
	if o.Tracing == nil {
		o.Tracing = noop.NewTracerProvider()
	}
	s := &Server{
		store: o.Store, bucket: o.Bucket, temporal: o.Temporal, workflows: o.Workflows, builds: o.Builds, secrets: o.Secrets, dataQuota: o.DataQuota, uploads: o.Uploads, log: o.Logger, sessionTTL: o.SessionTTL,
		secureCookies: strings.HasPrefix(o.PublicURL, "https://"), maxBodyBytes: o.MaxBodyBytes, maxAttempts: o.MaxJobAttempts, publicURL: strings.TrimRight(o.PublicURL, "/"),
		throttle: newAuthThrottle(), metrics: o.Metrics, tracer: o.Tracing.Tracer("github.com/proctorhq/proctor/httpapi"),
	}
	r := chi.NewRouter()
	r.Use(s.requestID, s.accessLog, s.recoverPanics, securityHeaders, s.rejectControlChars)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, bound("no route for "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, bound(r.Method+" is not allowed on "+r.URL.Path))
	})

	s.api = humachi.New(r, apiConfig())
	s.api.UseMiddleware(s.authMiddleware(s.api))
	s.v2 = huma.NewGroup(s.api, "/v2")
	s.registerHealth()
	s.registerTasksets()
	s.registerTasksetReads()
	s.registerTasks()
	s.registerTaskReview()
	s.registerMentions()
	s.registerReadyCheck()
	s.registerModels()
	s.registerJobs()
	s.registerTraces()
	s.registerTraceAnalysis()
	s.registerRollouts()
	s.registerRegistries()
	s.registerBuilds()
	s.registerBuildSource()
	s.registerBuildWorkspace()
	s.registerSecrets()
	s.registerInference()
	s.registerLimits()
	s.registerCheckpoints()
	s.registerUsage()
	s.registerInstances()
	s.registerResults()
	s.registerAnalytics()
	s.registerDataFiles()
	s.registerUploads()
	s.registerWorkers()
	allowUnknownRequestFields(s.api.OpenAPI())
	nullablePointers(s.api.OpenAPI())
	freeFormMaps(s.api.OpenAPI())

	docs := docsui.Handler("/openapi.json")
	r.Get("/docs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/docs/", http.StatusMovedPermanently)
	})
	r.Handle("/docs/*", http.StripPrefix("/docs", docs))
	if o.Secrets != nil {
		r.Handle("/codec/*", s.codecHandler(o.CodecOrigin))
	}
	// The web app, at / (its routes live in the URL's fragment).
	app := webapp.Handler(blob.SignedURLOrigin(o.Bucket))
	for _, p := range webapp.Paths() {
		r.Handle(p, app)
	}
	r.Post("/auth/session", s.handleLogin)
	r.Delete("/auth/session", s.handleLogout)
	if o.Blob != nil {
		r.Handle("/blob/*", o.Blob)
	}
	if o.Metrics != nil {
		r.Handle("/metrics", o.Metrics.Handler())
	}
	s.router = r
	return s
}

// allowUnknownRequestFields makes every object a request body can hold accept keys it does not
// name, so that a client of a newer or older version sending one more field is not refused:
// those keys are ignored, while the named ones keep their types and bounds. Responses keep
// additionalProperties false, so the document says exactly what the server sends, unless a
// schema is shared with a request.
func allowUnknownRequestFields(o *huma.OpenAPI) {
	var bodies []*huma.Schema
	for _, item := range o.Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch} {
			if op == nil || op.RequestBody == nil {
				continue
			}
			for _, mt := range op.RequestBody.Content {
				bodies = append(bodies, mt.Schema)
			}
		}
	}
	walkSchemas(o.Components.Schemas, bodies, func(sc *huma.Schema) {
		if addl, ok := sc.AdditionalProperties.(bool); ok && !addl && sc.Type == huma.TypeObject {
			sc.AdditionalProperties = true
		}
	})
}

// walkSchemas calls visit once for every schema reachable from roots (references followed
// through reg), before walking into its properties, items, additional properties and
// alternatives, as visit left them.
func walkSchemas(reg huma.Registry, roots []*huma.Schema, visit func(*huma.Schema)) {
	seen := map[*huma.Schema]bool{}
	var walk func(sc *huma.Schema)
	walk = func(sc *huma.Schema) {
		if sc == nil || seen[sc] {
			return
		}
		seen[sc] = true
		if sc.Ref != "" {
			walk(reg.SchemaFromRef(sc.Ref))
			return
		}
		visit(sc)
		for _, p := range sc.Properties {
			walk(p)
		}
		walk(sc.Items)
		if addl, ok := sc.AdditionalProperties.(*huma.Schema); ok {
			walk(addl)
		}
		for _, group := range [][]*huma.Schema{sc.OneOf, sc.AnyOf, sc.AllOf} {
			for _, sub := range group {
				walk(sub)
			}
		}
	}
	for _, sc := range roots {
		walk(sc)
	}
}

// nullablePointers documents as nullable every pointer field that is sent as null when unset
// (one without omitempty). Huma does so for most pointers, but not for those whose type provides
// its own schema (uuid.UUID), nor for pointers to objects.
func nullablePointers(o *huma.OpenAPI) {
	reg := o.Components.Schemas
	for name, sc := range reg.Map() {
		t := reg.TypeFromRef("#/components/schemas/" + name)
		if t == nil || t.Kind() != reflect.Struct {
			continue
		}
		for f := range structFields(t) {
			tag := f.Tag.Get("json")
			jsonName, opts, _ := strings.Cut(tag, ",")
			if f.Type.Kind() != reflect.Pointer || jsonName == "" || jsonName == "-" || strings.Contains(opts, "omitempty") {
				continue
			}
			prop := sc.Properties[jsonName]
			switch {
			case prop == nil || prop.Nullable:
			case prop.Ref != "":
				sc.Properties[jsonName] = &huma.Schema{Description: prop.Description,
					AnyOf: []*huma.Schema{{Ref: prop.Ref}, {Type: "null"}}}
			default:
				prop.Nullable = true
			}
		}
	}
}

// freeFormMaps writes the values of a free-form object (map[string]any) as additionalProperties:
// true rather than the empty schema {}: the same in JSON Schema, but validators that read {} as
// "not null" (kin-openapi's) would refuse a null value, which such maps may hold.
func freeFormMaps(o *huma.OpenAPI) {
	reg := o.Components.Schemas
	walkSchemas(reg, slices.Collect(maps.Values(reg.Map())), func(sc *huma.Schema) {
		addl, ok := sc.AdditionalProperties.(*huma.Schema)
		if ok && addl.Type == "" && addl.Ref == "" && len(addl.Properties) == 0 && addl.Items == nil && len(addl.OneOf)+len(addl.AnyOf)+len(addl.AllOf) == 0 {
			sc.AdditionalProperties = true
		}
	})
}

// structFields yields t's fields, those of embedded structs in their place.
func structFields(t reflect.Type) func(func(reflect.StructField) bool) {
	return func(yield func(reflect.StructField) bool) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && f.Tag.Get("json") == "" {
				for g := range structFields(f.Type) {
					if !yield(g) {
						return
					}
				}
				continue
			}
			if f.IsExported() && !yield(f) {
				return
			}
		}
	}
}

// Handler is the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// OpenAPI is the generated document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Spec returns the OpenAPI document as YAML without any dependency: it is what `proctor openapi`
// prints and what the committed openapi.yaml must equal.
func Spec() ([]byte, error) {
	return New(Options{Logger: slog.New(slog.DiscardHandler)}).OpenAPI().YAML()
}

func apiConfig() huma.Config {
	cfg := huma.DefaultConfig("Proctor API", APIVersion)
	cfg.Info.Description = "The REST API of Proctor, a self-hostable evaluation platform for AI agents. " +
		"Every public route is under /v2. Authenticate with an API key: `Authorization: Bearer <key>`. " +
		"Errors use the envelope `{\"error\": {\"code\", \"message\"}}`; validation failures (422) list each failing field. " +
		"Request bodies ignore keys they do not name, so clients of other versions keep working; named keys are checked."
	// The reference page is served offline by this package, not from Huma's CDN-backed renderer,
	// and responses carry no $schema links: bodies are exactly the spec's shapes.
	// Relative: the document describes whichever host serves it.
	cfg.Servers = []*huma.Server{{URL: "/", Description: "The Proctor instance serving this document"}}
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.CreateHooks = nil
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "A team API key, shown once when it is created (`proctor admin key create`)."},
		"session": {Type: "apiKey", In: "cookie", Name: SessionCookie,
			Description: "A signed-in browser session; `POST /auth/session` with `{\"api_key\"}` sets it."},
	}
	registry := cfg.Components.Schemas
	// uuid.UUID is a byte array that marshals as text; document and validate it as what clients
	// send, a string in uuid format, so that a malformed id is a 422 at its location.
	registry.RegisterTypeAlias(reflect.TypeFor[uuid.UUID](), reflect.TypeFor[uuidString]())
	cfg.OnAddOperation = append(cfg.OnAddOperation, func(_ *huma.OpenAPI, op *huma.Operation) {
		// Every error response carries the envelope except 422, which keeps the validation body.
		if r := op.Responses["422"]; r != nil {
			schema := registry.Schema(reflect.TypeOf(huma.ErrorModel{}), true, "ErrorModel")
			r.Content = map[string]*huma.MediaType{"application/problem+json": {Schema: schema}}
		}
		documentTransportErrors(op)
	})
	return cfg
}

// documentTransportErrors adds the error statuses any operation of its kind can answer before
// its handler runs: for a body, 400 (not JSON), 408 (not received in time), 413 (too large) and
// 415 (not JSON by its type); 429 where credentials are read (failed authentication throttled);
// and 431, which Go's HTTP server answers in plain text for oversized headers.
func documentTransportErrors(op *huma.Operation) {
	envelope := op.Responses["500"]
	if envelope == nil {
		return
	}
	add := func(status int, why string) {
		code := strconv.Itoa(status)
		if op.Responses[code] == nil {
			op.Responses[code] = &huma.Response{Description: http.StatusText(status) + ": " + why, Content: envelope.Content}
		}
	}
	if op.RequestBody != nil {
		add(http.StatusBadRequest, "the body is not well-formed JSON")
		add(http.StatusRequestTimeout, "the body did not arrive in time")
		add(http.StatusRequestEntityTooLarge, "the body is over the operation's limit")
		add(http.StatusUnsupportedMediaType, "the body's Content-Type is not JSON")
	}
	if len(op.Security) > 0 {
		add(http.StatusTooManyRequests, "too many failed authentications from this address; see Retry-After")
	}
	op.Responses["431"] = &huma.Response{Description: "Request Header Fields Too Large: answered by the HTTP server, in plain text",
		Content: map[string]*huma.MediaType{"text/plain": {Schema: &huma.Schema{Type: huma.TypeString}}}}
}

// uuidString is the schema uuid.UUID is documented and validated as.
type uuidString string

// Schema is a uuid-formatted string.
func (uuidString) Schema(huma.Registry) *huma.Schema {
	return &huma.Schema{Type: huma.TypeString, Format: "uuid"}
}

// op fills what every operation shares: the auth rule, its security requirement, and the error
// statuses it can answer with (401 wherever credentials are read).
func op(o huma.Operation, mode authMode) huma.Operation {
	o.Metadata = map[string]any{metaAuth: mode}
	o.Security = securityFor(mode)
	if mode != authNone {
		o.Errors = append([]int{http.StatusUnauthorized}, o.Errors...)
	}
	if o.MaxBodyBytes == 0 {
		o.MaxBodyBytes = 1 << 20
	}
	return o
}

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
