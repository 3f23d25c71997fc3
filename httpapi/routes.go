package httpapi

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/proctorhq/proctor/httpapi/docsui"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/webapp"
)

// registerOperations registers every operation, one call per resource group (each in the file
// named after it).
func (s *Server) registerOperations() {
	s.registerHealth()
	s.registerTasksets()
	s.registerTasksetReads()
	s.registerTasks()
	s.registerTaskVersions()
	s.registerTaskReview()
	s.registerTaskComments()
	s.registerTaskActivity()
	s.registerTaskBriefs()
	s.registerMentions()
	s.registerReadyCheck()
	s.registerModels()
	s.registerJobs()
	s.registerTraces()
	s.registerTraceEvents()
	s.registerTraceLogs()
	s.registerTraceAnalysis()
	s.registerRollouts()
	s.registerRolloutRunList()
	s.registerRolloutCancels()
	s.registerRegistries()
	s.registerBuilds()
	s.registerBuildLogs()
	s.registerBuildScenarios()
	s.registerBuildSource()
	s.registerBuildWorkspace()
	s.registerEnvVars()
	s.registerMemberSecrets()
	s.registerByokCredentials()
	s.registerInference()
	s.registerLimits()
	s.registerCheckpoints()
	s.registerUsage()
	s.registerInstances()
	s.registerResults()
	s.registerAnalytics()
	s.registerDataFiles()
	s.registerUploads()
	s.registerUploadCompletion()
	s.registerWorkers()
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
