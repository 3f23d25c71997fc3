package httpapi

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// Builds starts and cancels build workflows; the Temporal client implements it.
type Builds interface {
	StartBuild(ctx context.Context, buildID uuid.UUID) error
	CancelBuild(ctx context.Context, buildID uuid.UUID) error
	// Discover runs a succeeded build's image and returns the scenarios it declares.
	Discover(ctx context.Context, buildID uuid.UUID) ([]models.Scenario, error)
}

// uploadURLTTL is how long a source upload URL stays valid.
const uploadURLTTL = time.Hour

func (s *Server) registerBuilds() {
	tags := []string{"Builds"}
	errs := []int{http.StatusNotFound, http.StatusServiceUnavailable}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "create-build-upload-url", Method: http.MethodPost, Path: "/builds/upload-url", Tags: tags,
		Summary:     "Reserve a source upload",
		Description: "Returns a presigned URL to PUT the environment's source archive (tar, tar.gz or zip) to, and the build id to trigger with.",
		Errors:      []int{http.StatusServiceUnavailable},
	}, authKeyOrSession), s.createBuildUploadURL)

	for _, path := range []string{"/builds/trigger", "/builds/trigger-direct"} {
		id, summary := "trigger-build", "Build an uploaded source"
		if path == "/builds/trigger-direct" {
			id, summary = "trigger-build-direct", "Build an uploaded source (alias of trigger, kept for older clients)"
		}
		huma.Register(s.v2, op(huma.Operation{
			OperationID: id, Method: http.MethodPost, Path: path, Tags: tags, Summary: summary,
			Description: "Starts the build of the source uploaded for build_id, for the environment named by registry_id or by name " +
				"(created when the team has none of that name). Returns at once; poll the build's status. Triggering the same " +
				"build_id again returns the build. The environment's first successful build becomes its latest, unless it asked to be certified " +
				"(certify, a Proctor extension); later ones, and those, through set-latest.",
			Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable},
		}, authKeyOrSession), s.triggerBuild)
	}

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-builds", Method: http.MethodGet, Path: "/builds", Tags: tags, Summary: "List an environment's builds",
		Description: "Newest first.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listBuilds)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-build-status", Method: http.MethodGet, Path: "/builds/{build_id}/status", Tags: tags, Summary: "Get a build",
		Description: "status: pending (queued), running (building), then succeeded, failed (error_message says why) or cancelled.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getBuildStatus)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-build", Method: http.MethodPost, Path: "/builds/{build_id}/cancel", Tags: tags, Summary: "Cancel a build",
		Description: "A running build is stopped and ends cancelled; a build that has ended is returned as it is.",
		Errors:      append([]int{http.StatusForbidden}, errs...),
	}, authKeyOrSession), s.cancelBuild)

	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "set-latest-build", Method: http.MethodPost, Path: "/builds/{build_id}/set-latest", Tags: tags,
		Summary: "Make a build the one new runs use",
		Description: "Only a succeeded build; earlier builds remain. An environment that requires a passed certification first " +
			"(Proctor extension: PUT /v2/registry/{registry_id}/certification-policy) refuses (409) a build whose latest certification " +
			"did not pass, unless the body says force.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession)), s.setLatestBuild)
}

func (s *Server) requireBuilds() error {
	if s.builds == nil || s.bucket == nil {
		return newAPIError(http.StatusServiceUnavailable, "this server runs no builds")
	}
	return nil
}

type uploadURLOutput struct {
	Body struct {
		UploadURL string    `json:"upload_url" doc:"PUT the archive here (valid for an hour)"`
		BuildID   uuid.UUID `json:"build_id"`
	}
}

// createBuildUploadURL serves POST /v2/builds/upload-url: reserve a source upload.
func (s *Server) createBuildUploadURL(ctx context.Context, _ *struct{}) (*uploadURLOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	up, err := s.registry.CreateBuildUpload(ctx, callerFrom(ctx))
	if err != nil {
		return nil, err
	}
	url, err := s.bucket.SignedURL(ctx, up.SourceKey, http.MethodPut, uploadURLTTL)
	if err != nil {
		return nil, err
	}
	out := &uploadURLOutput{}
	out.Body.UploadURL, out.Body.BuildID = url, up.ID
	return out, nil
}

