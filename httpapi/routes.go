package httpapi

import (
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/proctorhq/proctor/httpapi/docsui"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/webapp"
)

// registerOperations registers every operation, in the order of the spec's tables. Each call
// registers one resource group, or one sub-resource of a group, and lives in the file of that
// name (registerBuildSource in buildsource.go).
func (s *Server) registerOperations() {
	s.registerHealth()
	// Registries (environments)
	s.registerRegistries()
	// Tasksets
	s.registerTasksets()
	s.registerTasksetReads()
	// Tasks
	s.registerTasks()
	s.registerTaskVersions()
	s.registerTaskReview()
	s.registerReadyCheck()
	s.registerTaskBriefs()
	s.registerTaskComments()
	s.registerTaskActivity()
	s.registerMentions()
	// Jobs
	s.registerJobs()
	s.registerAnalytics()
	s.registerCompare()
	s.registerExport()
	s.registerFinished()
	s.registerRetry()
	s.registerResume()
	s.registerCertify()
	s.registerReplayCheck()
	s.registerJobMix()
	// Rollouts
	s.registerRollouts()
	s.registerRolloutRunList()
	s.registerRolloutCancels()
	// Traces
	s.registerTraces()
	s.registerTraceEvents()
	s.registerTraceLogs()
	s.registerTraceAnalysis()
	// Instances
	s.registerInstances()
	// Builds
	s.registerBuilds()
	s.registerBuildLogs()
	s.registerBuildSource()
	s.registerBuildWorkspace()
	s.registerBuildScenarios()
	// Models
	s.registerModels()
	s.registerCheckpoints()
	s.registerResults()
	// Uploads
	s.registerUploads()
	s.registerUploadCompletion()
	// Data files
	s.registerDataFiles()
	// Environment variables, member secrets, provider credentials
	s.registerEnvVars()
	s.registerMemberSecrets()
	s.registerByokCredentials()
	// Spending limits
	s.registerLimits()
	// Completions and usage (with the usage reads of models, jobs and traces: the same records)
	s.registerInference()
	s.registerUsage()
	// Proctor extensions
	s.registerWorkers()
	s.registerGateway()
	s.registerGatewayModels()
	s.registerAgents()
}

// mountPages mounts what r serves beside the API's operations: the reference page, the payload
// codec, the web app, browser sign-in, the local bucket's signed URLs and the metrics.
func (s *Server) mountPages(r chi.Router, o Options) {
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
	r.Get("/auth/link", s.handleSignInLinkPage)
	r.Post("/auth/link", s.handleCreateSignInLink)
	r.Post("/auth/link/redeem", s.handleRedeemSignInLink)
	if o.Blob != nil {
		r.Handle("/blob/*", o.Blob)
	}
	if o.Metrics != nil {
		r.Handle("/metrics", metricsFor(o.MetricsToken, o.Metrics.Handler()))
	}
}

// metricsFor serves Prometheus metrics to a request whose bearer token is token; without a
// token configured, to none (404). They name every team's models and spend: never a stranger's.
func metricsFor(token string, metrics http.Handler) http.Handler {
	if token == "" {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotFound, "metrics are not served on this listener: scrape --metrics-addr, or set --metrics-token (PROCTOR_METRICS_TOKEN) and send it as a bearer token")
		})
	}
	return BearerOnly(token, metrics)
}

// BearerOnly serves next to the requests that carry token as their bearer token, and answers
// any other 401 with the error envelope.
func BearerOnly(token string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="proctor metrics"`)
			writeError(w, http.StatusUnauthorized, "metrics need the metrics token (--metrics-token) as a bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}
