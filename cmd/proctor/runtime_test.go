package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/internal/testenv"
)

// A bundled build packages proctor-examples when it is beside the running binary and is a Go
// program that can be run, and the running binary otherwise.
func TestBundledServerPrefersProctorExamples(t *testing.T) {
	dir := t.TempDir()
	exe, small := filepath.Join(dir, "proctor"), filepath.Join(dir, environments.Binary)
	program, err := os.ReadFile(testenv.StaticProgram(t, "cmd/proctor-examples"))
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	// put replaces whatever is beside proctor with a file of content and mode perm.
	put := func(content []byte, perm os.FileMode) error {
		must(os.RemoveAll(small))
		return os.WriteFile(small, content, perm)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, step := range []struct {
		beside string
		change func() error
		want   string
	}{
		{"nothing", func() error { return nil }, exe},
		{"a directory of that name", func() error { return os.Mkdir(small, 0o755) }, exe},
		{"a program that cannot be run", func() error { return put(program, 0o644) }, exe},
		{"a script", func() error { return put([]byte("#!/bin/sh\n"), 0o755) }, exe},
		{"proctor-examples", func() error { return put(program, 0o755) }, small},
	} {
		must(step.change())
		if got := bundledServer(exe, log); got != step.want {
			t.Errorf("with %s beside proctor: %s, want %s", step.beside, got, step.want)
		}
	}
}

// A proctor-examples of another revision than the running binary is passed over; a build that
// records no revision matches any.
func TestSameRevision(t *testing.T) {
	at := func(rev string) *debug.BuildInfo {
		if rev == "" {
			return &debug.BuildInfo{}
		}
		return &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}, {Key: "vcs.revision", Value: rev}}}
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{{"abc", "abc", true}, {"abc", "def", false}, {"", "def", true}, {"abc", "", true}} {
		if got := sameRevision(at(c.a), at(c.b)); got != c.same {
			t.Errorf("sameRevision(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
	if !sameRevision(nil, at("abc")) {
		t.Error("a binary without build info does not match")
	}
}
