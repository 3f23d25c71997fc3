package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/models"
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
				"build_id again returns the build. The environment's first successful build becomes its latest; later ones through set-latest.",
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
		OperationID: "get-build-logs", Method: http.MethodGet, Path: "/builds/{build_id}/logs", Tags: tags, Summary: "Follow a build's log",
		Description: "A Proctor extension (not in the platform spec): the build's log lines after `after_seq`, oldest first. " +
			"Follow a build by asking again with `after_seq` set to the last `seq` seen until `done` is true " +
			"(the build has ended and every line has been read).",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getBuildLogs)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "cancel-build", Method: http.MethodPost, Path: "/builds/{build_id}/cancel", Tags: tags, Summary: "Cancel a build",
		Description: "A running build is stopped and ends cancelled; a build that has ended is returned as it is.",
		Errors:      append([]int{http.StatusForbidden}, errs...),
	}, authKeyOrSession), s.cancelBuild)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "discover-build-scenarios", Method: http.MethodPost, Path: "/builds/{build_id}/discover-scenarios", Tags: tags,
		Summary: "Discover a build's scenarios again", Deprecated: true,
		Description: "Deprecated: builds discover their scenarios when they finish. Runs the image now (on a build host, not this " +
			"server) and returns the scenarios it declares, without recording them.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.discoverBuildScenarios)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "set-latest-build", Method: http.MethodPost, Path: "/builds/{build_id}/set-latest", Tags: tags,
		Summary: "Make a build the one new runs use", Description: "Only a succeeded build; earlier builds remain.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession), s.setLatestBuild)
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
	up, err := s.store.CreateBuildUpload(ctx, callerFrom(ctx))
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
	}
}

