package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
)

// WriteArchive writes img, named ref, as an OCI archive to w and returns its digest.
func WriteArchive(img v1.Image, ref string, w io.Writer) (string, error) {
	dir, err := os.MkdirTemp("", "proctor-layout-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return "", err
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefAnnotation: ref})); err != nil {
		return "", err
	}
	digest, err := img.Digest()
	if err != nil {
		return "", err
	}
	_, err = archive.WriteTar(w, dir, nil)
	return digest.String(), err
}

// ReadArchive opens the image of an OCI archive, unpacking the archive into dir (an existing
// empty directory, which must outlive the image's use); the image named ref, or the only one.
func ReadArchive(path, dir, ref string) (v1.Image, error) {
	if _, err := archive.ExtractFile(path, dir, archive.Limits{MaxBytes: 8 << 30, MaxEntries: 10_000}); err != nil {
		return nil, fmt.Errorf("image: unpack the OCI archive: %w", err)
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("image: not an OCI layout: %w", err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if ref == "" && len(m.Manifests) == 1 || d.Annotations[RefAnnotation] == ref {
			return p.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("image: no image %q in the archive", ref)
}

// Fetch reads the image named ref from the OCI archive stored at key, using dir (an existing
// empty directory, which must outlive the image's use) for the archive and its layout.
func Fetch(ctx context.Context, b blob.Bucket, key, ref, dir string) (v1.Image, error) {
	archivePath := filepath.Join(dir, "image.oci.tar")
	if err := blob.Download(ctx, b, key, archivePath); err != nil {
		return nil, fmt.Errorf("image: fetch %s: %w", key, err)
	}
	layoutDir := filepath.Join(dir, "layout")
	if err := os.Mkdir(layoutDir, 0o700); err != nil {
		return nil, err
	}
	return ReadArchive(archivePath, layoutDir, ref)
}

// WriteDockerArchive writes img as a `docker save` tarball tagged ref, the form a container
// engine's image load takes (Docker and Podman alike).
func WriteDockerArchive(img v1.Image, ref string, w io.Writer) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	return tarball.Write(tag, img, w)
}