type triggerInput struct {
	Body struct {
		BuildID              uuid.UUID             `json:"build_id" doc:"From upload-url; the archive must have been uploaded"`
		Name                 string                `json:"name,omitempty" maxLength:"200" pattern:"^[A-Za-z0-9][A-Za-z0-9._-]*$" doc:"The environment, created when the team has none of this name; with registry_id, it must be that environment's name"`
		RegistryID           *uuid.UUID            `json:"registry_id,omitempty" doc:"The environment, by id (name, when given too, must be its name)"`
		Source               string                `json:"source,omitempty" maxLength:"2000" doc:"Where the source came from (informational)"`
		EntryFolder          string                `json:"entry_folder,omitempty" maxLength:"500" doc:"The archive's folder that holds the environment (default: its root)"`
		BuildArgs            map[string]string     `json:"build_args,omitempty" maxProperties:"100" doc:"ARG values of a Dockerfile build"`
		BuildSecrets         map[string]string     `json:"build_secrets,omitempty" maxProperties:"100" doc:"Secrets a Dockerfile's RUN steps read with RUN --mount=type=secret,id=NAME (at /run/secrets/NAME): names are letters, digits, '_', '.' and '-', values up to 64 KiB. They are sealed with the server's secrets key, kept only while the build runs, and appear in no record, log, image or workflow history."`
		EnvironmentVariables map[string]string     `json:"environment_variables,omitempty" maxProperties:"100"`
		NoCache              bool                  `json:"no_cache,omitempty"`
		RuntimeConfig        *models.RuntimeConfig `json:"runtime_config,omitempty" doc:"The environment's runtime defaults; a task's own override them"`
		RuntimeProvider      string                `json:"runtime_provider,omitempty" maxLength:"100" doc:"Where the image runs: process, container or kubernetes (the worker's --sandbox-provider runs it either way); any other value fails the build, saying so"`
		Kind                 string                `json:"kind,omitempty" enum:"environment,agent" doc:"Proctor extension: agent builds a brought agent (its image's command is the agent; nothing is discovered) under name, listed by GET /v2/agents; default environment. A name taken by the other kind is refused (422)."`
		Certify              *CertifyOnBuild       `json:"certify,omitempty" doc:"Proctor extension, environments only: certify the build once it succeeded, as POST /v2/builds/{build_id}/certify would (a child of the build's workflow; read it with GET /v2/builds/{build_id}/certification), as the caller: the caller's spending limits are checked when the build is triggered, and this server's bound on a request's attempts (the environment's tasks of the taskset × (k + 3)) when the certification starts (one over it is said in the build's log). The build's success does not wait for it, and the build does not become the latest on its own, even as the environment's first: set-latest once the certification passed (proctor env deploy --certify does)."`
		ShellServer          bool                  `json:"shell_server,omitempty" doc:"Proctor extension, environments built from a Dockerfile only: the image has no MCP server of its own (a Harbor task's), and the build adds Proctor's shell server to it as its command: tools exec and write_file, and Harbor's verifier as its evaluation (see README, Running Harbor tasks). Default false: the image's own command serves MCP."`
		Placement            string                `json:"placement,omitempty" enum:"beside,inside" doc:"Proctor extension, agents only: where the agent runs, beside the environment in a sandbox of its own (default; it reaches the environment over MCP), or inside it, in the environment's working directory (for agents that work with their own shell and file tools; the environment must accept it: runtime_config.agents_inside)"`
	}
}

// CertifyOnBuild asks a build to be certified once it succeeded.
type CertifyOnBuild struct {
	TasksetID uuid.UUID `json:"taskset_id" doc:"the taskset whose tasks of the environment are certified"`
	K         int       `json:"k,omitempty" minimum:"1" maximum:"20" default:"5" doc:"the oracle's attempts per task"`
}