// Resolve needs an environment and refuses what this server cannot honour.
func (in *triggerInput) Resolve(huma.Context) []error {
	b := in.Body
	errs := nilIDs(map[string]*uuid.UUID{"body.build_id": &b.BuildID, "body.registry_id": b.RegistryID})
	switch {
	case b.Name == "" && b.RegistryID == nil:
		errs = append(errs, &huma.ErrorDetail{Location: "body.name", Message: "name the environment (name) or give registry_id"})
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
	key := models.BuildSourceKey(c.TeamID, b.BuildID)
	if _, err := s.bucket.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) {
		// A build that started has consumed its upload: triggering it again returns it.
		if built, err := s.store.GetBuildFor(ctx, c, b.BuildID); err == nil {
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
	build, _, err := s.store.TriggerBuild(ctx, c, models.TriggerBuild{UploadID: b.BuildID, RegistryID: b.RegistryID, Name: b.Name, RuntimeConfig: b.RuntimeConfig,
		Options: models.BuildOptions{Source: b.Source, EntryFolder: b.EntryFolder, BuildArgs: b.BuildArgs, EnvironmentVariables: b.EnvironmentVariables,
			NoCache: b.NoCache, RuntimeProvider: b.RuntimeProvider}, Secrets: sealed})
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !models.BuildTerminal(build.Status) {
		if err := s.builds.StartBuild(ctx, build.ID); err != nil {
			id := requestIDFrom(ctx)
			s.log.ErrorContext(ctx, "start build", "request_id", id, "build", build.ID, "error", err)
			return nil, newAPIError(http.StatusServiceUnavailable, "the build was recorded but its workflow could not start; trigger it again (request id "+id+")")
		}
	}
	return &buildOutput{Body: buildFromModel(build)}, nil
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
	builds, total, err := s.store.ListBuilds(ctx, callerFrom(ctx), in.RegistryID, in.Limit)
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
	b, err := s.store.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}

type buildLogsInput struct {
	BuildID  uuid.UUID `path:"build_id"`
	AfterSeq int       `query:"after_seq" default:"-1" minimum:"-1" maximum:"2147483647" doc:"return lines after this seq; -1 from the first"`
	Limit    int       `query:"limit" default:"500" minimum:"1" maximum:"5000"`
}

// BuildLogLine is one line of a build's log.
type BuildLogLine struct {
	Seq  int       `json:"seq"`
	Time time.Time `json:"time"`
	Line string    `json:"line"`
}

// BuildLogs is a page of a build's log.
type BuildLogs struct {
	BuildID uuid.UUID      `json:"build_id"`
	Status  string         `json:"status" doc:"the build's status when the page was read"`
	Logs    []BuildLogLine `json:"logs"`
	HasMore bool           `json:"has_more" doc:"more lines are stored after this page"`
	Done    bool           `json:"done" doc:"the build had ended before this page was read, and the page holds its last line"`
}

type buildLogsOutput struct{ Body *BuildLogs }

// getBuildLogs serves GET /v2/builds/{build_id}/logs: a page of a build's log.
func (s *Server) getBuildLogs(ctx context.Context, in *buildLogsInput) (*buildLogsOutput, error) {
	b, err := s.store.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	// The status is read before the lines: a build that had ended has written its whole log.
	lines, err := s.store.BuildLogs(ctx, b.ID, in.AfterSeq, in.Limit+1)
	if err != nil {
		return nil, err
	}
	out := &BuildLogs{BuildID: b.ID, Status: b.Status, Logs: make([]BuildLogLine, 0, len(lines)), HasMore: len(lines) > in.Limit}
	for _, l := range lines[:min(len(lines), in.Limit)] {
		out.Logs = append(out.Logs, BuildLogLine{Seq: l.Seq, Time: l.Time, Line: l.Line})
	}
	out.Done = models.BuildTerminal(b.Status) && !out.HasMore
	return &buildLogsOutput{Body: out}, nil
}

// cancelBuild serves POST /v2/builds/{build_id}/cancel: cancel a build.
func (s *Server) cancelBuild(ctx context.Context, in *buildPath) (*buildOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	c := callerFrom(ctx)
	b, err := s.store.GetBuildFor(ctx, c, in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !b.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the build is read-only for the caller")
	}
	if !models.BuildTerminal(b.Status) {
		if err := s.builds.CancelBuild(ctx, b.ID); err != nil {
			return nil, err
		}
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}

type discoveredOutput struct{ Body []Scenario }

// discoverTimeout bounds the deprecated discover-scenarios route.
const discoverTimeout = 2 * time.Minute

// discoverBuildScenarios serves POST /v2/builds/{build_id}/discover-scenarios (deprecated).
func (s *Server) discoverBuildScenarios(ctx context.Context, in *buildPath) (*discoveredOutput, error) {
	if err := s.requireBuilds(); err != nil {
		return nil, err
	}
	b, err := s.store.GetBuildFor(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	if !b.CanEdit {
		return nil, newAPIError(http.StatusForbidden, "the build is read-only for the caller")
	}
	if b.Status != models.BuildSucceeded {
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
			sc.Slug = models.Slugify(sc.Name)
		}
		out.Body[i] = scenarioFromModel(sc)
	}
	return out, nil
}

// setLatestBuild serves POST /v2/builds/{build_id}/set-latest: make a build the one new runs use.
func (s *Server) setLatestBuild(ctx context.Context, in *buildPath) (*buildOutput, error) {
	b, err := s.store.SetLatestBuild(ctx, callerFrom(ctx), in.BuildID)
	if err != nil {
		return nil, storeError(err, "build")
	}
	return &buildOutput{Body: buildFromModel(&b.Build)}, nil
}

func (s *Server) registerBuildSource() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-build-source", Method: http.MethodGet, Path: "/builds/{build_id}/source", Tags: tags,
		Summary:     "Browse a build's source",
		Description: "The entries of one folder of the uploaded source (path empty: its root), by name, paged with cursor. status is the source index's: pending until the build has unpacked the source, then ready or failed.",
		Errors:      []int{http.StatusNotFound, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.listBuildSource)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "preview-build-source", Method: http.MethodGet, Path: "/builds/{build_id}/source/preview", Tags: tags,
		Summary:     "Read a file of a build's source",
		Description: "A text file's content, up to 1 MiB; a larger or binary file is refused (download it instead).",
		Errors:      []int{http.StatusNotFound, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.previewBuildSource)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "download-build-source", Method: http.MethodGet, Path: "/builds/{build_id}/source/download", Tags: tags,
		Summary: "Get a download link for a file of a build's source", Description: "A presigned GET URL, valid for expires_in seconds.",
		Errors: []int{http.StatusNotFound, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.downloadBuildSource)
}

// Bounds of the source routes.
const (
	previewMaxBytes  = 1 << 20
	downloadMaxBytes = 256 << 20
	downloadURLTTL   = 15 * time.Minute
)

type sourceListInput struct {
	BuildID uuid.UUID `path:"build_id"`
	Path    string    `query:"path" maxLength:"4096" doc:"A folder of the source; empty for its root"`
	Cursor  string    `query:"cursor" maxLength:"4096" doc:"next_cursor of the previous page"`
	Limit   int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

type sourceListOutput struct {
	Body struct {
		BuildID    uuid.UUID            `json:"build_id"`
		Status     string               `json:"status" example:"pending" doc:"The source index's: pending, ready or failed"`
		Path       string               `json:"path"`
		Entries    []models.SourceEntry `json:"entries" nullable:"false"`
		Error      string               `json:"error"`
		NextCursor *string              `json:"next_cursor" doc:"Set when more entries follow"`
	}
}

// sourceIndex reads a visible build and, once it is ready, its source index.
func (s *Server) sourceIndex(ctx context.Context, id uuid.UUID) (*models.BuildRow, []models.SourceEntry, error) {
	if s.bucket == nil {
		return nil, nil, newAPIError(http.StatusServiceUnavailable, "this server stores no build sources")
	}
	b, err := s.store.GetBuildFor(ctx, callerFrom(ctx), id)
	if err != nil {
		return nil, nil, storeError(err, "build")
	}
	if b.SourceIndexStatus != "ready" {
		return b, nil, nil
	}
	rc, err := s.bucket.Get(ctx, models.SourceIndexKey(b.TeamID, b.ID))
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	var entries []models.SourceEntry
	if err := json.NewDecoder(rc).Decode(&entries); err != nil {
		return nil, nil, fmt.Errorf("source index of build %s: %w", b.ID, err)
	}
	return b, entries, nil
}

// cleanSourcePath is a path within a source, with slashes, or a 422.
func cleanSourcePath(p string, allowRoot bool) (string, error) {
	p = strings.Trim(p, "/")
	if p == "" || p == "." {
		if allowRoot {
			return "", nil
		}
		return "", validation("query.path", "name a file of the source", p)
	}
	if !filepath.IsLocal(p) {
		return "", validation("query.path", "a path within the source", p)
	}
	return pathpkg.Clean(p), nil
}

// listBuildSource serves GET /v2/builds/{build_id}/source: browse a build's source.
func (s *Server) listBuildSource(ctx context.Context, in *sourceListInput) (*sourceListOutput, error) {
	dir, err := cleanSourcePath(in.Path, true)
	if err != nil {
		return nil, err
	}
	b, entries, err := s.sourceIndex(ctx, in.BuildID)
	if err != nil {
		return nil, err
	}
	out := &sourceListOutput{}
	out.Body.BuildID, out.Body.Status, out.Body.Path, out.Body.Entries = b.ID, b.SourceIndexStatus, dir, []models.SourceEntry{}
	if b.SourceIndexStatus == "failed" {
		out.Body.Error = b.ErrorMessage
	}
	if entries == nil {
		return out, nil
	}
	found := dir == ""
	for _, e := range entries {
		if e.Path == dir && e.Type == "dir" {
			found = true
		}
		parent := pathpkg.Dir(e.Path)
		if parent == "." {
			parent = ""
		}
		if parent != dir || (in.Cursor != "" && e.Name <= in.Cursor) {
			continue
		}
		if len(out.Body.Entries) == in.Limit {
			next := out.Body.Entries[len(out.Body.Entries)-1].Name
			out.Body.NextCursor = &next
			break
		}
		out.Body.Entries = append(out.Body.Entries, e)
	}
	if !found {
		return nil, newAPIError(http.StatusNotFound, "no folder "+bound(dir)+" in the build's source")
	}
	return out, nil
}

type sourceFileInput struct {
	BuildID uuid.UUID `path:"build_id"`
	Path    string    `query:"path" required:"true" maxLength:"4096" doc:"A file of the source"`
}

type sourcePreviewOutput struct {
	Body struct {
		BuildID     uuid.UUID `json:"build_id"`
		Path        string    `json:"path"`
		Content     string    `json:"content"`
		Size        int64     `json:"size"`
		ContentHash string    `json:"content_hash" doc:"sha256:<hex>"`
		ContentType string    `json:"content_type"`
	}
}

// sourceRead is one file read from a build's source.
type sourceRead struct {
	build   *models.BuildRow
	entry   models.SourceEntry
	content []byte
}

// sourceFile reads one file of a build's source, within max bytes.
func (s *Server) sourceFile(ctx context.Context, in *sourceFileInput, max int64, what string) (*sourceRead, error) {
	name, err := cleanSourcePath(in.Path, false)
	if err != nil {
		return nil, err
	}
	b, entries, err := s.sourceIndex(ctx, in.BuildID)
	if err != nil {
		return nil, err
	}
	if entries == nil {
		return nil, newAPIError(http.StatusNotFound, "the build's source is not indexed ("+b.SourceIndexStatus+")")
	}
	var entry *models.SourceEntry
	for i := range entries {
		if entries[i].Path == name && entries[i].Type == "file" {
			entry = &entries[i]
		}
	}
	if entry == nil {
		return nil, newAPIError(http.StatusNotFound, "no file "+bound(name)+" in the build's source")
	}
	if entry.Size > max {
		return nil, validation("query.path", fmt.Sprintf("%s is %d bytes, over the %d a %s takes", name, entry.Size, max, what), in.Path)
	}
	tmp, err := os.MkdirTemp("", "proctor-source-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "source")
	if err := blob.Download(ctx, s.bucket, b.SourceKey, src); err != nil {
		return nil, err
	}
	content, err := archive.ReadFile(src, name, max)
	switch {
	case errors.Is(err, archive.ErrNoEntry):
		return nil, newAPIError(http.StatusNotFound, "no file "+bound(name)+" in the build's source archive")
	case errors.Is(err, archive.ErrUnsafe):
		return nil, validation("query.path", bound(err.Error()), in.Path)
	case err != nil:
		return nil, err
	}
	return &sourceRead{build: b, entry: *entry, content: content}, nil
}

// textPreview answers a preview of a file's content, or a 422 for a binary one (asked for at
// rawPath, which the error echoes; elsewhere says where to get it instead).
func textPreview(buildID uuid.UUID, path string, content []byte, rawPath, elsewhere string) (*sourcePreviewOutput, error) {
	if bytes.IndexByte(content, 0) >= 0 || !utf8.Valid(content) {
		return nil, validation("query.path", "a binary file cannot be previewed; "+elsewhere, rawPath)
	}
	sum := sha256.Sum256(content)
	out := &sourcePreviewOutput{}
	out.Body.BuildID, out.Body.Path, out.Body.Content, out.Body.Size = buildID, path, string(content), int64(len(content))
	out.Body.ContentHash, out.Body.ContentType = "sha256:"+hex.EncodeToString(sum[:]), http.DetectContentType(content)
	return out, nil
}

// previewBuildSource serves GET /v2/builds/{build_id}/source/preview: read a file of a build's source.
func (s *Server) previewBuildSource(ctx context.Context, in *sourceFileInput) (*sourcePreviewOutput, error) {
	f, err := s.sourceFile(ctx, in, previewMaxBytes, "preview")
	if err != nil {
		return nil, err
	}
	return textPreview(f.build.ID, f.entry.Path, f.content, in.Path, "download it")
}

type sourceDownloadOutput struct {
	Body struct {
		BuildID   uuid.UUID `json:"build_id"`
		Path      string    `json:"path"`
		URL       string    `json:"url"`
		ExpiresIn int       `json:"expires_in" doc:"Seconds the URL stays valid"`
	}
}

// downloadBuildSource serves GET /v2/builds/{build_id}/source/download: a download link for a file.
func (s *Server) downloadBuildSource(ctx context.Context, in *sourceFileInput) (*sourceDownloadOutput, error) {
	f, err := s.sourceFile(ctx, in, downloadMaxBytes, "download")
	if err != nil {
		return nil, err
	}
	b, entry, content := f.build, f.entry, f.content
	// Content-addressed beside the build's source: a second download reuses the object.
	key := fmt.Sprintf("builds/%s/%s/files/%s", b.TeamID, b.ID, entry.SHA256)
	if _, err := s.bucket.Stat(ctx, key); errors.Is(err, blob.ErrNotFound) {
		if err := s.bucket.Put(ctx, key, bytes.NewReader(content), http.DetectContentType(content)); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	url, err := s.bucket.SignedURL(ctx, key, http.MethodGet, downloadURLTTL)
	if err != nil {
		return nil, err
	}
	out := &sourceDownloadOutput{}
	out.Body.BuildID, out.Body.Path, out.Body.URL, out.Body.ExpiresIn = b.ID, entry.Path, url, int(downloadURLTTL.Seconds())
	return out, nil
}

func (s *Server) registerBuildWorkspace() {
	tags := []string{"Builds"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "preview-build-workspace", Method: http.MethodGet, Path: "/builds/{build_id}/workspace/preview", Tags: tags,
		Summary:     "Read a file of a build's workspace",
		Description: "A text file of the built image's working directory, up to 1 MiB (the same shape as a source preview).",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, authKeyOrSession), s.previewBuildWorkspace)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "download-build-workspace", Method: http.MethodGet, Path: "/builds/{build_id}/workspace/download", Tags: tags,
		Summary:     "Download a build's workspace",
		Description: "The built image's working directory as a gzipped tar archive.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
		Responses: map[string]*huma.Response{"200": {Description: "The archive",
			Content: map[string]*huma.MediaType{"application/gzip": {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}}}}},
	}, authKeyOrSession), s.downloadBuildWorkspace)
}

