package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// GoSpec says what to compile.
type GoSpec struct {
	// Dir is the module to build in: the directory holding go.mod.
	Dir string
	// Package is the main package, relative to Dir ("." when empty).
	Package string
	// GOPROXY is the module proxy the build may use ("off" builds only from a vendor directory or
	// the worker's module cache); empty keeps the worker's own setting.
	GOPROXY string
	// EnvServer is a directory holding the envserver module (EnvServerModule) that the build
	// supplies to a module requiring it without carrying it; empty supplies nothing. See
	// supplyEnvServer.
	EnvServer string
	// Root is the uploaded source Dir is in (Dir when empty): a replace by a directory outside
	// it names a path of the author's machine, not anything the upload carries.
	Root string
	// Log receives the compiler's output.
	Log io.Writer
}

// ErrBuild wraps a failure of the user's code to build (as opposed to the builder's own).
var ErrBuild = errors.New("build failed")

// BuildGo compiles spec's package into a static binary and layers it into an image whose
// entrypoint runs it.
func BuildGo(ctx context.Context, spec GoSpec) (v1.Image, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("image: building a Go environment needs the Go toolchain on the build worker: %w", err)
	}
	pkg := spec.Package
	if pkg == "" {
		pkg = "."
	}
	if !filepath.IsLocal(pkg) && pkg != "." {
		return nil, fmt.Errorf("%w: package %q is not inside the source", ErrBuild, pkg)
	}
	out, err := os.MkdirTemp("", "proctor-gobuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(out)
	bin := filepath.Join(out, "env")
	var log bytes.Buffer
	w := io.Writer(&log)
	if spec.Log != nil {
		w = io.MultiWriter(&log, spec.Log)
	}
	args := []string{"build", "-trimpath", "-ldflags=-s -w", "-o", bin}
	env := append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if spec.GOPROXY != "" {
		env = append(env, "GOPROXY="+spec.GOPROXY)
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, "vendor", "modules.txt")); err == nil {
		env = append(env, "GOFLAGS=-mod=vendor")
	} else {
		modEnv := append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		mod, err := readGoMod(ctx, goBin, spec.Dir, modEnv)
		if err != nil {
			return nil, err
		}
		// The build reads the upload and modules, never the worker's own files.
		if err := mod.checkReplaces(spec); err != nil {
			return nil, err
		}
		modFile := ""
		if spec.EnvServer != "" {
			if modFile, err = supplyEnvServer(ctx, goBin, spec, mod, modEnv, out, w); err != nil {
				return nil, err
			}
		}
		if modFile != "" {
			// -mod=mod: the copy may lack requirements of the supplied envserver (a source
			// tidied against another version of it); the go command adds them to the copy.
			args = append(args, "-mod=mod", "-modfile="+modFile)
		}
	}
	cmd := exec.CommandContext(ctx, goBin, append(args, "./"+filepath.ToSlash(filepath.Clean(pkg)))...)
	cmd.Dir, cmd.Env = spec.Dir, env
	cmd.Stdout, cmd.Stderr = w, w
	err = startDyingWithParent(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: go build: %v\n%s", ErrBuild, err, lastLines(log.String(), 30))
	}
	binary, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	layer, err := rootLayer(binary)
	if err != nil {
		return nil, err
	}
	return Assemble(layer, binaryConfig())
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
