package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/danielgtaylor/huma/v2"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

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
	b, err := s.registry.GetBuildFor(ctx, callerFrom(ctx), id)
	if err != nil {
		return nil, nil, "", none, storeError(err, "build")
	}
	if b.Status != registry.BuildSucceeded || b.ImageKey == "" {
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
