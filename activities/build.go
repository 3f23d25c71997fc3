package activities

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
)

// ErrBuildFailed is the application error type of a build that cannot succeed as given (its
// source, its code): not retried, its message is the build's error_message.
const ErrBuildFailed = "BuildFailed"

// BuildConfig is what build activities need of their host.
type BuildConfig struct {
	// Bucket holds uploaded sources and built images.
	Bucket blob.Bucket
	// Dir holds build work dirs and the unpacked images sandboxes run.
	Dir string
	// Limits bound an uploaded source archive once unpacked.
	Limits archive.Limits
	// GOPROXY is the module proxy Go builds may use ("off": only vendored modules and the
	// worker's module cache); empty keeps the worker's setting.
	GOPROXY string
	// EnvServer is a directory holding the envserver module, which Go builds supply to a source
	// that requires it without carrying it (image.GoSpec.EnvServer); empty: such a source must
	// vendor it.
	EnvServer string
	// Bundled is the path of a binary that serves the bundled example environments as
	// `BINARY example-env NAME` (the proctor binary): builds that name a bundled example
	// (models.BuildOptions.Bundled) package it instead of compiling. Empty: such builds fail.
	Bundled string
}

// BuildInput names a build.
type BuildInput struct {
	BuildID uuid.UUID `json:"build_id"`
}

// DiscoverInput names a build and the image it made, which discovery starts; without Image,
// discovery starts the image the build recorded when it finished (a succeeded build's).
type DiscoverInput struct {
	BuildID uuid.UUID        `json:"build_id"`
	Image   BuildImageResult `json:"image"`
}

// BuildImageResult is what a build made: its image, stored as an OCI archive in the bucket, and
// the command that serves it. The Build workflow hands it to discovery and FinishBuild records it.
type BuildImageResult struct {
	Digest    string   `json:"digest"`
	ImageKey  string   `json:"image_key"`
	ImageName string   `json:"image_name,omitempty"`
	Command   []string `json:"command,omitempty"`
}

func buildFailed(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrBuildFailed, nil)
}

// BuildImage is a build's pipeline: fetch and safely unpack its source (kept and indexed for
// browsing), choose the builder the source asks for (the bundled examples' binary, a Dockerfile,
// a Go module), build the image and store it in the bucket. Progress goes to the build's log;
// what was built is returned, for the workflow to record.
func (a *Activities) BuildImage(ctx context.Context, in BuildInput) (_ BuildImageResult, err error) {
	stop := keepAlive(ctx)
	defer stop()
	cfg := a.Build
	if cfg == nil || cfg.Bucket == nil {
		return BuildImageResult{}, errors.New("this worker has no build configuration")
	}
	b, err := a.Store.BuildByID(ctx, in.BuildID)
	if err != nil {
		return BuildImageResult{}, err
	}
	if models.BuildTerminal(b.Status) {
		return BuildImageResult{}, buildFailed("the build already ended (%s)", b.Status)
	}
	if err := a.Store.UpdateBuild(ctx, b.ID, models.BuildUpdate{Status: models.BuildRunning}); err != nil {
		return BuildImageResult{}, err
	}
	logw := a.buildLog(ctx, b.ID)
	defer logw.Close()
	defer func() {
		for _, line := range buildFailureLines(err) {
			fmt.Fprintln(logw, line)
		}
	}()
	fmt.Fprintf(logw, "build %s (version %d) on %s\n", b.ID, b.Version, hostname())

	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return BuildImageResult{}, err
	}
	work, err := os.MkdirTemp(cfg.Dir, "build-"+b.ID.String()[:8]+"-")
	if err != nil {
		return BuildImageResult{}, err
	}
	defer os.RemoveAll(work)
	src, err := a.unpackSource(ctx, b, work, logw)
	if err != nil {
		return BuildImageResult{}, err
	}
	entry, entryDir, err := entryFolder(src, b.Options.EntryFolder)
	if err != nil {
		return BuildImageResult{}, err
	}
	reg, err := a.Store.RegistryByID(ctx, b.RegistryID)
	if err != nil {
		return BuildImageResult{}, err
	}
	if p := b.Options.RuntimeProvider; p != "" && !slices.Contains(runtimeProviders, p) {
		return BuildImageResult{}, buildFailed("runtime_provider %q is none this platform runs: %s (a worker's --sandbox-provider decides which runs an attempt)",
			p, strings.Join(runtimeProviders, ", "))
	}
	bld, err := a.chooseBuilder(b, entryDir)
	if err != nil {
		return BuildImageResult{}, err
	}
	job := buildJob{build: b, src: src, entry: entry, entryDir: entryDir, work: work,
		ref: fmt.Sprintf("%s:%d", reg.Name, b.Version), imagePath: filepath.Join(work, "image.oci.tar"), log: logw}
	digest, command, err := bld.build(ctx, job)
	if err != nil {
		return BuildImageResult{}, err
	}
	key := fmt.Sprintf("images/%s/%s.oci.tar", b.TeamID, b.ID)
	if err := blob.Upload(ctx, cfg.Bucket, key, job.imagePath, "application/x-tar"); err != nil {
		return BuildImageResult{}, fmt.Errorf("store the image: %w", err)
	}
	fmt.Fprintf(logw, "image %s (%s) stored\n", job.ref, digest)
	return BuildImageResult{Digest: digest, ImageKey: key, ImageName: job.ref, Command: command}, nil
}

