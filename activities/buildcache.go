package activities

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/models/registry"
)

// BuildCache keeps the images of Go builds on a build worker's disk, named by everything that
// decides them: the unpacked source's files (paths, modes and contents; not their times), the
// build options that change what is built, the Go
// toolchain, the module proxy and the envserver supplied to a source without it. A build of a
// source this worker has built before with the same of those takes its image from the cache, and
// its log says so: a redeploy of unchanged source, or the examples `proctor dev` deploys on a first
// start, cost a copy instead of a compile. A build that asks for no_cache builds anew (and
// refreshes the entry). Only Go builds are kept: a Dockerfile's RUN steps reach the network and
// change with it, and go.sum pins what a Go build fetches.
//
// The cache serves every team's builds on the host: an entry is found only by a source's exact
// files, which whoever finds it has uploaded.
type BuildCache struct {
	// Dir holds the entries, a directory each (created).
	Dir string
	// Max is how many entries are kept (default 32); the least recently used go first.
	Max int

	mu        sync.Mutex
	toolchain string // the Go toolchain's version, target and settings, once read
	envServer string // the digest of the supplied envserver's files, once read
}

// toolchainVars are the go command's settings that change what a build makes or fetches.
var toolchainVars = []string{"GOVERSION", "GOARCH", "GOAMD64", "GOARM64", "GOEXPERIMENT", "GOFLAGS", "GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOSUMDB", "GOINSECURE"}

// cachedBuild is what an entry holds beside its image: what the build returned.
type cachedBuild struct {
	Digest  string   `json:"digest"`
	Command []string `json:"command"`
}

// settings are the go command's version and settings and the supplied envserver's digest, read
// at the first build; a failure is not kept (the next build asks again).
func (c *BuildCache) settings(ctx context.Context, cfg *BuildConfig) (toolchain, envServer string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.toolchain != "" {
		return c.toolchain, c.envServer, nil
	}
	out, err := exec.CommandContext(ctx, "go", append([]string{"env"}, toolchainVars...)...).Output()
	if err != nil {
		return "", "", fmt.Errorf("the Go toolchain's settings: %w", err)
	}
	if cfg.EnvServer != "" {
		index, err := indexTree(cfg.EnvServer)
		if err == nil {
			envServer, err = treeDigest(cfg.EnvServer, index)
		}
		if err != nil {
			return "", "", err
		}
	}
	c.toolchain, c.envServer = runtime.GOARCH+"\n"+string(out), envServer
	return c.toolchain, c.envServer, nil
}

// cacheKey names the entry of a Go build of job.
func (c *BuildCache) cacheKey(ctx context.Context, cfg *BuildConfig, job buildJob) (string, error) {
	toolchain, envServer, err := c.settings(ctx, cfg)
	if err != nil {
		return "", err
	}
	source, err := treeDigest(job.src, job.index)
	if err != nil {
		return "", err
	}
	o := job.build.Options
	b, err := json.Marshal(struct {
		V                    int               `json:"v"`
		Source               string            `json:"source"`
		Entry                string            `json:"entry"`
		BuildArgs            map[string]string `json:"build_args"`
		EnvironmentVariables map[string]string `json:"environment_variables"`
		Toolchain            string            `json:"toolchain"`
		GOPROXY              string            `json:"goproxy"`
		EnvServer            string            `json:"envserver"`
	}{1, source, o.EntryFolder, o.BuildArgs, o.EnvironmentVariables, toolchain, cfg.GOPROXY, envServer})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// load writes the image of entry key, named job.ref, to job.imagePath and returns what the build
// returned; ok is false when there is no such entry (or it cannot be read: it is then built).
func (c *BuildCache) load(key string, job buildJob) (_ cachedBuild, ok bool) {
	dir := filepath.Join(c.Dir, key)
	var got cachedBuild
	b, err := os.ReadFile(filepath.Join(dir, "build.json"))
	if err != nil || json.Unmarshal(b, &got) != nil {
		return got, false
	}
	layout, err := os.MkdirTemp(job.work, "cached-")
	if err != nil {
		return got, false
	}
	img, err := image.ReadArchive(filepath.Join(dir, "image.oci.tar"), layout, "")
	if err != nil {
		return got, false
	}
	// The archive names the image (its ref), which is this build's: written anew, from the
	// stored layers as they are.
	digest, err := writeImage(img, job.ref, job.imagePath)
	if err != nil || digest != got.Digest {
		return got, false
	}
	now := time.Now()
	os.Chtimes(dir, now, now) //nolint:errcheck // only the eviction order
	return got, true
}

// store keeps img (its layers compressed once already) as entry key, then drops the least
// recently used entries beyond Max.
func (c *BuildCache) store(key string, img v1.Image, got cachedBuild) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(c.Dir, ".new-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := writeImage(img, "", filepath.Join(tmp, "image.oci.tar")); err != nil {
		return err
	}
	b, _ := json.Marshal(got)
	if err := os.WriteFile(filepath.Join(tmp, "build.json"), b, 0o600); err != nil {
		return err
	}
	dir := filepath.Join(c.Dir, key)
	os.RemoveAll(dir) //nolint:errcheck // a no_cache build's refresh; the rename says if it failed
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return c.evict()
}

// evict removes the least recently used entries beyond Max.
func (c *BuildCache) evict() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	type entry struct {
		name string
		used time.Time
	}
	var kept []entry
	for _, e := range entries {
		info, err := e.Info()
		switch {
		case err != nil || !e.IsDir():
		case strings.HasPrefix(e.Name(), ".new-"):
			// A store that a killed process left half done.
			if time.Since(info.ModTime()) > time.Hour {
				os.RemoveAll(filepath.Join(c.Dir, e.Name())) //nolint:errcheck // tried again at the next store
			}
		default:
			kept = append(kept, entry{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(kept, func(a, b entry) int { return b.used.Compare(a.used) })
	for _, e := range kept[min(len(kept), cmp.Or(c.Max, 32)):] {
		os.RemoveAll(filepath.Join(c.Dir, e.name)) //nolint:errcheck // tried again at the next store
	}
	return nil
}

// treeDigest is a digest of the tree at dir as index lists it (indexTree: paths, types, sizes,
// the files' sha256, read once as they were indexed), with each entry's mode and a link's target.
// Each entry is one quoted line, so no two trees write the same bytes.
func treeDigest(dir string, index []registry.SourceEntry) (string, error) {
	h := sha256.New()
	for _, e := range index {
		p := filepath.Join(dir, filepath.FromSlash(e.Path))
		info, err := os.Lstat(p)
		if err != nil {
			return "", err
		}
		target := ""
		if e.Type == "symlink" {
			if target, err = os.Readlink(p); err != nil {
				return "", err
			}
		}
		fmt.Fprintf(h, "%q %s %o %d %s %q\n", e.Path, e.Type, info.Mode(), e.Size, e.SHA256, target)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
