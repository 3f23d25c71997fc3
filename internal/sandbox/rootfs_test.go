package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// probeSource prints, on stderr, what a sandboxed program sees of its file system.
const probeSource = `package main

import (
	"fmt"
	"os"
)

func main() {
	wd, _ := os.Getwd()
	_, usr := os.Stat("/usr")
	werr := os.WriteFile("note", []byte("x"), 0o600)
	_, rootWrite := os.Create("/app/new")
	fmt.Fprintf(os.Stderr, "wd=%s home=%s usr_missing=%v work_writable=%v root_readonly=%v\n",
		wd, os.Getenv("HOME"), os.IsNotExist(usr), werr == nil, rootWrite != nil)
}
`

// imageRoot makes a root file system like an image's: /dev, /proc, /tmp and a static binary
// (/app/probe, of probeSource), and no shell.
func imageRoot(t *testing.T) string {
	t.Helper()
	return imageRootWith(t, probeSource)
}

// imageRootWith is imageRoot with /app/probe built of source.
func imageRootWith(t *testing.T, source string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("compiles a probe")
	}
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "go.mod"), []byte("module probe\n\ngo 1.24\n"), 0o600)
	os.WriteFile(filepath.Join(src, "main.go"), []byte(source), 0o600)
	root := t.TempDir()
	for _, d := range []string{"dev", "proc", "tmp", "app"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(root, "app", "probe"), ".")
	cmd.Dir, cmd.Env = src, append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the probe: %v\n%s", err, out)
	}
	return root
}

// todoImageRoot is a root file system like the todo example's image: its static binary at
// /app/env.
func todoImageRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"dev", "proc", "tmp", "app"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	cmd := exec.Command("go", "build", "-o", filepath.Join(root, "app", "env"), "./examples/environments/todo")
	cmd.Dir, cmd.Env = testenv.ModuleRoot(t), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build todo: %v\n%s", err, out)
	}
	return root
}

func TestAnImageRootFileSystemIsTheSandboxRoot(t *testing.T) {
	root := imageRoot(t)
	p := newProvider(t, IsolationBubblewrap)
	sb := start(t, p, Spec{Command: []string{"/app/probe"}, RootFS: root})
	select {
	case <-sb.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the probe did not exit")
	}
	var line string
	for _, l := range sb.Logs() {
		line += l.Line
	}
	want := "wd=" + WorkDirInImage + " home=" + WorkDirInImage + " usr_missing=true work_writable=true root_readonly=true"
	if line != want {
		t.Errorf("the probe saw %q, want %q", line, want)
	}
	if _, err := os.Stat(filepath.Join(root, "app", "new")); err == nil {
		t.Error("the sandbox wrote into the shared image root")
	}
}

func TestARootFSSpecIsChecked(t *testing.T) {
	root := imageRoot(t)
	for _, iso := range bothIsolations {
		p := newProvider(t, iso)
		noTmp := t.TempDir()
		os.MkdirAll(filepath.Join(noTmp, "dev"), 0o755)
		for name, spec := range map[string]Spec{
			"missing /tmp":                    {ID: "a", Command: []string{"/app/probe"}, RootFS: noTmp},
			"relative root":                   {ID: "b", Command: []string{"/app/probe"}, RootFS: "rel/root"},
			"not in the image":                {ID: "c", Command: []string{"/app/none"}, RootFS: root},
			"escapes the image":               {ID: "d", Command: []string{"/../../bin/sh"}, RootFS: root},
			"relative entrypoint":             {ID: "e", Command: []string{"app/probe"}, RootFS: root},
			"a directory, not exe":            {ID: "f", Command: []string{"/app"}, RootFS: root},
			"a writable root, not an image's": {ID: "g", Command: []string{"/bin/true"}, WritableRoot: true},
		} {
			sb, err := p.Start(t.Context(), spec)
			if !errors.Is(err, ErrInvalidSpec) {
				if sb != nil {
					sb.Stop(t.Context())
				}
				t.Errorf("%s (%s): err = %v, want ErrInvalidSpec", name, iso, err)
			}
		}
	}
	// Without bubblewrap the entrypoint runs from the root file system on the host.
	p := newProvider(t, IsolationNone)
	sb := start(t, p, Spec{Command: []string{"/app/probe"}, RootFS: root})
	<-sb.Done()
	if logs := sb.Logs(); len(logs) == 0 || !strings.Contains(logs[0].Line, "work_writable=true") {
		t.Errorf("without isolation: %v", logs)
	}
}

// writerSource prints, on stderr, who it is and what it could change of its root.
const writerSource = `package main

import (
	"fmt"
	"os"
	"syscall"
)

func main() {
	var files syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &files)
	_, appErr := os.Create("/app/new")
	topErr := os.WriteFile("/top.txt", []byte("x"), 0o644)
	rmErr := os.Remove("/app/old")
	mkErr := os.MkdirAll("/usr/local/lib/x", 0o755)
	fmt.Fprintf(os.Stderr, "uid=%d app=%v top=%v rm=%v mkdir=%v files=%d\n", os.Getuid(), appErr == nil, topErr == nil, rmErr == nil, mkErr == nil, files.Max)
}
`

