package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// EnvServerModule is the module of the SDK Go environments are written with.
const EnvServerModule = "github.com/proctorhq/proctor/envserver"

// supplyEnvServer lets a Go environment require the envserver module without carrying it. The
// module is not published, so an author's go.mod requires it at v0.0.0 and replaces it with a
// checkout's copy, a path of the author's machine that no upload carries (or has no replace at
// all). Unless the source carries the module itself (a vendor directory, which BuildGo checks
// first, or a replace by a directory within the upload), replaces it with another module, or
// requires a version of it (one a module proxy can serve), the build uses spec.EnvServer, the
// copy this worker ships: supplyEnvServer writes, in dir, a copy of the source's go.mod with
// that replace and a go.sum beside it (the source's sums and the envserver module's), and
// returns the copy's path for `go build -modfile`. It returns "" when there is nothing to
// supply; the source's own files are never changed.
func supplyEnvServer(ctx context.Context, goBin string, spec GoSpec, dir string, log io.Writer) (string, error) {
	type version struct{ Path, Version string }
	var mod struct {
		Require []version
		Replace []struct{ Old, New version }
	}
	edit := exec.CommandContext(ctx, goBin, "mod", "edit", "-json")
	edit.Dir, edit.Env = spec.Dir, append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	edit.Stderr = &stderr
	out, err := edit.Output()
	if err != nil {
		return "", fmt.Errorf("%w: read go.mod: %v\n%s", ErrBuild, err, stderr.String())
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return "", fmt.Errorf("image: read go.mod: %w", err)
	}
	i := slices.IndexFunc(mod.Require, func(r version) bool { return r.Path == EnvServerModule })
	if i < 0 {
		return "", nil
	}
	v := mod.Require[i].Version
	unpublished := v == "v0.0.0" || strings.HasPrefix(v, "v0.0.0-00010101000000-")
	replaced := slices.ContainsFunc(mod.Replace, func(r struct{ Old, New version }) bool { return r.Old.Path == EnvServerModule })
	if !unpublished && !replaced {
		return "", nil // a version a module proxy serves
	}
	root := spec.Root
	if root == "" {
		root = spec.Dir
	}
	for _, r := range mod.Replace {
		if r.Old.Path != EnvServerModule {
			continue
		}
		if r.New.Version != "" {
			return "", nil // another module (a fork): the source's choice
		}
		target := r.New.Path
		if !filepath.IsAbs(target) {
			target = filepath.Join(spec.Dir, target)
		}
		if rel, err := filepath.Rel(root, target); err == nil && filepath.IsLocal(rel) {
			return "", nil // the upload carries it
		}
		fmt.Fprintf(log, "envserver: go.mod replaces %s with %s, which is not in the source\n", EnvServerModule, r.New.Path)
	}
	envServer, err := filepath.Abs(spec.EnvServer)
	if err != nil {
		return "", err
	}
	modFile := filepath.Join(dir, "go.mod")
	body, err := os.ReadFile(filepath.Join(spec.Dir, "go.mod"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(modFile, body, 0o600); err != nil {
		return "", err
	}
	replace := exec.CommandContext(ctx, goBin, "mod", "edit", "-replace="+EnvServerModule+"="+envServer, modFile)
	replace.Env = edit.Env
	if out, err := replace.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image: supply envserver: %v\n%s", err, out)
	}
	var sums []byte
	for _, p := range []string{filepath.Join(spec.Dir, "go.sum"), filepath.Join(envServer, "go.sum")} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		sums = append(sums, b...)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o600); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "envserver: the builder supplies %s (its copy in %s)\n", EnvServerModule, envServer)
	return modFile, nil
}
