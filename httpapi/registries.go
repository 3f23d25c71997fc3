package httpapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// Registry is an environment (spec: Resources › Registry).
type Registry struct {
	ID            uuid.UUID      `json:"id"`
	Name          string         `json:"name"`
	RegistryType  string         `json:"registry_type" example:"mcp"`
	Public        bool           `json:"public"`
	CreatedAt     time.Time      `json:"created_at"`
	UpdatedAt     time.Time      `json:"updated_at"`
	Branch        string         `json:"branch"`
	BuildArgs     map[string]any `json:"build_args"`
	CanEdit       bool           `json:"can_edit" doc:"The caller's team owns the environment"`
	Description   string         `json:"description"`
	EntryFolder   string         `json:"entry_folder"`
	RepoURL       string         `json:"repo_url" doc:"Link to the environment's source repository"`
	ProjectID     *uuid.UUID     `json:"project_id"`
	LatestBuildID *uuid.UUID     `json:"latest_build_id"`
	// CertifyBeforeLatest is a Proctor extension.
	CertifyBeforeLatest bool  `json:"certify_before_latest" doc:"Proctor extension: a build becomes the latest only once its latest certification passed (or forced)"`
	IsStarred           bool  `json:"is_starred"`
	StarCount           int64 `json:"star_count" minimum:"0"`
	// LatestScenarios is present when include_latest_scenarios is set.
	LatestScenarios []Scenario `json:"latest_scenarios,omitempty" doc:"The latest build's scenarios (templates), with include_latest_scenarios"`
}

// RegistryDetail is an environment with its latest build.
type RegistryDetail struct {
	Registry
	LatestBuild *Build `json:"latest_build" doc:"The build new runs use; null before the first successful build"`
}

// Build is one build of an environment (spec: Resources › Build).
type Build struct {
	ID                uuid.UUID        `json:"id"`
	RegistryID        uuid.UUID        `json:"registry_id"`
	Version           int              `json:"version" minimum:"1"`
	Status            string           `json:"status" example:"succeeded"`
	SourceIndexStatus string           `json:"source_index_status" example:"pending"`
	CreatedAt         time.Time        `json:"created_at"`
	Branch            string           `json:"branch"`
	Digest            string           `json:"digest"`
	DurationSeconds   *float64         `json:"duration_seconds"`
	ErrorMessage      string           `json:"error_message"`
	RepoURL           string           `json:"repo_url"`
	ImageName         string           `json:"image_name"`
	Lock              models.BuildLock `json:"lock" doc:"What the build serves, as discovery found it by running the image: its transport, tools, prompts and resources"`
}

// Scenario is a parameterised task definition of a build (spec: Resources › Scenario).
type Scenario struct {
	ID                uuid.UUID      `json:"id"`
	RegistryID        uuid.UUID      `json:"registry_id"`
	BuildID           uuid.UUID      `json:"build_id"`
	Name              string         `json:"name"`
	CreatedAt         time.Time      `json:"created_at"`
	ArgsSchema        map[string]any `json:"args_schema"`
	Arguments         []any          `json:"arguments"`
	Description       string         `json:"description"`
	Metadata          map[string]any `json:"metadata"`
	Slug              string         `json:"slug"`
	TraceNameTemplate string         `json:"trace_name_template"`
}

func registryFromRow(r registry.RegistryRow) Registry {
	out := Registry{
		ID: r.ID, Name: r.Name, RegistryType: r.RegistryType, Public: r.Public, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Branch: r.Branch, BuildArgs: nonNilMap(r.BuildArgs), CanEdit: r.CanEdit, Description: r.Description,
		EntryFolder: r.EntryFolder, RepoURL: r.RepoURL, ProjectID: r.ProjectID, LatestBuildID: r.LatestBuildID,
		IsStarred: r.IsStarred, StarCount: r.StarCount, CertifyBeforeLatest: r.CertifyBeforeLatest,
	}
	if r.LatestScenarios != nil {
		out.LatestScenarios = make([]Scenario, len(r.LatestScenarios))
		for i, sc := range r.LatestScenarios {
			out.LatestScenarios[i] = scenarioFromModel(sc)
		}
	}
	return out
}

