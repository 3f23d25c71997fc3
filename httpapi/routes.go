package httpapi

import (
	"net/http"

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
	if o.Blob != nil {
		r.Handle("/blob/*", o.Blob)
	}
	if o.Metrics != nil {
		r.Handle("/metrics", o.Metrics.Handler())
	}
}
