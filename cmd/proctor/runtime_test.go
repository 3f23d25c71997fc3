package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/proctorhq/proctor/examples/environments"
)

// A bundled build packages proctor-examples when it is beside the running binary and can be
// run, and the running binary otherwise.
func TestBundledServerPrefersProctorExamples(t *testing.T) {
	dir := t.TempDir()
	exe, small := filepath.Join(dir, "proctor"), filepath.Join(dir, environments.Binary)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	for _, step := range []struct {
		beside string
		change func() error
		want   string
	}{
		{"nothing", func() error { return nil }, exe},
		{"a directory of that name", func() error { return os.Mkdir(small, 0o755) }, exe},
		{"a file that cannot be run", func() error { must(os.Remove(small)); return os.WriteFile(small, []byte("#!/bin/sh\n"), 0o644) }, exe},
		{"proctor-examples", func() error { return os.Chmod(small, 0o755) }, small},
	} {
		must(step.change())
		if got := bundledServer(exe); got != step.want {
			t.Errorf("with %s beside proctor: %s, want %s", step.beside, got, step.want)
		}
	}
}