func buildFromModel(b *models.Build) *Build {
	if b == nil {
		return nil
	}
	return &Build{
		ID: b.ID, RegistryID: b.RegistryID, Version: b.Version, Status: b.Status, SourceIndexStatus: b.SourceIndexStatus,
		CreatedAt: b.CreatedAt, Branch: b.Branch, Digest: b.Digest, DurationSeconds: b.DurationSeconds,
		ErrorMessage: b.ErrorMessage, RepoURL: b.RepoURL, ImageName: b.ImageName, Lock: b.Lock.Listed(),
	}
}

func scenarioFromModel(sc models.Scenario) Scenario {
	args := sc.Arguments
	if args == nil {
		args = []any{}
	}
	return Scenario{
		ID: sc.ID, RegistryID: sc.RegistryID, BuildID: sc.BuildID, Name: sc.Name, CreatedAt: sc.CreatedAt,
		ArgsSchema: nonNilMap(sc.ArgsSchema), Arguments: args, Description: sc.Description,
		Metadata: nonNilMap(sc.Metadata), Slug: sc.Slug, TraceNameTemplate: sc.TraceNameTemplate,
	}
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// nonNilSlice is s, or an empty slice for nil (JSON [] rather than null).
func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

type listRegistriesOutput struct{ Body Page[Registry] }

type registryOutput struct{ Body RegistryDetail }

type scenariosInput struct {
	RegistryID uuid.UUID `path:"registry_id" format:"uuid" doc:"The environment's id"`
	BuildID    string    `query:"build_id" format:"uuid" doc:"A build of the environment; default: the latest build"`
}

type scenariosOutput struct{ Body []Scenario }

// SourceURL is a temporary link to a build's source archive.
type SourceURL struct {
	RegistryID  uuid.UUID `json:"registry_id"`
	BuildID     uuid.UUID `json:"build_id"`
	DownloadURL string    `json:"download_url" doc:"Presigned; expires after 15 minutes"`
	RepoURL     string    `json:"repo_url"`
}

type sourceURLOutput struct{ Body SourceURL }

// sourceURLTTL is how long a source download link stays valid.
const sourceURLTTL = 15 * time.Minute

func (s *Server) registerRegistries() {
	tags := []string{"Registries"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-registries", Method: http.MethodGet, Path: "/registry", Tags: tags,
		Summary:     "List environments",
		Description: "The caller's team's environments and public ones, filtered, sorted and paged.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.listRegistries)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-registry", Method: http.MethodGet, Path: "/registry/{registry_id}", Tags: tags,
		Summary: "Get an environment", Description: "The environment with its latest build's details.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getRegistry)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-registry-scenarios", Method: http.MethodGet, Path: "/registry/{registry_id}/scenarios", Tags: tags,
		Summary: "List an environment's scenarios", Description: "The scenarios one build declares (default: the latest build).",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listRegistryScenarios)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-registry-source-url", Method: http.MethodGet, Path: "/registry/{registry_id}/source-url", Tags: tags,
		Summary:     "Get a download link for a build's source",
		Description: "A temporary presigned link to the source archive of a build (default: the latest build).",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getRegistrySourceUrl)
}

