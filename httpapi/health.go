package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// HealthBody reports liveness or readiness.
type HealthBody struct {
	Status string            `json:"status" enum:"ok,ready,unavailable" doc:"ok: the process serves; ready: every dependency answers"`
	Checks map[string]string `json:"checks,omitempty" doc:"Each dependency and \"ok\" or why it failed"`
}

type healthOutput struct {
	Status int
	Body   HealthBody
}

func (s *Server) registerHealth() {
	huma.Register(s.api, op(huma.Operation{
		OperationID: "healthz", Method: http.MethodGet, Path: "/healthz", Tags: []string{"Health"},
		Summary: "Liveness", Description: "Answers 200 while the process serves requests; checks no dependency.",
	}, authNone), s.healthz)
	huma.Register(s.api, op(huma.Operation{
		OperationID: "readyz", Method: http.MethodGet, Path: "/readyz", Tags: []string{"Health"},
		Summary: "Readiness", Description: "200 when the database and Temporal answer, 503 with the failing checks otherwise.",
		Responses: map[string]*huma.Response{"503": {Description: "A dependency does not answer"}},
	}, authNone), s.readyz)
}

// healthz serves GET /v2/healthz: liveness.
func (s *Server) healthz(ctx context.Context, _ *struct{}) (*healthOutput, error) {
	return &healthOutput{Status: http.StatusOK, Body: HealthBody{Status: "ok"}}, nil
}

// readyz serves GET /v2/readyz: readiness.
func (s *Server) readyz(ctx context.Context, _ *struct{}) (*healthOutput, error) {
	checks := map[string]string{"database": "ok", "schema": "ok", "temporal": "ok"}
	ready := true
	check := func(name string, f func(context.Context) error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := f(ctx); err != nil {
			checks[name] = err.Error()
			ready = false
		}
	}
	if s.store == nil {
		checks["database"], ready = "not configured", false
	} else {
		check("database", s.store.Ping)
		if ready {
			check("schema", s.store.CheckSchema)
		}
	}
	if s.temporal == nil {
		checks["temporal"], ready = "not configured", false
	} else {
		check("temporal", s.temporal.CheckHealth)
	}
	if !ready {
		return &healthOutput{Status: http.StatusServiceUnavailable, Body: HealthBody{Status: "unavailable", Checks: checks}}, nil
	}
	return &healthOutput{Status: http.StatusOK, Body: HealthBody{Status: "ready", Checks: checks}}, nil
}
