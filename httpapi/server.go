// Package httpapi serves the platform's REST API (/v2, specified in shared/spec/000: the contract for
// every route, field, default and bound) with Huma v2 on chi, and generates its OpenAPI 3.1 document
// from the operations' input and output structs: if the document is wrong, a struct is wrong.
//
// One file per resource group of the spec, and per sub-resource where a group is large (tasks.go,
// taskversions.go, review.go, comments.go; builds.go, buildsource.go, ...), named as in models:
// each registers its own routes, and routes.go lists them in the spec's order. Beside them:
// server.go (construction), middleware.go, openapi.go (the document's configuration and rules),
// auth.go and errors.go. Handlers parse, authorize, call the store (or start a workflow) and map
// to the response type; there is no SQL here and no HTTP type below this package.
// It may import models, temporal (names and inputs) and internal packages.
package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humachi"
	"github.com/go-chi/chi/v5"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/proctorhq/proctor/models/datafiles"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
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
	// Metrics, when set, counts every request by route and status. It is served at /metrics (in
	// the Prometheus text format) only to a request that carries MetricsToken as its bearer
	// token: metrics name every team's models and their spend. Without a token, /metrics here
	// answers 404 (a process serves them on a listener of its own: --metrics-addr).
	Metrics      *metrics.Metrics
	MetricsToken string
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
	// BodyBytesInFlight bounds the request bodies buffered at once, in bytes (a body weighs its
	// declared length); a request past it waits up to BodyWait, then gets 503. Defaults 64 MiB
	// and 10 s. (bodygate.go)
	BodyBytesInFlight int64
	BodyWait          time.Duration
	// BodyStreams bounds the form uploads received at once (streamed to temporary files, not
	// buffered). Default 4.
	BodyStreams int
	// BodyMinRate is the slowest a request body may arrive, in bytes a second on average, after
	// BodyGrace; a slower one gets 408. Defaults 16 KiB/s and 5 s.
	BodyMinRate int64
	BodyGrace   time.Duration
	// MaxJobAttempts bounds the attempts one run_list request launches. Default 100,000.
	MaxJobAttempts int
	// Secrets seals secret values at rest; without it the routes that take secrets answer 503.
	Secrets *secrets.Keyring
	// Uploads bounds task attachments.
	Uploads UploadLimits
	// DataQuota bounds each team's data files (zero fields: no bound).
	DataQuota datafiles.DataQuota
	// CodecOrigin is the Temporal Web UI's origin (e.g. http://127.0.0.1:8233): with Secrets,
	// /codec/ serves it the payload codec so it shows encrypted payloads to team owners.
	CodecOrigin string
}

// Server is the HTTP API.
type Server struct {
	store         *models.Store
	rollouts      *rollouts.Store
	datafiles     *datafiles.Store
	credentials   *credentials.Store
	registry      *registry.Store
	catalog       *catalog.Store
	llms          *llms.Store
	billing       *billing.Store
	bucket        blob.Bucket
	temporal      HealthChecker
	workflows     Workflows
	builds        Builds
	secrets       *secrets.Keyring
	dataQuota     datafiles.DataQuota
	uploads       UploadLimits
	log           *slog.Logger
	sessionTTL    time.Duration
	secureCookies bool
	maxBodyBytes  int64
	bodies        bodyLimits
	maxAttempts   int
	throttle      *authThrottle
	crossOrigin   *http.CrossOriginProtection
	publicURL     string
	router        chi.Router
	metrics       *metrics.Metrics
	tracer        trace.Tracer
	api           huma.API
	v2            *huma.Group
	// streamsEnd is closed when the server starts shutting down: answers that would otherwise
	// stream for as long as a job runs end, and their clients resume elsewhere.
	streamsEnd chan struct{}
	endStreams sync.Once
}

// New builds the router and registers every operation.
func New(o Options) *Server {
	o = o.withDefaults()
	s := newServer(o)
	r := s.newRouter()
	s.api = humachi.New(r, apiConfig())
	s.api.UseMiddleware(s.authMiddleware(s.api), s.requireRole(s.api), s.readBody(s.api))
	s.v2 = huma.NewGroup(s.api, "/v2")
	s.registerOperations()
	finishDocument(s.api.OpenAPI())
	s.mountPages(r, o)
	s.router = r
	return s
}

// withDefaults fills the settings left zero.
func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 7 * 24 * time.Hour
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 10 << 20
	}
	if o.BodyBytesInFlight <= 0 {
		o.BodyBytesInFlight = 64 << 20
	}
	if o.BodyStreams <= 0 {
		o.BodyStreams = 4
	}
	if o.BodyWait <= 0 {
		o.BodyWait = 10 * time.Second
	}
	if o.BodyMinRate <= 0 {
		o.BodyMinRate = 16 << 10
	}
	if o.BodyGrace <= 0 {
		o.BodyGrace = 5 * time.Second
	}
	if o.MaxJobAttempts <= 0 {
		o.MaxJobAttempts = 100_000
	}
	if o.Tracing == nil {
		o.Tracing = noop.NewTracerProvider()
	}
	return o
}

// newServer holds o's dependencies and settings, with no route yet.
func newServer(o Options) *Server {
	return &Server{
		store: o.Store, rollouts: rollouts.Of(o.Store), datafiles: datafiles.Of(o.Store), credentials: credentials.Of(o.Store), registry: registry.Of(o.Store), catalog: catalog.Of(o.Store), llms: llms.Of(o.Store), billing: billing.Of(o.Store), bucket: o.Bucket, temporal: o.Temporal, workflows: o.Workflows, builds: o.Builds, secrets: o.Secrets, dataQuota: o.DataQuota, uploads: o.Uploads, log: o.Logger, sessionTTL: o.SessionTTL,
		secureCookies: strings.HasPrefix(o.PublicURL, "https://"), maxBodyBytes: o.MaxBodyBytes, maxAttempts: o.MaxJobAttempts, publicURL: strings.TrimRight(o.PublicURL, "/"),
		bodies: newBodyLimits(o), throttle: newAuthThrottle(), crossOrigin: newCrossOrigin(o.PublicURL), metrics: o.Metrics, tracer: o.Tracing.Tracer("github.com/proctorhq/proctor/httpapi"),
		streamsEnd: make(chan struct{}),
	}
}

// EndStreams ends the answers that stream for as long as a job runs (GET /v2/jobs/{id}/finished),
// so that a graceful shutdown does not wait on them: an HTTP server calls it as it begins to shut
// down (http.Server.RegisterOnShutdown). Their clients reconnect where they left off.
func (s *Server) EndStreams() { s.endStreams.Do(func() { close(s.streamsEnd) }) }

// Handler is the root HTTP handler.
func (s *Server) Handler() http.Handler { return s.router }

// OpenAPI is the generated document.
func (s *Server) OpenAPI() *huma.OpenAPI { return s.api.OpenAPI() }

// Spec returns the OpenAPI document as YAML without any dependency: it is what `proctor openapi`
// prints and what the committed openapi.yaml must equal.
func Spec() ([]byte, error) {
	return New(Options{Logger: slog.New(slog.DiscardHandler)}).OpenAPI().YAML()
}