// TestAWritableRootIsTheSandboxsOwn: a sandbox asking for a writable root (a Harbor task's
// image) is root inside and may change its root anywhere; its changes are its own (another
// sandbox of the image does not see them) and go with it; the image stays as it was. A worker
// that cannot give one refuses the sandbox.
func TestAWritableRootIsTheSandboxsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a writable root needs a worker that runs as root")
	}
	root := imageRootWith(t, writerSource)
	os.WriteFile(filepath.Join(root, "app", "old"), []byte("x"), 0o644)
	p := newProvider(t, IsolationBubblewrap)
	run := func(id string) (*processSandbox, string) {
		sb := start(t, p, Spec{ID: id, Command: []string{"/app/probe"}, RootFS: root, WritableRoot: true})
		select {
		case <-sb.Done():
		case <-time.After(20 * time.Second):
			t.Fatal("the probe did not exit")
		}
		var line string
		for _, l := range sb.Logs() {
			line += l.Line
		}
		return sb, line
	}
	first, line := run("first")
	// Root inside (the sandbox user outside), its limits set as every sandbox's.
	want := fmt.Sprintf("uid=0 app=true top=true rm=true mkdir=true files=%d", p.maxFiles)
	if line != want {
		t.Errorf("the first sandbox saw %q, want %q", line, want)
	}
	// The second sees the image as it was: /app/old is there to remove again.
	_, line = run("second")
	if line != want {
		t.Errorf("the second sandbox saw %q, want %q (the first's changes are its own)", line, want)
	}
	if _, err := os.Stat(filepath.Join(root, "app", "old")); err != nil {
		t.Errorf("the image lost /app/old: %v", err)
	}
	for _, p := range []string{"app/new", "top.txt"} {
		if _, err := os.Stat(filepath.Join(root, p)); err == nil {
			t.Errorf("the sandbox wrote %s into the shared image root", p)
		}
	}
	overlay := first.root.dir
	if err := first.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay); !os.IsNotExist(err) {
		t.Errorf("the writable root outlived its sandbox: %v", err)
	}
	if mounts, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mounts), overlay) {
		t.Errorf("the writable root is still mounted after Stop")
	}
	// Without bubblewrap (or as root, or as a worker that is not root) there is none to give;
	// nor with a sandbox user that is an account of the host (its processes could join the
	// namespace, which maps the host's root).
	if _, err := newProvider(t, IsolationNone).Start(t.Context(), Spec{ID: "none", Command: []string{"/app/probe"}, RootFS: root, WritableRoot: true}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("without bubblewrap: %v, want ErrInvalidSpec", err)
	}
	nobody := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.RunAs = 65534 })
	if _, err := nobody.Start(t.Context(), Spec{ID: "nobody", Command: []string{"/app/probe"}, RootFS: root, WritableRoot: true}); !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), "no account of the host") {
		t.Errorf("as nobody: %v, want ErrInvalidSpec", err)
	}
}

// sharerSource, as "host", changes /app and waits for its stdin to close; as "inside", says
// where it runs and what it sees of the host's change, and changes /app too.
const sharerSource = `package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	if os.Args[1] == "host" {
		os.WriteFile("/app/from-host", []byte("h"), 0o644)
		fmt.Fprintln(os.Stderr, "ready")
		io.Copy(io.Discard, os.Stdin)
		return
	}
	wd, _ := os.Getwd()
	_, seen := os.Stat("/app/from-host")
	werr := os.WriteFile("from-inside", []byte("i"), 0o644)
	fmt.Fprintf(os.Stderr, "uid=%d wd=%s home=%s sees=%v wrote=%v\n", os.Getuid(), wd, os.Getenv("HOME"), seen == nil, werr == nil)
}
`

// TestASandboxWithinAWritableRootSharesIt: a sandbox within one whose root is writable (a
// brought agent inside a Harbor task) runs in that root, root there, from the working directory
// it names: each sees what the other changed; the root stays the host's, gone at its Stop only.
func TestASandboxWithinAWritableRootSharesIt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a writable root needs a worker that runs as root")
	}
	root := imageRootWith(t, sharerSource)
	p := newProvider(t, IsolationBubblewrap)
	host := start(t, p, Spec{ID: "host", Command: []string{"/app/probe", "host"}, RootFS: root, WritableRoot: true})
	for deadline := time.Now().Add(20 * time.Second); len(host.Logs()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the host sandbox did not get ready")
		}
	}
	if !HasWritableRoot(host) {
		t.Fatal("HasWritableRoot(host) = false")
	}
	inside := start(t, p, Spec{ID: "inside", Command: []string{"/app/probe", "inside"}, RootFS: root, Within: host, WorkDir: host.WorkDir(), Dir: "/app"})
	select {
	case <-inside.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the inside probe did not exit")
	}
	want := fmt.Sprintf("uid=0 wd=/app home=%s sees=true wrote=true", WorkDirInImage)
	if logs := inside.Logs(); len(logs) != 1 || logs[0].Line != want {
		t.Errorf("inside saw %v, want %q", logs, want)
	}
	if HasWritableRoot(inside) {
		t.Error("the inside sandbox claims the root as its own")
	}
	if err := inside.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The host sees the file, its own root's (the sandbox user's on this host), after the
	// inside sandbox's Stop.
	fi, err := os.Stat(filepath.Join(host.root.merged(), "app", "from-inside"))
	if err != nil {
		t.Fatalf("the host's root lacks what the inside sandbox wrote: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != p.runAs {
		t.Errorf("from-inside is owned by %d on the host, want the sandbox user %d", st.Uid, p.runAs)
	}
	// Providers that cannot share a root refuse, and an ill-formed Dir is refused.
	if err := WithinWritableRoot(Spec{ID: "x", Within: host}, "container"); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("WithinWritableRoot = %v, want ErrInvalidSpec", err)
	}
	if _, err := p.Start(t.Context(), Spec{ID: "rel", Command: []string{"/app/probe", "inside"}, RootFS: root, Dir: "app"}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("a relative Dir: %v, want ErrInvalidSpec", err)
	}
}
