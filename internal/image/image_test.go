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

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/testenv"
)

// TestAGoEnvironmentBuildsIntoAnImageThatRuns builds the todo example ko-style, round-trips the
// image through an OCI archive, unpacks its root file system and talks MCP to its entrypoint. The
// worker's proxy is this machine's module cache, which compiled the example.
func TestAGoEnvironmentBuildsIntoAnImageThatRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	proxy := testenv.MachineProxy(t)
	img, err := BuildGo(ctx, GoSpec{Dir: testenv.ModuleRoot(t), Package: "examples/environments/todo", GOPROXY: proxy})
	if err != nil {
		t.Fatal(err)
	}
	var oci bytes.Buffer
	digest, err := WriteArchive(img, "todo:1", &oci)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "todo.oci.tar")
	if err := os.WriteFile(path, oci.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	back, err := ReadArchive(path, t.TempDir(), "todo:1")
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := back.Digest(); d.String() != digest {
		t.Fatalf("digest after the round trip = %s, want %s", d, digest)
	}
	// The same binary makes the same image.
	again, err := BuildGo(ctx, GoSpec{Dir: testenv.ModuleRoot(t), Package: "examples/environments/todo", GOPROXY: proxy})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d.String() != digest {
		t.Errorf("a rebuild of the same source has digest %s, want %s", d, digest)
	}
	rootfs := t.TempDir()
	cfg, err := Unpack(back, rootfs, archive.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != Entrypoint {
		t.Fatalf("entrypoint = %v", cfg.Entrypoint)
	}
	t.Logf("image %s: %d bytes as an OCI archive", digest, oci.Len())

	// The working directory (/app) can be read file by file and as an archive.
	if bin, err := WorkspaceFile(back, cfg.WorkingDir, "env", 64<<20); err != nil || len(bin) < 1<<20 {
		t.Errorf("workspace env = %d bytes, %v", len(bin), err)
	}
	if _, err := WorkspaceFile(back, cfg.WorkingDir, "nope", 1<<20); !errors.Is(err, ErrNotInWorkspace) {
		t.Errorf("a missing workspace file: %v", err)
	}
	if _, err := WorkspaceFile(back, cfg.WorkingDir, "env", 10); !errors.Is(err, archive.ErrUnsafe) {
		t.Errorf("a workspace file over the bound: %v", err)
	}
	var ws bytes.Buffer
	if err := WriteWorkspace(back, cfg.WorkingDir, &ws); err != nil {
		t.Fatal(err)
	}
	wsPath := filepath.Join(t.TempDir(), "ws.tar.gz")
	os.WriteFile(wsPath, ws.Bytes(), 0o600)
	if b, err := archive.ReadFile(wsPath, "env", 64<<20); err != nil || len(b) < 1<<20 {
		t.Errorf("the workspace archive's env = %d bytes, %v", len(b), err)
	}

	cmd := exec.CommandContext(ctx, filepath.Join(rootfs, cfg.Entrypoint[0]))
	stdout, stdin := testenv.StartPiped(t, cmd)
	defer cmd.Wait()         //nolint:errcheck
	defer cmd.Process.Kill() //nolint:errcheck
	env, err := agent.Connect(ctx, stdout, stdin, agent.ConnectOptions{ClientName: "image-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	list, err := env.ReadResource(ctx, "scenarios://list")
	if err != nil || !strings.Contains(string(list), "add-todos") {
		t.Fatalf("scenarios://list = %.200s, %v", list, err)
	}
}

func TestCodeThatDoesNotCompileIsABuildError(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/broken\n\ngo 1.24\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nfunc main() { undefinedThing() }\n"), 0o600)
	_, err := BuildGo(context.Background(), GoSpec{Dir: dir, GOPROXY: "off"})
	if !errors.Is(err, ErrBuild) || !strings.Contains(err.Error(), "undefinedThing") {
		t.Fatalf("err = %v, want ErrBuild naming the compiler's complaint", err)
	}
	if _, err := BuildGo(context.Background(), GoSpec{Dir: dir, Package: "../elsewhere"}); !errors.Is(err, ErrBuild) {
		t.Errorf("a package outside the source: %v", err)
	}
}

// TestABinaryIsLayeredOnceAndReused layers an existing binary without compiling: the same binary
// gives the same image from one cached layer, its bytes land at the entrypoint, and a changed
// binary replaces the cached layer.
func TestABinaryIsLayeredOnceAndReused(t *testing.T) {
	dir, cache := t.TempDir(), t.TempDir()
	bin := filepath.Join(dir, "proctor")
	body := bytes.Repeat([]byte("not really a program\n"), 50_000)
	if err := os.WriteFile(bin, body, 0o755); err != nil {
		t.Fatal(err)
	}
	img, err := BinaryImage(bin, cache)
	if err != nil {
		t.Fatal(err)
	}
	again, err := BinaryImage(bin, cache)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatalf("the same binary gave digests %s and %s", d1, d2)
	}
	layers, _ := filepath.Glob(filepath.Join(cache, "*"))
	if len(layers) != 1 {
		t.Fatalf("cache holds %v, want one layer", layers)
	}
	rootfs := t.TempDir()
	cfg, err := Unpack(img, rootfs, archive.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(rootfs, Entrypoint)); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the entrypoint holds %d bytes (%v), want the binary's %d", len(got), err, len(body))
	}
	if fi, err := os.Stat(filepath.Join(rootfs, Entrypoint)); err != nil || fi.Mode().Perm()&0o111 == 0 {
		t.Fatalf("the entrypoint is not executable: %v %v", fi.Mode(), err)
	}
	if len(cfg.Entrypoint) != 1 || cfg.Entrypoint[0] != Entrypoint {
		t.Fatalf("entrypoint = %v", cfg.Entrypoint)
	}

	// A new binary (another size or time) is layered anew and the old layer goes.
	if err := os.WriteFile(bin, append(body, "v2\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	next, err := BinaryImage(bin, cache)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := next.Digest(); d3 == d1 {
		t.Fatal("a changed binary kept the old image")
	}
	if layers, _ := filepath.Glob(filepath.Join(cache, "*")); len(layers) != 1 || layers[0] == "" {
		t.Fatalf("cache holds %v after a new binary, want only its layer", layers)
	}
}

// A dynamically linked binary brings this host's loader and libraries into its image, at the
// paths it loads them from.
func TestADynamicBinaryBringsItsLibraries(t *testing.T) {
	bin, err := exec.LookPath("true")
	if err != nil {
		t.Fatal(err)
	}
	libs, err := sharedLibraries(bin)
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) < 2 {
		t.Fatalf("%s loads %v; want its interpreter and libc (is it static on this host?)", bin, libs)
	}
	img, err := BinaryImage(bin, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rootfs := t.TempDir()
	if _, err := Unpack(img, rootfs, archive.DefaultLimits); err != nil {
		t.Fatal(err)
	}
	for _, lib := range libs {
		want, _ := os.ReadFile(lib)
		if got, err := os.ReadFile(filepath.Join(rootfs, lib)); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the image: %d bytes (%v), want the host's %d", lib, len(got), err, len(want))
		}
	}
	if static, err := sharedLibraries(filepath.Join(t.TempDir(), "missing")); err == nil || static != nil {
		t.Errorf("a missing binary: %v, %v", static, err)
	}
}