// ListRegistriesInput is the query of GET /v2/registry.
type ListRegistriesInput struct {
	Limit                  int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"Page size"`
	Offset                 int    `query:"offset" minimum:"0" maximum:"2147483647" default:"0" doc:"Rows to skip"`
	Search                 string `query:"search" maxLength:"200" doc:"Case-insensitive substring of the name"`
	MatchTemplates         bool   `query:"match_templates" default:"false" doc:"With search, also match the description and the latest build's scenario names, descriptions and setup descriptions"`
	IncludeLatestScenarios bool   `query:"include_latest_scenarios" default:"false" doc:"Embed the latest build's scenarios in each row"`
	PublicOnly             bool   `query:"public_only" default:"false" doc:"Only public environments"`
	OwnerOnly              bool   `query:"owner_only" default:"false" doc:"Only the caller's team's environments (ignored when public_only is true)"`
	ProjectID              string `query:"project_id" format:"uuid" doc:"Restrict to one project; omitted lists all projects"`
	SortBy                 string `query:"sort_by" enum:"starred,date,name,stars" default:"starred" doc:"starred: the caller's starred first; date: updated_at descending; name: A-Z; stars: star_count descending"`
}

// listRegistries serves GET /v2/registry: list environments.
func (s *Server) listRegistries(ctx context.Context, in *ListRegistriesInput) (*listRegistriesOutput, error) {
	q := registry.RegistryQuery{
		Search: in.Search, MatchTemplates: in.MatchTemplates, IncludeLatestScenarios: in.IncludeLatestScenarios,
		PublicOnly: in.PublicOnly, OwnerOnly: in.OwnerOnly, SortBy: in.SortBy, Limit: in.Limit, Offset: in.Offset,
	}
	if in.ProjectID != "" {
		id := uuid.MustParse(in.ProjectID) // format:"uuid" was validated
		q.ProjectID = &id
	}
	rows, total, err := s.registry.ListRegistries(ctx, callerFrom(ctx), q)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	items := make([]Registry, len(rows))
	for i, r := range rows {
		items[i] = registryFromRow(r)
	}
	return &listRegistriesOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

type registryPath struct {
	RegistryID uuid.UUID `path:"registry_id" format:"uuid" doc:"The environment's id"`
}

// getRegistry serves GET /v2/registry/{registry_id}: get an environment.
func (s *Server) getRegistry(ctx context.Context, in *registryPath) (*registryOutput, error) {
	row, err := s.registry.GetRegistry(ctx, callerFrom(ctx), in.RegistryID)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	return &registryOutput{Body: RegistryDetail{Registry: registryFromRow(*row), LatestBuild: buildFromModel(row.LatestBuild)}}, nil
}

// listRegistryScenarios serves GET /v2/registry/{registry_id}/scenarios: list an environment's scenarios.
func (s *Server) listRegistryScenarios(ctx context.Context, in *scenariosInput) (*scenariosOutput, error) {
	build, err := s.registryBuild(ctx, in.RegistryID, in.BuildID)
	if err != nil {
		return nil, err
	}
	out := &scenariosOutput{Body: []Scenario{}}
	if build == nil {
		return out, nil
	}
	scs, err := s.registry.ListScenarios(ctx, build.ID)
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		out.Body = append(out.Body, scenarioFromModel(sc))
	}
	return out, nil
}

// getRegistrySourceUrl serves GET /v2/registry/{registry_id}/source-url: get a download link for a build's source.
func (s *Server) getRegistrySourceUrl(ctx context.Context, in *scenariosInput) (*sourceURLOutput, error) {
	build, err := s.registryBuild(ctx, in.RegistryID, in.BuildID)
	if err != nil {
		return nil, err
	}
	if build == nil {
		return nil, newAPIError(http.StatusNotFound, "the environment has no build yet")
	}
	if build.SourceKey == "" || s.bucket == nil {
		return nil, newAPIError(http.StatusNotFound, "this build has no source archive")
	}
	url, err := s.bucket.SignedURL(ctx, build.SourceKey, http.MethodGet, sourceURLTTL)
	if err != nil {
		return nil, err
	}
	return &sourceURLOutput{Body: SourceURL{RegistryID: in.RegistryID, BuildID: build.ID, DownloadURL: url, RepoURL: build.RepoURL}}, nil
}

// registryBuild resolves the build a registry route is about: the given one, or the latest (nil
// when the environment has none yet). Invisible environments are 404.
func (s *Server) registryBuild(ctx context.Context, registryID uuid.UUID, buildID string) (*models.Build, error) {
	row, err := s.registry.GetRegistry(ctx, callerFrom(ctx), registryID)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	if buildID == "" {
		return row.LatestBuild, nil
	}
	b, err := s.registry.GetBuild(ctx, registryID, uuid.MustParse(buildID))
	if errors.Is(err, models.ErrNotFound) {
		return nil, newAPIError(http.StatusNotFound, "the environment has no build "+buildID)
	}
	return b, err
}
