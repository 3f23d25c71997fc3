package sandboxtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/testenv"
)

// busyboxApplets are the commands the suite runs; each is a link to /bin/busybox.
var busyboxApplets = []string{"sh", "sleep", "cat", "touch", "ls", "echo", "grep", "true", "id"}

// Root makes an image root file system: busybox (static, from the host's busybox-static
// package) with its applets at /bin, the todo example environment at /app/env, and the /dev,
// /proc, /tmp and /etc an image has.
func Root(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an image root file system")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		testenv.MissingTool(t, "busybox (busybox-static: the suite runs it inside its sandboxes)")
	}
	root := t.TempDir()
	for _, d := range []string{"bin", "app", "dev", "proc", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o1777)
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644)
	b, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range busyboxApplets {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(root, "app", "env"), "./examples/environments/todo")
	cmd.Dir, cmd.Env = testenv.ModuleRoot(t), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build todo: %v\n%s", err, out)
	}
	return root
}

// TodoCommand runs the todo environment of Root's image.
var TodoCommand = []string{"/app/env", "--transport", "stdio"}

// Images makes each root file system an image once, as a build's docker-save tarball, for the
// providers that run images.
type Images struct {
	mu   sync.Mutex
	refs map[string]*sandbox.Image
}

// Of is root's image.
func (im *Images) Of(t testing.TB, root string) *sandbox.Image {
	t.Helper()
	im.mu.Lock()
	defer im.mu.Unlock()
	if img := im.refs[root]; img != nil {
		return img
	}
	img, err := image.FromDir(root, v1.Config{Env: []string{"PATH=/bin:/app"}})
	if err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := "proctor.local/sandboxtest:" + d.Hex[:32]
	si := &sandbox.Image{Ref: ref, Load: func(_ context.Context, w io.Writer) error { return image.WriteDockerArchive(img, ref, w) }}
	if im.refs == nil {
		im.refs = map[string]*sandbox.Image{}
	}
	im.refs[root] = si
	return si
}
