package image

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/proctorhq/proctor/internal/archive"
)

// Unpack writes img's root file system into dst (an existing empty directory), with the /dev,
// /proc and /tmp a sandbox mounts over, and returns its config. Its symbolic links are kept as
// the image has them, absolute ones too (archive.ExtractRootFS): read the tree through os.Root,
// or in a sandbox whose root it is.
func Unpack(img v1.Image, dst string, lim archive.Limits) (v1.Config, error) {
	cf, err := img.ConfigFile()
	if err != nil {
		return v1.Config{}, err
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	if _, err := archive.ExtractRootFS(rc, dst, lim); err != nil {
		return v1.Config{}, fmt.Errorf("image: unpack the root file system: %w", err)
	}
	// The mount points a sandbox needs, which images built from a Dockerfile often lack.
	root, err := os.OpenRoot(dst)
	if err != nil {
		return v1.Config{}, err
	}
	defer root.Close()
	for _, d := range []string{"dev", "proc", "tmp"} {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return v1.Config{}, fmt.Errorf("image: mount point /%s: %w", d, err)
		}
	}
	return cf.Config, nil
}

// ErrNotInWorkspace is returned for a path the image's working directory does not hold.
var ErrNotInWorkspace = errors.New("no such file in the image's working directory")

// workspaceEntries walks the files of img under its working directory (dir, absolute), calling
// fn with each entry's path relative to dir.
func workspaceEntries(img v1.Image, dir string, fn func(rel string, h *tar.Header, r io.Reader) (stop bool, err error)) error {
	prefix := strings.Trim(dir, "/")
	if prefix != "" {
		prefix += "/"
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/")
		if !strings.HasPrefix(name, prefix) || name == prefix {
			continue
		}
		stop, err := fn(strings.TrimSuffix(strings.TrimPrefix(name, prefix), "/"), h, tr)
		if err != nil || stop {
			return err
		}
	}
}

// WorkspaceFile reads the regular file at rel (a path within the working directory dir of img),
// or refuses one over max bytes.
func WorkspaceFile(img v1.Image, dir, rel string, max int64) ([]byte, error) {
	var out []byte
	found := false
	err := workspaceEntries(img, dir, func(name string, h *tar.Header, r io.Reader) (bool, error) {
		if name != rel || h.Typeflag != tar.TypeReg {
			return false, nil
		}
		found = true
		if h.Size > max {
			return true, fmt.Errorf("%w: %s is %d bytes, over %d", archive.ErrUnsafe, rel, h.Size, max)
		}
		b, err := io.ReadAll(io.LimitReader(r, max+1))
		out = b
		return true, err
	})
	if err == nil && !found {
		err = fmt.Errorf("%w: %s", ErrNotInWorkspace, rel)
	}
	return out, err
}

// WriteWorkspace writes img's working directory dir as a gzipped tar to w, paths relative to it.
func WriteWorkspace(img v1.Image, dir string, w io.Writer) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	err := workspaceEntries(img, dir, func(name string, h *tar.Header, r io.Reader) (bool, error) {
		hh := *h
		hh.Name = name
		if h.Typeflag == tar.TypeDir {
			hh.Name += "/"
		}
		if err := tw.WriteHeader(&hh); err != nil {
			return true, err
		}
		if h.Typeflag == tar.TypeReg {
			_, err := io.Copy(tw, r)
			return false, err
		}
		return false, nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}
