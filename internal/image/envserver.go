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
func supplyEnvServer(ctx context.Context, goBin string, spec GoSpec, mod goMod, env []string, dir string, log io.Writer) (string, error) {
	if !mod.lacksEnvServer(spec, log) {
		return "", nil
	}
	envServer, err := filepath.Abs(spec.EnvServer)
	if err != nil {
		return "", err
	}
	modFile, err := replaceEnvServer(ctx, goBin, env, spec.Dir, dir, envServer)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(log, "envserver: the builder supplies %s (its copy in %s)\n", EnvServerModule, envServer)
	return modFile, nil
}

// goModVersion is a module path and version as `go mod edit -json` writes them.
type goModVersion struct{ Path, Version string }

// goMod is what supplyEnvServer reads of a go.mod: its requirements and replaces.
type goMod struct {
	Require []goModVersion
	Replace []struct{ Old, New goModVersion }
}

// readGoMod reads the go.mod in dir, through the go command (run with env).
func readGoMod(ctx context.Context, goBin, dir string, env []string) (goMod, error) {
	var mod goMod
	edit := exec.CommandContext(ctx, goBin, "mod", "edit", "-json")
	edit.Dir, edit.Env = dir, env
	var stderr bytes.Buffer
	edit.Stderr = &stderr
	out, err := edit.Output()
	if err != nil {
		return mod, fmt.Errorf("%w: read go.mod: %v\n%s", ErrBuild, err, stderr.String())
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return mod, fmt.Errorf("image: read go.mod: %w", err)
	}
	return mod, nil
}

// checkReplaces refuses a go.mod that replaces a module with a directory outside the upload
// (spec.Root): the go command would read it from the build worker's disk, so a source could build
// the worker's files into its image. The envserver module is the exception the builder supplies
// itself (see supplyEnvServer): an author's replace of it names their own checkout.
func (mod goMod) checkReplaces(spec GoSpec) error {
	for _, r := range mod.Replace {
		if r.New.Version != "" || r.Old.Path == EnvServerModule {
			continue // a module, fetched like any other; or the one the builder supplies
		}
		if !spec.inside(r.New.Path) {
			return fmt.Errorf("%w: go.mod replaces %s with the directory %s, which is not in the uploaded source: "+
				"a build reads only the upload and published modules (vendor the module with `go mod vendor`, or replace it with a directory inside the source)",
				ErrBuild, r.Old.Path, r.New.Path)
		}
	}
	return nil
}

// inside says whether path, as a go.mod in spec.Dir names a directory, is within the upload.
func (spec GoSpec) inside(path string) bool {
	root := spec.Root
	if root == "" {
		root = spec.Dir
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(spec.Dir, path)
	}
	rel, err := filepath.Rel(root, path)
	return err == nil && (rel == "." || filepath.IsLocal(rel))
}

// lacksEnvServer says whether the build must supply the envserver module: the module requires
// it at an unpublished version or replaces it, yet neither the upload carries it nor another
// module replaces it. A replace by a directory outside the upload is logged.
func (mod goMod) lacksEnvServer(spec GoSpec, log io.Writer) bool {
	i := slices.IndexFunc(mod.Require, func(r goModVersion) bool { return r.Path == EnvServerModule })
	if i < 0 {
		return false
	}
	v := mod.Require[i].Version
	unpublished := v == "v0.0.0" || strings.HasPrefix(v, "v0.0.0-00010101000000-")
	replaced := slices.ContainsFunc(mod.Replace, func(r struct{ Old, New goModVersion }) bool { return r.Old.Path == EnvServerModule })
	if !unpublished && !replaced {
		return false // a version a module proxy serves
	}
	for _, r := range mod.Replace {
		if r.Old.Path != EnvServerModule {
			continue
		}
		if r.New.Version != "" {
			return false // another module (a fork): the source's choice
		}
		if spec.inside(r.New.Path) {
			return false // the upload carries it
		}
		fmt.Fprintf(log, "envserver: go.mod replaces %s with %s, which is not in the source\n", EnvServerModule, r.New.Path)
	}
	return true
}

// replaceEnvServer writes in dir a copy of srcDir's go.mod that replaces the envserver module
// with envServer, and beside it a go.sum of srcDir's sums and envServer's; it returns the
// copy's path.
func replaceEnvServer(ctx context.Context, goBin string, env []string, srcDir, dir, envServer string) (string, error) {
	modFile := filepath.Join(dir, "go.mod")
	body, err := os.ReadFile(filepath.Join(srcDir, "go.mod"))
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(modFile, body, 0o600); err != nil {
		return "", err
	}
	replace := exec.CommandContext(ctx, goBin, "mod", "edit", "-replace="+EnvServerModule+"="+envServer, modFile)
	replace.Env = env
	if out, err := replace.CombinedOutput(); err != nil {
		return "", fmt.Errorf("image: supply envserver: %v\n%s", err, out)
	}
	var sums []byte
	for _, p := range []string{filepath.Join(srcDir, "go.sum"), filepath.Join(envServer, "go.sum")} {
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
	return modFile, nil
}
