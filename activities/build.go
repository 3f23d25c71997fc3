package activities

import (
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
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
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
	// `BINARY example-env NAME` (proctor-examples, or the proctor binary): builds that name a
	// bundled example (models.BuildOptions.Bundled) package it instead of compiling. Empty:
	// such builds fail.
	Bundled string
	// Shell is the path of the static shell server (cmd/proctor-shell) that builds asking for
	// it (models.BuildOptions.ShellServer) add to their image. Empty: such builds fail.
	Shell string
	// Cache keeps Go builds' images on this worker's disk for identical sources (nil: none).
	Cache *BuildCache
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
	// Agent: the image is a brought agent's, which serves no MCP and is not discovered.
	Agent bool `json:"agent,omitempty"`
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
	b, err := a.registry().BuildByID(ctx, in.BuildID)
	if err != nil {
		return BuildImageResult{}, err
	}
	if registry.BuildTerminal(b.Status) {
		return BuildImageResult{}, buildFailed("the build already ended (%s)", b.Status)
	}
	if err := a.registry().UpdateBuild(ctx, b.ID, registry.BuildUpdate{Status: registry.BuildRunning}); err != nil {
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
	src, index, err := a.unpackSource(ctx, b, work, logw)
	if err != nil {
		return BuildImageResult{}, err
	}
	entry, entryDir, err := entryFolder(src, b.Options.EntryFolder)
	if err != nil {
		return BuildImageResult{}, err
	}
	reg, err := a.registry().RegistryByID(ctx, b.RegistryID)
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
	job := buildJob{build: b, src: src, index: index, entry: entry, entryDir: entryDir, work: work,
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
	return BuildImageResult{Digest: digest, ImageKey: key, ImageName: job.ref, Command: command, Agent: reg.RegistryType == registry.RegistryAgent}, nil
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
func (a *Activities) unpackSource(ctx context.Context, b *models.Build, work string, logw io.Writer) (string, []registry.SourceEntry, error) {
	cfg := a.Build
	archivePath := filepath.Join(work, "source")
	if err := blob.Download(ctx, cfg.Bucket, b.SourceKey, archivePath); errors.Is(err, blob.ErrNotFound) {
		return "", nil, buildFailed("no source was uploaded for this build: PUT the archive to the upload URL before triggering")
	} else if err != nil {
		return "", nil, fmt.Errorf("fetch the source: %w", err)
	}
	if kept := registry.KeptSourceKey(b.TeamID, b.ID); b.SourceKey != kept {
		// The build keeps what it read where no upload URL can write, and the upload is
		// consumed: retired, not deleted, so that its URL (create-only) takes no more bytes.
		if err := blob.Upload(ctx, cfg.Bucket, kept, archivePath, "application/octet-stream"); err != nil {
			return "", nil, fmt.Errorf("keep the source: %w", err)
		}
		if err := a.registry().UpdateBuild(ctx, b.ID, registry.BuildUpdate{SourceKey: kept}); err != nil {
			return "", nil, err
		}
		if err := blob.Retire(ctx, cfg.Bucket, b.SourceKey); err != nil {
			a.log().WarnContext(ctx, "retire a consumed upload", "build", b.ID, "key", b.SourceKey, "error", err)
		}
	}
	src := filepath.Join(work, "src")
	if err := os.Mkdir(src, 0o700); err != nil {
		return "", nil, err
	}
	lim := cfg.Limits
	lim.MaxBytes = cmp.Or(lim.MaxBytes, archive.DefaultLimits.MaxBytes)
	lim.MaxEntries = cmp.Or(lim.MaxEntries, archive.DefaultLimits.MaxEntries)
	st, err := archive.ExtractFile(archivePath, src, lim)
	if errors.Is(err, archive.ErrUnsafe) {
		fmt.Fprintf(logw, "source refused: %v\n", err)
		a.registry().SetSourceIndexStatus(ctx, b.ID, "failed") //nolint:errcheck // the build fails either way
		return "", nil, buildFailed("the source archive was refused: %s", strings.TrimPrefix(err.Error(), archive.ErrUnsafe.Error()+": "))
	}
	if err != nil {
		return "", nil, fmt.Errorf("unpack the source: %w", err)
	}
	fmt.Fprintf(logw, "source: %d files, %d bytes\n", st.Files, st.Bytes)
	index, err := a.indexSource(ctx, b, src)
	if err != nil {
		return "", nil, fmt.Errorf("index the source: %w", err)
	}
	return src, index, nil
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

// indexSource lists the unpacked source for browsing (paths, types, sizes, hashes) and stores
// the list beside the source; the build's source_index_status becomes ready. It returns the list.
func (a *Activities) indexSource(ctx context.Context, b *models.Build, src string) ([]registry.SourceEntry, error) {
	entries, err := indexTree(src)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(entries)
	if err != nil {
		return nil, err
	}
	if err := a.Build.Bucket.Put(ctx, registry.SourceIndexKey(b.TeamID, b.ID), bytes.NewReader(body), "application/json"); err != nil {
		return nil, err
	}
	return entries, a.registry().SetSourceIndexStatus(ctx, b.ID, "ready")
}

// indexTree lists the files, folders and links under dir, each file with its size and sha256.
func indexTree(dir string) ([]registry.SourceEntry, error) {
	entries := []registry.SourceEntry{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		e := registry.SourceEntry{Path: filepath.ToSlash(rel), Name: d.Name(), Type: "file"}
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
	return entries, err
}

func hostname() string {
	h, _ := os.Hostname()
	return h
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