// builtImage opens a visible succeeded build's image; cleanup removes what was fetched for it.
func (s *Server) builtImage(ctx context.Context, id uuid.UUID) (*models.BuildRow, v1.Image, string, func(), error) {
	none := func() {}
	if s.bucket == nil {
		return nil, nil, "", none, newAPIError(http.StatusServiceUnavailable, "this server stores no images")
	}
	b, err := s.store.GetBuildFor(ctx, callerFrom(ctx), id)
	if err != nil {
		return nil, nil, "", none, storeError(err, "build")
	}
	if b.Status != models.BuildSucceeded || b.ImageKey == "" {
		return nil, nil, "", none, newAPIError(http.StatusConflict, "the build is "+b.Status+" and has no image")
	}
	dir, err := os.MkdirTemp("", "proctor-workspace-")
	if err != nil {
		return nil, nil, "", none, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	fail := func(err error) (*models.BuildRow, v1.Image, string, func(), error) {
		cleanup()
		return nil, nil, "", none, err
	}
	img, err := image.Fetch(ctx, s.bucket, b.ImageKey, b.ImageName, dir)
	if err != nil {
		return fail(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fail(err)
	}
	workDir := cf.Config.WorkingDir
	if workDir == "" {
		workDir = "/"
	}
	return b, img, workDir, cleanup, nil
}

// previewBuildWorkspace serves GET /v2/builds/{build_id}/workspace/preview: read a file of a build's workspace.
func (s *Server) previewBuildWorkspace(ctx context.Context, in *sourceFileInput) (*sourcePreviewOutput, error) {
	name, err := cleanSourcePath(in.Path, false)
	if err != nil {
		return nil, err
	}
	b, img, workDir, cleanup, err := s.builtImage(ctx, in.BuildID)
	defer cleanup()
	if err != nil {
		return nil, err
	}
	content, err := image.WorkspaceFile(img, workDir, name, previewMaxBytes)
	switch {
	case errors.Is(err, image.ErrNotInWorkspace):
		return nil, newAPIError(http.StatusNotFound, "no file "+bound(name)+" in the build's workspace ("+workDir+")")
	case errors.Is(err, archive.ErrUnsafe):
		return nil, validation("query.path", "over the 1 MiB a preview takes; download the workspace", in.Path)
	case err != nil:
		return nil, err
	}
	return textPreview(b.ID, name, content, in.Path, "download the workspace")
}

// downloadBuildWorkspace serves GET /v2/builds/{build_id}/workspace/download: the built workspace as an archive.
func (s *Server) downloadBuildWorkspace(ctx context.Context, in *buildPath) (*huma.StreamResponse, error) {
	b, img, workDir, cleanup, err := s.builtImage(ctx, in.BuildID)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		defer cleanup()
		hctx.SetHeader("Content-Type", "application/gzip")
		hctx.SetHeader("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-workspace.tar.gz"`, b.ID))
		if err := image.WriteWorkspace(img, workDir, hctx.BodyWriter()); err != nil {
			s.log.ErrorContext(ctx, "workspace download", "build", b.ID, "error", err)
		}
	}}, nil
}