// buildFailureLines are the lines that end a build's log when err says the build cannot
// succeed, so that a follower of the log learns why where the build stopped: the reason's first
// line, or all of it when it lists problems (a compiler's output is in the log already). None
// for other errors.
func buildFailureLines(err error) []string {
	var appErr *temporal.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type() != ErrBuildFailed {
		return nil
	}
	why := strings.TrimPrefix(appErr.Message(), image.ErrBuild.Error()+": ")
	if first, rest, ok := strings.Cut(why, "\n"); ok && !strings.HasPrefix(strings.TrimSpace(rest), "- ") {
		why = first
	}
	return strings.Split("build failed: "+why, "\n")
}

// unpackSource fetches a build's uploaded source into work, keeps it where no upload URL can
// write, unpacks it within the configured limits and indexes it for browsing. It returns the
// unpacked source's directory.
func (a *Activities) unpackSource(ctx context.Context, b *models.Build, work string, logw io.Writer) (string, error) {
	cfg := a.Build
	archivePath := filepath.Join(work, "source")
	if err := blob.Download(ctx, cfg.Bucket, b.SourceKey, archivePath); errors.Is(err, blob.ErrNotFound) {
		return "", buildFailed("no source was uploaded for this build: PUT the archive to the upload URL before triggering")
	} else if err != nil {
		return "", fmt.Errorf("fetch the source: %w", err)
	}
	if kept := models.KeptSourceKey(b.TeamID, b.ID); b.SourceKey != kept {
		// The build keeps what it read where no upload URL can write, and the upload is
		// consumed: a later PUT to its URL changes nothing.
		if err := blob.Upload(ctx, cfg.Bucket, kept, archivePath, "application/octet-stream"); err != nil {
			return "", fmt.Errorf("keep the source: %w", err)
		}
		if err := a.Store.UpdateBuild(ctx, b.ID, models.BuildUpdate{SourceKey: kept}); err != nil {
			return "", err
		}
		if err := cfg.Bucket.Delete(ctx, b.SourceKey); err != nil && !errors.Is(err, blob.ErrNotFound) {
			a.log().WarnContext(ctx, "delete a consumed upload", "build", b.ID, "key", b.SourceKey, "error", err)
		}
	}
	src := filepath.Join(work, "src")
	if err := os.Mkdir(src, 0o700); err != nil {
		return "", err
	}
	lim := cfg.Limits
	lim.MaxBytes = cmp.Or(lim.MaxBytes, archive.DefaultLimits.MaxBytes)
	lim.MaxEntries = cmp.Or(lim.MaxEntries, archive.DefaultLimits.MaxEntries)
	st, err := archive.ExtractFile(archivePath, src, lim)
	if errors.Is(err, archive.ErrUnsafe) {
		fmt.Fprintf(logw, "source refused: %v\n", err)
		a.Store.SetSourceIndexStatus(ctx, b.ID, "failed") //nolint:errcheck // the build fails either way
		return "", buildFailed("the source archive was refused: %s", strings.TrimPrefix(err.Error(), archive.ErrUnsafe.Error()+": "))
	}
	if err != nil {
		return "", fmt.Errorf("unpack the source: %w", err)
	}
	fmt.Fprintf(logw, "source: %d files, %d bytes\n", st.Files, st.Bytes)
	if err := a.indexSource(ctx, b, src); err != nil {
		return "", fmt.Errorf("index the source: %w", err)
	}
	return src, nil
}

