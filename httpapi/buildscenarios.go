package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/registry"
)

// registerBuildScenarios registers the deprecated discovery of a build's scenarios on demand.
func (s *Server) registerBuildScenarios() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "discover-build-scenarios", Method: http.MethodPost, Path: "/builds/{build_id}/discover-scenarios", Tags: tags,
		Summary: "Discover a build's scenarios again", Deprecated: true,
		Description: "Deprecated: builds discover their scenarios when they finish. Runs the image now (on a build host, not this " +
			"server) and returns the scenarios it declares, without recording them.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.discoverBuildScenarios)
}

type discoveredOutput struct{ Body []Scenario }

// discoverTimeout bounds the deprecated discover-scenarios route.
const discoverTimeout = 2 * time.Minute

// discoverBuildScenarios serves POST /v2/builds/{build_id}/discover-scenarios (deprecated).
func (s *Server) discoverBuildScenarios(ctx context.Context, in *buildPath) (*discoveredOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	b, err := s.registry.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !b.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the build is read-only for the caller")
	}
	if b.Status != registry.BuildSucceeded {
		return nil, newAPIError(http.StatusConflict, "the build is "+b.Status+": only a succeeded build has an image to run")
	}
	dctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	found, err := s.builds.Discover(dctx, b.ID)
	if err != nil {
		id := requestIDFrom(ctx)
		s.log.ErrorContext(ctx, "discover scenarios", "request_id", id, "build", b.ID, "error", err)
		return nil, newAPIError(http.StatusServiceUnavailable, "the image could not be run for discovery (request id "+id+")")
	}
	out := &discoveredOutput{Body: make([]Scenario, len(found))}
	for i, sc := range found {
		// Not recorded: a stable id from the build and the name.
		sc.ID, sc.RegistryID, sc.BuildID = uuid.NewSHA1(b.ID, []byte(sc.Name)), b.RegistryID, b.ID
		if sc.Slug == "" {
			sc.Slug = registry.Slugify(sc.Name)
		}
		out.Body[i] = scenarioFromModel(sc)
	}
	return out, nil
}
