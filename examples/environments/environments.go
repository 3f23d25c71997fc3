// Package environments is the set of example environments the proctor binary carries: each
// one's server, to run as `proctor example-env NAME` or `proctor-examples example-env NAME`
// (Main), and its source, so that `proctor dev` can deploy the examples through the build
// pipeline on a machine with neither the Go toolchain nor this checkout (the build then packages
// proctor-examples, or the proctor binary itself; see activities' bundled builds). It imports
// envserver, the examples and the standard library only.
package environments

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"embed"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"strings"
	"time"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/examples/environments/canvas/canvasenv"
	"github.com/proctorhq/proctor/examples/environments/game2048/game2048env"
	"github.com/proctorhq/proctor/examples/environments/todo/todoenv"
)

// sources holds the examples' source (tests included; SourceArchive leaves them out).
//
//go:embed todo game2048 canvas
var sources embed.FS

// Example is one bundled example environment.
type Example struct {
	// Name is the example's folder under examples/environments and its environment's name.
	Name string
	// Description is the environment's one-line description.
	Description string
	// New builds the example's server.
	New func(*slog.Logger) (*envserver.Server, error)
}

// All lists the bundled examples.
var All = []Example{
	{"todo", "A todo list an agent edits: add, list, complete and delete todos.", todoenv.New},
	{"game2048", "A deterministic game of 2048 an agent plays to reach a target tile.", game2048env.New},
	{"canvas", "A canvas an agent paints on, with screenshots, progress and a subscribable image.", canvasenv.New},
}

// Lookup finds a bundled example by name.
func Lookup(name string) (Example, bool) {
	for _, e := range All {
		if e.Name == name {
			return e, true
		}
	}
	return Example{}, false
}

// Names lists the bundled examples' names.
func Names() []string {
	out := make([]string, len(All))
	for i, e := range All {
		out[i] = e.Name
	}
	return out
}

// SourceArchive is the example's source as a gzipped tar, paths relative to its folder, without
// its tests: what a bundled build records for browsing.
func SourceArchive(name string) ([]byte, error) {
	if _, ok := Lookup(name); !ok {
		return nil, fmt.Errorf("no bundled example %q (have %s)", name, strings.Join(Names(), ", "))
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0).UTC()
	err := fs.WalkDir(sources, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == name {
			return err
		}
		rel := strings.TrimPrefix(p, name+"/")
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Typeflag: tar.TypeDir, Mode: 0o755, ModTime: epoch})
		}
		if strings.HasSuffix(path.Base(p), "_test.go") {
			return nil
		}
		body, err := sources.ReadFile(p)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), ModTime: epoch}); err != nil {
			return err
		}
		_, err = tw.Write(body)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
