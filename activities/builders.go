package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// buildJob is one build as a builder sees it.
type buildJob struct {
	build *models.Build
	// src is the unpacked source, entryDir its entry folder (entry, as the build names it).
	src, entry, entryDir string
	// index lists the unpacked source, each file with its sha256 (indexSource).
	index []registry.SourceEntry
	// work is the build's scratch directory.
	work string
	// ref names the image (name:version); the builder writes it as an OCI archive at imagePath.
	ref, imagePath string
	log            io.Writer
}

// builder makes an image from an unpacked source. chooseBuilder picks one per build, from what the
// build asks for and what its source holds.
type builder interface {
	// build writes the job's image and returns its digest and the command that serves it.
	build(ctx context.Context, job buildJob) (digest string, command []string, err error)
}

// chooseBuilder picks how a build makes its image: the bundled examples' binary when the build
// names one, buildah when the entry folder has a Dockerfile, else the Go toolchain.
func (a *Activities) chooseBuilder(b *models.Build, entryDir string) (builder, error) {
	if b.Options.ShellServer {
		if _, err := os.Stat(filepath.Join(entryDir, "Dockerfile")); err != nil {
			return nil, buildFailed("the build asks for the shell server, which is added to a Dockerfile's image: the source has no Dockerfile in %s", cmp.Or(b.Options.EntryFolder, "its root"))
		}
		if a.Build.Shell == "" {
			return nil, buildFailed("the build asks for the shell server, and this build worker has none: give it proctor-shell (--shell-server, or proctor-shell beside the proctor binary)")
		}
		if err := sandbox.CheckStatic(a.Build.Shell); err != nil {
			return nil, buildFailed("this build worker's shell server cannot go into any image: %v", err)
		}
	}
	if name := b.Options.Bundled; name != "" {
		if a.Build.Bundled == "" {
			return nil, buildFailed("the build packages the bundled example %q, and this worker carries no bundled examples", name)
		}
		return bundledBuilder{binary: a.Build.Bundled, dir: filepath.Join(a.Build.Dir, "bundled"), example: name}, nil
	}
	if _, err := os.Stat(filepath.Join(entryDir, "Dockerfile")); err == nil {
		return dockerfileBuilder{a: a}, nil
	}
	return goBuilder{a: a}, nil
}

// bundledBuilder packages a binary that serves the bundled examples: the worker's own, or
// proctor-examples beside it (see BuildConfig.Bundled).
type bundledBuilder struct {
	binary, dir, example string
}

func (bb bundledBuilder) build(_ context.Context, job buildJob) (string, []string, error) {
	fmt.Fprintf(job.log, "bundled example %s: packaging %s, which serves it (no compiler needed)\n", bb.example, filepath.Base(bb.binary))
	img, err := image.BinaryImage(bb.binary, bb.dir)
	if err != nil {
		return "", nil, fmt.Errorf("package the bundled examples: %w", err)
	}
	digest, err := writeImage(img, job.ref, job.imagePath)
	return digest, []string{image.Entrypoint, "example-env", bb.example}, err
}

// dockerfileBuilder builds the entry folder's Dockerfile with buildah.
type dockerfileBuilder struct{ a *Activities }