// entryFolder resolves a build's entry_folder within its unpacked source: the folder's name as
// given ("." when empty) and its path.
func entryFolder(src, entry string) (string, string, error) {
	if entry == "" {
		entry = "."
	}
	if !filepath.IsLocal(entry) && entry != "." {
		return "", "", buildFailed("entry_folder %q is not a folder of the source", entry)
	}
	dir := filepath.Join(src, entry)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", "", buildFailed("entry_folder %q is not a folder of the source", entry)
	}
	return entry, dir, nil
}

// runtimeProviders are the runtime_provider values a build may name: the sandbox providers.
var runtimeProviders = []string{"process", "container", "kubernetes"}

// buildJob is one build as a builder sees it.
type buildJob struct {
	build *models.Build
	// src is the unpacked source, entryDir its entry folder (entry, as the build names it).
	src, entry, entryDir string
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

// bundledBuilder packages the worker's own binary, which serves the bundled examples.
type bundledBuilder struct {
	binary, dir, example string
}

func (bb bundledBuilder) build(_ context.Context, job buildJob) (string, []string, error) {
	fmt.Fprintf(job.log, "bundled example %s: packaging this worker's binary (no compiler needed)\n", bb.example)
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
	if len(command) == 0 {
		return "", nil, buildFailed("the image has no ENTRYPOINT or CMD: name the environment server's command")
	}
	return d.String(), command, nil
}

// goBuilder compiles the entry folder's main package, ko-style, into a one-layer image.
type goBuilder struct{ a *Activities }

func (gb goBuilder) build(ctx context.Context, job buildJob) (string, []string, error) {
	module, pkg, err := goModule(job.src, job.entryDir)
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(job.log, "go build: module %s, package ./%s\n", relOrDot(job.src, module), filepath.ToSlash(pkg))
	if sealed, err := gb.a.Store.BuildSecrets(ctx, job.build.ID); err == nil && len(sealed) > 0 {
		fmt.Fprintf(job.log, "build secrets: %d given; a Go build does not use them (a Dockerfile's RUN steps do)\n", len(sealed))
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
	return digest, []string{image.Entrypoint}, err
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

// indexSource lists the unpacked source for browsing (paths, types, sizes, hashes) and stores
// the list beside the source; the build's source_index_status becomes ready.
func (a *Activities) indexSource(ctx context.Context, b *models.Build, src string) error {
	entries := []models.SourceEntry{}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == src {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		e := models.SourceEntry{Path: filepath.ToSlash(rel), Name: d.Name(), Type: "file"}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			e.Type = "dir"
		case info.Mode()&fs.ModeSymlink != 0:
			e.Type = "symlink"
		default:
			e.Size = info.Size()
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			_, err = io.Copy(h, f)
			f.Close()
			if err != nil {
				return err
			}
			e.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return err
	}
	body, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	if err := a.Build.Bucket.Put(ctx, models.SourceIndexKey(b.TeamID, b.ID), bytes.NewReader(body), "application/json"); err != nil {
		return err
	}
	return a.Store.SetSourceIndexStatus(ctx, b.ID, "ready")
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

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// buildLogWriter is a writer whose lines go to the build's log, a few at a time.
type buildLogWriter struct {
	a       *Activities
	ctx     context.Context
	buildID uuid.UUID
	mu      sync.Mutex
	partial string
	pending []string
	last    time.Time
	timer   *time.Timer // flushes lines a quiet builder left pending
}

func (a *Activities) buildLog(ctx context.Context, id uuid.UUID) *buildLogWriter {
	return &buildLogWriter{a: a, ctx: context.WithoutCancel(ctx), buildID: id, last: time.Now()}
}

func (w *buildLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	sc := bufio.NewScanner(strings.NewReader(w.partial + string(p)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	w.partial = ""
	if len(p) > 0 && p[len(p)-1] != '\n' && len(lines) > 0 {
		w.partial, lines = lines[len(lines)-1], lines[:len(lines)-1]
	}
	w.pending = append(w.pending, lines...)
	switch {
	case time.Since(w.last) > 500*time.Millisecond || len(w.pending) > 200:
		w.flush()
	case len(w.pending) > 0 && w.timer == nil:
		// A follower sees these lines within half a second even if the builder falls silent.
		w.timer = time.AfterFunc(500*time.Millisecond, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.timer = nil
			w.flush()
		})
	}
	return len(p), nil
}

func (w *buildLogWriter) flush() {
	if len(w.pending) == 0 {
		return
	}
	if err := w.a.Store.AppendBuildLog(w.ctx, w.buildID, w.pending); err != nil {
		w.a.log().Warn("build log", "build", w.buildID, "error", err)
	}
	w.pending, w.last = nil, time.Now()
}

// Close writes what is left.
func (w *buildLogWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if w.partial != "" {
		w.pending, w.partial = append(w.pending, w.partial), ""
	}
	w.flush()
	return nil
}

// FinishBuild records how a build ended.
func (a *Activities) FinishBuild(ctx context.Context, in FinishBuildInput) (string, error) {
	b, err := a.Store.FinishBuild(ctx, in.BuildID, models.BuildResult{Status: in.Status, Error: in.Error, Lock: in.Lock, Scenarios: ScenarioRows(in.Scenarios),
		Image: models.BuiltImage{Digest: in.Image.Digest, ImageKey: in.Image.ImageKey, ImageName: in.Image.ImageName, Command: in.Image.Command}})
	if err != nil {
		return "", err
	}
	return b.Status, nil
}

// FinishBuildInput is how a build ended.
type FinishBuildInput struct {
	BuildID uuid.UUID `json:"build_id"`
	Status  string    `json:"status"`
	Error   string    `json:"error,omitempty"`
	// Lock and Scenarios are what discovery found, for a build that succeeded.
	Lock      models.BuildLock         `json:"lock,omitzero"`
	Scenarios []envserver.ScenarioInfo `json:"scenarios,omitempty"`
	// Image is what the build made, when it got that far.
	Image BuildImageResult `json:"image,omitzero"`
}

// imageSpec is how a sandbox runs a build: from its image's unpacked root file system, or, for
// builds that record a host command (the process provider's), that command.
func (a *Activities) imageSpec(ctx context.Context, b *models.Build) (sandbox.Spec, error) {
	argv, err := buildCommand(b)
	if err != nil {
		return sandbox.Spec{}, err
	}
	if _, ok := a.Sandboxes.(sandbox.ImageRunner); ok {
		if b.ImageKey == "" {
			return sandbox.Spec{}, envError("build %s has no image, and this worker runs sandboxes as containers: rebuild the environment", b.ID)
		}
		return sandbox.Spec{Command: argv, Image: a.engineImage(b)}, nil
	}
	if b.ImageKey == "" {
		return sandbox.Spec{Command: argv}, nil
	}
	root, err := a.images().rootFS(ctx, a, b)
	if err != nil {
		return sandbox.Spec{}, err
	}
	return sandbox.Spec{Command: argv, RootFS: root}, nil
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

// SweepStaleBuildDirs removes the work dirs of builds older than maxAge under the build dir:
// those a killed worker left (a live build is bounded by the Build workflow's timeout). It
// returns how many it removed.
func (c *BuildConfig) SweepStaleBuildDirs(maxAge time.Duration) int {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "build-") {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < maxAge {
			continue
		}
		if os.RemoveAll(filepath.Join(c.Dir, e.Name())) == nil {
			n++
		}
	}
	return n
}
