package activities

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
)

// imageSpec is how a sandbox runs a build: from its image's unpacked root file system, or, for
// builds that record a host command (the process provider's), that command. An image served by
// the shell server (a Harbor task's) asks for a writable root: its tasks change it anywhere.
func (a *Activities) imageSpec(ctx context.Context, b *models.Build) (sandbox.Spec, error) {
	argv, err := buildCommand(b)
	if err != nil {
		return sandbox.Spec{}, err
	}
	if _, ok := a.Sandboxes.(sandbox.ImageRunner); ok {
		if b.ImageKey == "" {
			return sandbox.Spec{}, envError("build %s has no image, and this worker runs sandboxes as containers: rebuild the environment", b.ID)
		}
		return sandbox.Spec{Command: argv, Image: a.engineImage(b), WritableRoot: b.Options.ShellServer}, nil
	}
	if b.ImageKey == "" {
		return sandbox.Spec{Command: argv}, nil
	}
	root, err := a.images().rootFS(ctx, a, b)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{Command: argv, RootFS: root, WritableRoot: b.Options.ShellServer}, nil
}

// engineImage is b's image as a container engine loads it: named by its digest, read from the
// bucket only when the engine does not have it yet.
func (a *Activities) engineImage(b *models.Build) *sandbox.Image {
	ref := "proctor.local/env:" + strings.TrimPrefix(b.Digest, "sha256:")
	return &sandbox.Image{Ref: ref, Load: func(ctx context.Context, w io.Writer) error {
		if a.Build == nil || a.Build.Bucket == nil {
			return errors.New("this worker has no image store configured")
		}
		if err := os.MkdirAll(a.Build.Dir, 0o700); err != nil {
			return err
		}
		tmp, err := os.MkdirTemp(a.Build.Dir, "load-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		img, err := image.Fetch(ctx, a.Build.Bucket, b.ImageKey, b.ImageName, tmp)
		if err != nil {
			return err
		}
		if d, err := img.Digest(); err != nil || d.String() != b.Digest {
			return fmt.Errorf("image %s: digest %v does not match the build's %s", b.ImageKey, d, b.Digest)
		}
		return image.WriteDockerArchive(img, ref, w)
	}}
}

// imageCache unpacks each image once per host, by digest.
type imageCache struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (a *Activities) images() *imageCache {
	a.imagesOnce.Do(func() { a.imageCache = &imageCache{locks: map[string]*sync.Mutex{}} })
	return a.imageCache
}

// rootFS is the unpacked root file system of b's image on this host.
func (c *imageCache) rootFS(ctx context.Context, a *Activities, b *models.Build) (string, error) {
	if a.Build == nil || a.Build.Bucket == nil {
		return "", errors.New("this worker has no image store configured")
	}
	digest := strings.TrimPrefix(b.Digest, "sha256:")
	if digest == "" || strings.ContainsAny(digest, "/.") {
		return "", envError("build %s records no image digest", b.ID)
	}
	dir := filepath.Join(a.Build.Dir, "images", digest)
	root := filepath.Join(dir, "rootfs")
	c.mu.Lock()
	l := c.locks[digest]
	if l == nil {
		l = &sync.Mutex{}
		c.locks[digest] = l
	}
	c.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if _, err := os.Stat(root); err == nil {
		return root, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "unpack-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	img, err := image.Fetch(ctx, a.Build.Bucket, b.ImageKey, b.ImageName, tmp)
	if err != nil {
		return "", err
	}
	rootDir := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootDir, 0o700); err != nil {
		return "", err
	}
	if d, err := img.Digest(); err != nil || d.String() != b.Digest {
		return "", fmt.Errorf("image %s: digest %v does not match the build's %s", b.ImageKey, d, b.Digest)
	}
	if _, err := image.Unpack(img, rootDir, archive.Limits{MaxBytes: 8 << 30, MaxEntries: 1_000_000}); err != nil {
		return "", err
	}
	if err := os.Chmod(rootDir, 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(rootDir, root); err != nil {
		// Another process on this host (sharing the build dir) unpacked it first.
		if _, serr := os.Stat(root); serr == nil {
			return root, nil
		}
		return "", err
	}
	return root, nil
}