func (db dockerfileBuilder) build(ctx context.Context, job buildJob) (string, []string, error) {
	fmt.Fprintf(job.log, "buildah: Dockerfile in %s\n", job.entry)
	if err := db.a.dockerfileBuild(ctx, job.build, job.entryDir, job.ref, job.imagePath, job.log); err != nil {
		return "", nil, err
	}
	layoutDir := filepath.Join(job.work, "layout")
	if err := os.Mkdir(layoutDir, 0o700); err != nil {
		return "", nil, err
	}
	img, err := image.ReadArchive(job.imagePath, layoutDir, job.ref)
	if err != nil {
		return "", nil, fmt.Errorf("read the built image: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return "", nil, err
	}
	command := append(slices.Clone(cf.Config.Entrypoint), cf.Config.Cmd...)
	if job.build.Options.ShellServer {
		return db.addShell(img, job)
	}
	if len(command) == 0 {
		return "", nil, buildFailed("the image has no ENTRYPOINT or CMD: name the environment server's command")
	}
	return d.String(), command, nil
}

// addShell rewrites the job's image with the shell server as its command (image.WithShell).
func (db dockerfileBuilder) addShell(img v1.Image, job buildJob) (string, []string, error) {
	img, command, err := image.WithShell(img, db.a.Build.Shell)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(job.log, "shell server: added as %s, the image's command (%s)\n", image.ShellInImage, strings.Join(command, " "))
	tmp := job.imagePath + ".shell"
	digest, err := writeImage(img, job.ref, tmp)
	if err != nil {
		return "", nil, err
	}
	return digest, command, os.Rename(tmp, job.imagePath)
}

// goBuilder compiles the entry folder's main package, ko-style, into a one-layer image.
type goBuilder struct{ a *Activities }

func (gb goBuilder) build(ctx context.Context, job buildJob) (string, []string, error) {
	module, pkg, err := goModule(job.src, job.entryDir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(job.log, "go build: module %s, package ./%s\n", relOrDot(job.src, module), filepath.ToSlash(pkg))
	if sealed, err := gb.a.registry().BuildSecrets(ctx, job.build.ID); err == nil && len(sealed) > 0 {
		fmt.Fprintf(job.log, "build secrets: %d given; a Go build does not use them (a Dockerfile's RUN steps do)\n", len(sealed))
	}
	cache, key := gb.a.Build.Cache, ""
	if cache != nil {
		var kerr error
		if key, kerr = cache.cacheKey(ctx, gb.a.Build, job); kerr != nil {
			fmt.Fprintf(job.log, "build cache: not used: %v\n", kerr)
			cache = nil
		} else if job.build.Options.NoCache {
			fmt.Fprintln(job.log, "build cache: no_cache: built anew")
		} else if got, ok := cache.load(key, job); ok {
			fmt.Fprintf(job.log, "build cache: this worker built the same source with the same options and toolchain before: its image %s is reused (no_cache builds anew)\n", got.Digest)
			return got.Digest, got.Command, nil
		}
	}
	img, err := image.BuildGo(ctx, image.GoSpec{Dir: module, Package: pkg, GOPROXY: gb.a.Build.GOPROXY,
		EnvServer: gb.a.Build.EnvServer, Root: job.src, Log: job.log})
	if errors.Is(err, image.ErrBuild) {
		return "", nil, buildFailed("%v", err)
	}
	if err != nil {
		return "", nil, err
	}
	digest, err := writeImage(img, job.ref, job.imagePath)
	if err != nil {
		return "", nil, err
	}
	command := []string{image.Entrypoint}
	if cache != nil {
		if err := cache.store(key, img, cachedBuild{Digest: digest, Command: command}); err != nil {
			fmt.Fprintf(job.log, "build cache: the image was not kept: %v\n", err)
		}
	}
	return digest, command, nil
}

// writeImage writes img, named ref, as an OCI archive at path and returns its digest.
func writeImage(img v1.Image, ref, path string) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	digest, err := image.WriteArchive(img, ref, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("write the image: %w", err)
	}
	return digest, nil
}

// goModule finds the Go module an entry folder is in (the nearest go.mod at or above it, within
// the source) and the entry's package path relative to it.
func goModule(src, entryDir string) (module, pkg string, err error) {
	for dir := entryDir; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			rel, err := filepath.Rel(dir, entryDir)
			return dir, rel, err
		}
		if dir == src || !strings.HasPrefix(dir, src) {
			return "", "", buildFailed("no go.mod at or above the entry folder: a Go environment is a module (go mod init) whose main package serves envserver")
		}
	}
}

func relOrDot(base, p string) string {
	if r, err := filepath.Rel(base, p); err == nil {
		return r
	}
	return p
}
