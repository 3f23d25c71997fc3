// Package testenv holds what the tests of several packages need: a buffer that goroutines write
// while a test reads it, and this module's programs (the example environments) built once per test
// binary, and a real container engine. Only tests import it.
package testenv

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer that is safe to write from other goroutines (a child's stderr, a
// server's logger) while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

var programs struct {
	mu    sync.Mutex
	dir   string
	built map[string]string
}

// Program returns the binary of one of this module's packages, given by its path from the module
// root (e.g. "examples/environments/todo"), built the first time a test of this binary asks: a
// build takes seconds on a busy machine, and many tests start processes from the one binary.
// Cleanup removes the binaries.
func Program(t testing.TB, pkg string) string { return program(t, pkg, false) }

// StaticProgram is Program built without cgo: a static binary, which runs in any image (as a
// release builds cmd/proctor-relay).
func StaticProgram(t testing.TB, pkg string) string { return program(t, pkg, true) }

func program(t testing.TB, pkg string, static bool) string {
	t.Helper()
	programs.mu.Lock()
	defer programs.mu.Unlock()
	key := pkg
	if static {
		key += " (static)"
	}
	if bin, ok := programs.built[key]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if programs.dir == "" {
		if programs.dir, err = os.MkdirTemp("", "proctor-test-programs-"); err != nil {
			t.Fatal(err)
		}
		// Sandboxes that run as a user of their own run these from here, as they run an
		// operator's commands: where others may read and run them.
		if err := os.Chmod(programs.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		programs.built = map[string]string{}
	}
	bin := filepath.Join(programs.dir, strings.ReplaceAll(pkg, "/", "_"))
	if static {
		bin += "-static"
	}
	// Without the symbol table and DWARF: the tests never debug these, and linking them takes
	// half the CPU (a test run links many, on two cores).
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", bin, "./"+pkg)
	if static {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	}
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./%s: %v\n%s", pkg, err, out)
	}
	programs.built[key] = bin
	return bin
}

// Cleanup removes the programs Program built and stops the container engine; a TestMain calls it after the tests ran.
func Cleanup() error {
	programs.mu.Lock()
	defer programs.mu.Unlock()
	if programs.dir != "" {
		os.RemoveAll(programs.dir) //nolint:errcheck // a temp dir
		programs.dir, programs.built = "", nil
	}
	stopEngine()
	return nil
}

// ModuleRoot is the directory of this module's go.mod, found upward from the test's directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// moduleRoot is the directory of this module's go.mod, found upward from the test's directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testenv: no go.mod above the test's directory")
		}
		dir = parent
	}
}