// Resolve needs an environment and refuses what this server cannot honour.
func (in *triggerInput) Resolve(huma.Context) []error {
	b := in.Body
	errs := nilIDs(map[string]*uuid.UUID{"body.build_id": &b.BuildID, "body.registry_id": b.RegistryID})
	switch {
	case b.Name == "" && b.RegistryID == nil:
		errs = append(errs, &huma.ErrorDetail{Location: "body.name", Message: "name the environment (name) or give registry_id"})
	}
	if b.Certify != nil && b.Kind == "agent" {
		errs = append(errs, &huma.ErrorDetail{Location: "body.certify", Message: "certification runs an environment's tasks: a brought agent's build is not certified"})
	}
	if b.Certify != nil {
		errs = append(errs, nilIDs(map[string]*uuid.UUID{"body.certify.taskset_id": &b.Certify.TasksetID})...)
	}
	if b.ShellServer && b.Kind == "agent" {
		errs = append(errs, &huma.ErrorDetail{Location: "body.shell_server", Message: "the shell server makes an image an environment: a brought agent's build does not take it"})
	}
	if b.Placement != "" && b.Kind != "agent" {
		errs = append(errs, &huma.ErrorDetail{Location: "body.placement", Message: "placement is where a brought agent runs: give it with kind agent only", Value: b.Placement})
	}
	if b.EntryFolder != "" && !filepath.IsLocal(b.EntryFolder) {
		errs = append(errs, &huma.ErrorDetail{Location: "body.entry_folder", Message: "a relative folder within the archive", Value: b.EntryFolder})
	}
	for _, name := range slices.Sorted(maps.Keys(b.BuildSecrets)) {
		switch {
		case !buildSecretName.MatchString(name):
			errs = append(errs, &huma.ErrorDetail{Location: "body.build_secrets", Value: name,
				Message: "a secret's name is 1 to 128 letters, digits, '_', '.' or '-', starting with a letter or '_'"})
		case len(b.BuildSecrets[name]) > maxBuildSecretBytes:
			// The value is not echoed back.
			errs = append(errs, &huma.ErrorDetail{Location: "body.build_secrets." + name, Message: "a secret's value is at most 64 KiB"})
		}
	}
	return errs
}

// buildSecretName is what a build secret may be called: an id buildah accepts and a file name.
var buildSecretName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

const maxBuildSecretBytes = 64 << 10

type buildOutput struct{ Body *Build }

// triggerBuild serves POST /v2/builds/trigger (and trigger-direct): build an uploaded source.
func (s *Server) triggerBuild(ctx context.Context, in *triggerInput) (*buildOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	c, b := callerFrom(ctx), in.Body
	certify, err := s.certifyOnBuild(ctx, b.Certify)
	if err != nil {
		return nil, err
	}
	key := registry.BuildSourceKey(c.TeamID, b.BuildID)
	if _, err := s.bucket.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) {
		// A build that started has consumed its upload: triggering it again returns it.
		if built, err := s.registry.GetBuildFor(ctx, c, b.BuildID); err == nil {
			return &buildOutput{Body: buildFromModel(&built.Build)}, nil
		}
		return nil, validation("body.build_id", "no source was uploaded for this build: PUT the archive to its upload_url first", b.BuildID.String())
	} else if err != nil {
		return nil, err
	}
	sealed, err := s.sealBuildSecrets(b.BuildID, b.BuildSecrets)
	if err != nil {
		return nil, err
	}
	kind := ""
	if b.Kind == "agent" {
		kind = registry.RegistryAgent
	}
	build, _, err := s.registry.TriggerBuild(ctx, c, registry.TriggerBuild{UploadID: b.BuildID, RegistryID: b.RegistryID, Name: b.Name, Kind: kind, RuntimeConfig: b.RuntimeConfig, Placement: b.Placement,
		Options: models.BuildOptions{Source: b.Source, EntryFolder: b.EntryFolder, BuildArgs: b.BuildArgs, EnvironmentVariables: b.EnvironmentVariables,
			NoCache: b.NoCache, RuntimeProvider: b.RuntimeProvider, Certify: certify, ShellServer: b.ShellServer}, Secrets: sealed})
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !registry.BuildTerminal(build.Status) {
		if err := s.builds.StartBuild(ctx, build.ID); err != nil {
			id := requestIDFrom(ctx)
			s.log.ErrorContext(ctx, "start build", "request_id", id, "build", build.ID, "error", err)
			return nil, newAPIError(http.StatusServiceUnavailable, "the build was recorded but its workflow could not start; trigger it again (request id "+id+")")
		}
	}
	return &buildOutput{Body: buildFromModel(build)}, nil
}

