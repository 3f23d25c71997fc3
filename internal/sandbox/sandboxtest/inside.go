package sandboxtest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Greeting is the file /etc/greeting of DynamicRoot's image.
const Greeting = "hello from the agent's image\n"

// DynamicRoot makes a root file system like a merged-/usr image's (/bin and /lib links into
// /usr) holding this host's cat, its loader (reached through an absolute link, as Debian's
// /lib64/ld-linux-x86-64.so.2 is) and the libraries it links, and /etc/greeting (Greeting): a
// brought agent's image whose program needs its own libc.
func DynamicRoot(t testing.TB) string {
	t.Helper()
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Skip("no cat here")
	}
	out, err := exec.Command("ldd", cat).Output()
	if err != nil {
		t.Skipf("ldd %s: %v (a static cat, or no ldd)", cat, err)
	}
	root := t.TempDir()
	for _, d := range []string{"usr/bin", "usr/lib", "etc", "dev", "proc", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"bin": "usr/bin", "lib": "usr/lib"} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	copyIn := func(host, at string) {
		t.Helper()
		b, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		// Directories through the image's own links: /lib/x is /usr/lib/x.
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, at)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, at), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyIn(cat, "/usr/bin/cat")
	for _, lib := range regexp.MustCompile(`/[^ \t\n]+`).FindAllString(string(out), -1) {
		real, err := filepath.EvalSymlinks(lib)
		if err != nil {
			t.Fatal(err)
		}
		copyIn(real, real)
		if real != lib {
			os.MkdirAll(filepath.Dir(filepath.Join(root, lib)), 0o755) //nolint:errcheck // the link says
			if err := os.Symlink(real, filepath.Join(root, lib)); err != nil && !errors.Is(err, os.ErrExist) {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "greeting"), []byte(Greeting), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// Inside checks a provider that is a sandbox.Mounter, the way a brought agent runs inside its
// environment: within env, a running sandbox of Root's image from p, a companion made from
// Root's image too (spec, without command: its RootFS or Image as the provider takes it) is shown
// DynamicRoot's image at sandbox.AgentRootInside and runs that image's dynamically linked cat by
// its own loader (sandbox.AgentCommand), though Root's image holds no libc: cat prints the
// agent image's /etc/greeting and the environment image's /etc/passwd, and exits 0.
func Inside(t *testing.T, p sandbox.Provider, env sandbox.Sandbox, spec sandbox.Spec) {
	t.Helper()
	if m, ok := p.(sandbox.Mounter); !ok || !m.CanMount() {
		t.Fatalf("%T cannot show another image's files in its sandboxes", p)
	}
	agentRoot := DynamicRoot(t)
	var im Images
	argv, err := sandbox.AgentCommand(agentRoot, sandbox.AgentRootInside, []string{"/bin/cat", "/etc/greeting", "/etc/passwd"})
	if err != nil {
		t.Fatal(err)
	}
	spec.ID, spec.Command, spec.Companion, spec.Within, spec.WorkDir = "inside", argv, true, env, env.WorkDir()
	spec.Mounts = []sandbox.Mount{{Source: agentRoot, Image: im.Of(t, agentRoot), Target: sandbox.AgentRootInside}}
	out, err := RunListening(t, p, spec, 7777)
	code := 0 // a process sandbox's command that exits 0 says no more than that it exited
	if exit := (interface{ ExitCode() int })(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	}
	if want := Greeting + "root:x:0:0:root:/:/bin/sh\n"; out != want || code != 0 {
		t.Errorf("the agent image's cat inside the environment's: %q, %v; want %q and exit status 0", out, err, want)
	}
	select {
	case <-env.Done():
		t.Errorf("the environment ended with the sandbox inside it: %v", env.Err())
	default:
	}
}
