package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	pathpkg "path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

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
		BuildID    uuid.UUID              `json:"build_id"`
		Status     string                 `json:"status" example:"pending" doc:"The source index's: pending, ready or failed"`
		Path       string                 `json:"path"`
		Entries    []registry.SourceEntry `json:"entries" nullable:"false"`
		Error      string                 `json:"error"`
		NextCursor *string                `json:"next_cursor" doc:"Set when more entries follow"`
	}
}

// sourceIndex reads a visible build and, once it is ready, its source index.
func (s *Server) sourceIndex(ctx context.Context, id uuid.UUID) (*models.BuildRow, []registry.SourceEntry, error) {
	if s.bucket == nil {
		return nil, nil, newAPIError(http.StatusServiceUnavailable, "this server stores no build sources")
	}
	b, err := s.registry.GetBuildFor(ctx, callerFrom(ctx), id)
	if err != nil {
		return nil, nil, storeError(err, "build")
	}
	if b.SourceIndexStatus != "ready" {
		return b, nil, nil
	}
	rc, err := s.bucket.Get(ctx, registry.SourceIndexKey(b.TeamID, b.ID))
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	var entries []registry.SourceEntry
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
	out.Body.BuildID, out.Body.Status, out.Body.Path, out.Body.Entries = b.ID, b.SourceIndexStatus, dir, []registry.SourceEntry{}
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
	entry   registry.SourceEntry
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
	var entry *registry.SourceEntry
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