// certifyOnBuild is the certification a trigger asks for, checked as a launch is (the caller's
// spending limits, now; this server's bound on a request's attempts, kept with it), or nil when
// it asks for none.
func (s *Server) certifyOnBuild(ctx context.Context, in *CertifyOnBuild) (*models.CertifyOptions, error) {
	if in == nil {
		return nil, nil
	}
	if err := s.canLaunch(ctx); err != nil {
		return nil, err
	}
	if _, err := s.catalog.LatestVersionIDs(ctx, callerFrom(ctx), in.TasksetID); errors.Is(err, models.ErrNotFound) {
		return nil, validation("body.certify.taskset_id", "no taskset with this id is visible to the caller", in.TasksetID.String())
	} else if err != nil {
		return nil, err
	}
	// The bound is checked on the environment's tasks when the certification starts (its
	// environment may not exist yet); one over it is said in the build's log.
	return &models.CertifyOptions{TasksetID: in.TasksetID, K: cmp.Or(in.K, 5), MaxAttempts: s.maxAttempts}, nil
}

// sealBuildSecrets encrypts a build's secrets, each bound to the build and its name.
func (s *Server) sealBuildSecrets(buildID uuid.UUID, plain map[string]string) (map[string][]byte, error) {
	if len(plain) == 0 {
		return nil, nil
	}
	if s.secrets == nil {
		return nil, newAPIError(http.StatusServiceUnavailable, "this server has no secrets key configured (PROCTOR_SECRETS_KEY_FILE), so it cannot accept build_secrets")
	}
	sealed := make(map[string][]byte, len(plain))
	for name, v := range plain {
		ct, err := s.secrets.Encrypt([]byte(v), models.BuildSecretContext(buildID, name))
		if err != nil {
			return nil, err
		}
		sealed[name] = ct
	}
	return sealed, nil
}

type listBuildsInput struct {
	RegistryID uuid.UUID `query:"registry_id" required:"true"`
	Limit      int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
}

type listBuildsOutput struct {
	Body struct {
		Builds []Build `json:"builds" nullable:"false"`
		Total  int     `json:"total"`
	}
}

// listBuilds serves GET /v2/builds: list an environment's builds.
func (s *Server) listBuilds(ctx context.Context, in *listBuildsInput) (*listBuildsOutput, error) {
	builds, total, err := s.registry.ListBuilds(ctx, callerFrom(ctx), in.RegistryID, in.Limit)
	if err != nil {
		return nil, storeError(err, "environment")
	}
	out := &listBuildsOutput{}
	out.Body.Builds, out.Body.Total = make([]Build, len(builds)), total
	for i := range builds {
		out.Body.Builds[i] = *buildFromModel(&builds[i])
	}
	return out, nil
}

type buildPath struct {
	BuildID uuid.UUID `path:"build_id"`
}

// getBuildStatus serves GET /v2/builds/{build_id}/status: get a build.
func (s *Server) getBuildStatus(ctx context.Context, in *buildPath) (*buildOutput, error) {
	b, err := s.registry.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}

// cancelBuild serves POST /v2/builds/{build_id}/cancel: cancel a build.
func (s *Server) cancelBuild(ctx context.Context, in *buildPath) (*buildOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	b, err := s.registry.GetBuildFor(ctx, c, in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !b.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the build is read-only for the caller")
	}
	if !registry.BuildTerminal(b.Status) {
		if err := s.builds.CancelBuild(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}

// setLatestBuild serves POST /v2/builds/{build_id}/set-latest: make a build the one new runs use.
type setLatestInput struct {
	BuildID uuid.UUID `path:"build_id"`
	Body    *struct {
		Force bool `json:"force,omitempty" doc:"Proctor extension: make it the latest even where the environment requires a passed certification first"`
	} `required:"false"`
}

func (s *Server) setLatestBuild(ctx context.Context, in *setLatestInput) (*buildOutput, error) {
	force := in.Body != nil && in.Body.Force
	b, err := s.registry.SetLatestBuild(ctx, callerFrom(ctx), in.BuildID, force)
	if err != nil {
		return nil, storeError(err, "build")
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}
