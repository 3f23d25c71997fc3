package image

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// probeMain is an environment's main package that uses the envserver module.
const probeMain = `package main

import (
	"context"

	"github.com/proctorhq/proctor/envserver"
)

func main() { _ = envserver.New("probe").Run(context.Background()) }
`

// probeModule writes an environment module (main.go and go.mod) and runs the go commands given,
// as its author would on their machine: with this machine's module cache and proxy, never the
// build worker's (testenv.AuthorGoEnv). An author's `go mod tidy` fetches what the worker never
// needs, such as the test-only requirements of envserver's dependencies.
func probeModule(t *testing.T, files map[string]string, commands ...[]string) string {
	t.Helper()
	dir := t.TempDir()
	files["main.go"] = probeMain
	if _, ok := files["go.sum"]; !ok && len(commands) > 0 {
		// The envserver module's own sums: tidy finds every one it needs here rather than asking
		// the checksum database, which a machine that reaches only a module proxy cannot.
		sums, err := os.ReadFile(filepath.Join(testenv.ModuleRoot(t), "envserver", "go.sum"))
		if err != nil {
			t.Fatal(err)
		}
		files["go.sum"] = string(sums)
	}
	for name, body := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range commands {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, testenv.AuthorGoEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir
}

// A Go environment whose go.mod requires the envserver module without carrying it builds with
// the copy the worker ships: the author's replace names a path of their machine, or there is
// none. A source that carries envserver (a replace within it) builds with its own, and the
// source's files are never changed. The worker's module cache starts empty (TestMain) and its
// proxy serves exactly the modules envserver requires: a build that needed more (the test-only
// requirements of envserver's dependencies, which only a tidy wants) would fail here as on a
// fresh worker.
func TestTheBuilderSuppliesEnvServerToASourceWithoutIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	shipped := filepath.Join(testenv.ModuleRoot(t), "envserver")
	proxy := testenv.ModuleMirror(t, shipped)
	const goMod = "module example.com/probe\n\ngo 1.26.8\n\nrequire " + EnvServerModule + " v0.0.0\n"
	build := func(t *testing.T, dir, envServer string) (string, error) {
		t.Helper()
		var log bytes.Buffer
		before, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
		_, err := BuildGo(ctx, GoSpec{Dir: dir, GOPROXY: proxy, EnvServer: envServer, Log: &log})
		if after, _ := os.ReadFile(filepath.Join(dir, "go.mod")); !bytes.Equal(before, after) {
			t.Errorf("the build changed the source's go.mod:\n%s", after)
		}
		return log.String(), err
	}

	t.Run("the author's replace names their machine", func(t *testing.T) {
		// Tidied against a checkout's envserver, then uploaded from another machine: the
		// replace names a directory the worker does not have.
		dir := probeModule(t, map[string]string{"go.mod": goMod},
			[]string{"mod", "edit", "-replace", EnvServerModule + "=" + shipped},
			[]string{"mod", "tidy"},
			[]string{"mod", "edit", "-replace", EnvServerModule + "=/nonexistent/proctor/envserver"})
		if _, err := build(t, dir, ""); !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "/nonexistent/proctor/envserver") {
			t.Errorf("without a copy to supply: %v, want a build error naming the missing replacement", err)
		}
		log, err := build(t, dir, shipped)
		if err != nil || !strings.Contains(log, "not in the source") || !strings.Contains(log, "the builder supplies "+EnvServerModule) {
			t.Errorf("with the worker's copy: %v\n%s", err, log)
		}
	})

	t.Run("a bare requirement", func(t *testing.T) {
		// go.mod requires envserver and nothing else; there is no go.sum.
		dir := probeModule(t, map[string]string{"go.mod": goMod})
		if log, err := build(t, dir, shipped); err != nil || !strings.Contains(log, "the builder supplies") {
			t.Errorf("a bare requirement: %v\n%s", err, log)
		}
		if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
			t.Error("the build wrote a go.sum into the source")
		}
	})

	t.Run("a source that carries envserver", func(t *testing.T) {
		files := map[string]string{"go.mod": goMod}
		entries, err := os.ReadDir(shipped)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if name := e.Name(); !e.IsDir() && !strings.HasSuffix(name, "_test.go") {
				body, _ := os.ReadFile(filepath.Join(shipped, name))
				files["third_party/envserver/"+name] = string(body)
			}
		}
		dir := probeModule(t, files,
			[]string{"mod", "edit", "-replace", EnvServerModule + "=./third_party/envserver"},
			[]string{"mod", "tidy"})
		if log, err := build(t, dir, "/nonexistent/envserver"); err != nil || strings.Contains(log, "supplies") {
			t.Errorf("a source with its own envserver: %v\n%s", err, log)
		}
	})
}

// A go.mod that replaces a module with a directory outside the upload is refused before the go
// command runs: it would read the build worker's own files (and could build them into the image).
func TestABuildReadsNoDirectoryOutsideTheUpload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// The secret the replace reaches for: a module on the worker's disk, outside the upload.
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "go.mod"), []byte("module example.com/secret\n\ngo 1.26.8\n"), 0o644)
	os.WriteFile(filepath.Join(outside, "secret.go"), []byte("package secret\n\nconst Value = \"the worker's\"\n"), 0o644)
	const main = "package main\n\nimport \"example.com/secret\"\n\nfunc main() { println(secret.Value) }\n"
	for _, target := range []string{outside, "../../../../../../../../.." + outside} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644)
		os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/probe\n\ngo 1.26.8\n\nrequire example.com/secret v0.0.0\n\nreplace example.com/secret => "+target+"\n"), 0o644)
		_, err := BuildGo(ctx, GoSpec{Dir: dir, GOPROXY: "off"})
		if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "not in the uploaded source") {
			t.Errorf("replace => %s: %v, want the build refused", target, err)
		}
	}
	// The same module carried inside the upload builds.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "secret"), 0o755)
	os.WriteFile(filepath.Join(dir, "secret", "go.mod"), []byte("module example.com/secret\n\ngo 1.26.8\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret", "secret.go"), []byte("package secret\n\nconst Value = \"the upload's\"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644)
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/probe\n\ngo 1.26.8\n\nrequire example.com/secret v0.0.0\n\nreplace example.com/secret => ./secret\n"), 0o644)
	if _, err := BuildGo(ctx, GoSpec{Dir: dir, GOPROXY: "off"}); err != nil {
		t.Errorf("a replace within the upload: %v", err)
	}
}
