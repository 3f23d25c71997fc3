package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
)

// TestAgentCommandRunsAProgramByItsOwnLoader checks the command a brought agent's image runs by
// from elsewhere: its loader and library directories found in the image, links followed there,
// the image's files among the arguments moved under the prefix, a script run by its image's
// interpreter; it runs on this host with the image shown at its own path (prefix = root).
func TestAgentCommandRunsAProgramByItsOwnLoader(t *testing.T) {
	root := sandboxtest.DynamicRoot(t)
	const prefix = "/tmp/.proctor/agent"
	argv, err := sandbox.AgentCommand(root, prefix, []string{"/bin/cat", "/etc/greeting", "relative", "/no/such/file", "/etc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(argv) != 8 || !strings.HasPrefix(argv[0], prefix+"/usr/lib/") || !strings.Contains(argv[0], "ld-") || argv[1] != "--library-path" ||
		!strings.HasPrefix(argv[2], prefix+"/usr/lib") ||
		!slices.Equal(argv[3:], []string{prefix + "/usr/bin/cat", prefix + "/etc/greeting", "relative", "/no/such/file", "/etc"}) {
		t.Errorf("AgentCommand = %q", argv)
	}

	run := func(argv []string) string {
		t.Helper()
		out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", argv, err, out)
		}
		return string(out)
	}
	argv, err = sandbox.AgentCommand(root, root, []string{"/bin/cat", "/etc/greeting"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(argv); got != sandboxtest.Greeting {
		t.Errorf("%q printed %q", argv, got)
	}
	// A script found by name in the image's PATH, its "#!" interpreter the image's.
	os.WriteFile(filepath.Join(root, "usr", "bin", "hello"), []byte("#!/bin/cat\nthe script itself\n"), 0o755)
	argv, err = sandbox.AgentCommand(root, root, []string{"hello"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(argv); got != "#!/bin/cat\nthe script itself\n" || argv[len(argv)-1] != filepath.Join(root, "usr/bin/hello") {
		t.Errorf("%q printed %q", argv, got)
	}

	// "#!/usr/bin/env cat" runs the image's cat, not the one the sandbox's PATH would find.
	if env, err := exec.LookPath("env"); err == nil {
		b, _ := os.ReadFile(env)
		os.WriteFile(filepath.Join(root, "usr", "bin", "env"), b, 0o755)
		os.WriteFile(filepath.Join(root, "usr", "bin", "by-env"), []byte("#!/usr/bin/env cat\nby env\n"), 0o755)
		argv, err = sandbox.AgentCommand(root, root, []string{"/usr/bin/by-env"})
		if err != nil || argv[3] != filepath.Join(root, "usr/bin/cat") {
			t.Errorf("AgentCommand(a #!/usr/bin/env script) = %q, %v", argv, err)
		} else if got := run(argv); got != "#!/usr/bin/env cat\nby env\n" {
			t.Errorf("%q printed %q", argv, got)
		}
	}
	// An ld.so.conf that includes itself, and all its siblings, is read once each.
	os.MkdirAll(filepath.Join(root, "etc", "ld.so.conf.d"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "ld.so.conf"), []byte("include /etc/ld.so.conf\ninclude ld.so.conf.d/*.conf\n/opt/lib\n"), 0o644)
	for i := range 30 {
		os.WriteFile(filepath.Join(root, "etc", "ld.so.conf.d", fmt.Sprintf("%02d.conf", i)), []byte("include /etc/ld.so.conf.d/*.conf\n/usr/lib\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(root, "opt", "lib"), 0o755)
	if argv, err := sandbox.AgentCommand(root, prefix, []string{"/bin/cat"}); err != nil || !strings.HasPrefix(argv[2], prefix+"/usr/lib:"+prefix+"/opt/lib:") &&
		!strings.HasPrefix(argv[2], prefix+"/opt/lib:"+prefix+"/usr/lib:") {
		t.Errorf("with a looping ld.so.conf: %q, %v", argv, err)
	}

	// Links never lead out of the image, and what is not there is said.
	os.Symlink("/../../../../../../usr/sbin/nologin", filepath.Join(root, "usr", "bin", "out"))
	os.Symlink("../../../../../../../../bin/sh", filepath.Join(root, "usr", "bin", "out2"))
	os.WriteFile(filepath.Join(root, "usr", "bin", "noexec"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(root, "usr", "bin", "lost"), []byte("#!/usr/bin/python3\n"), 0o755)
	for argv0, want := range map[string]string{
		"/usr/bin/out":  "no executable file",
		"/usr/bin/out2": "no executable file",
		"noexec":        "no executable file",
		"rel/agent":     "not an absolute path",
		"/usr/bin/lost": "the interpreter of /usr/bin/lost",
	} {
		if argv, err := sandbox.AgentCommand(root, prefix, []string{argv0}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AgentCommand(%s) = %q, %v; want an error saying %q", argv0, argv, err, want)
		}
	}
}

// TestAnAgentRunsFromItsImageInAnotherImagesSandbox runs a dynamically linked program of one
// image, shown read-only at AgentRootInside, in the sandbox of an image that holds no libc (the
// suite's busybox image) by its own loader, under bubblewrap; and checks what such a spec may ask.
func TestAnAgentRunsFromItsImageInAnotherImagesSandbox(t *testing.T) {
	newProcess := func(isolation string) *sandbox.Process {
		p, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), MaxSandboxes: 1, Isolation: isolation, StopGrace: time.Second})
		if err != nil {
			t.Skipf("no %s sandboxes here: %v", isolation, err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		return p
	}
	p := newProcess(sandbox.IsolationBubblewrap)
	root := sandboxtest.Root(t)
	env, err := p.Start(t.Context(), sandbox.Spec{ID: "env", Command: []string{"/bin/sleep", "300"}, RootFS: root})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop(context.Background())
	sandboxtest.Inside(t, p, env, sandbox.Spec{RootFS: root})

	agentRoot := sandboxtest.DynamicRoot(t)
	argv, _ := sandbox.AgentCommand(agentRoot, sandbox.AgentRootInside, []string{"/bin/cat"})
	mounts := []sandbox.Mount{{Source: agentRoot, Target: sandbox.AgentRootInside}}
	for name, spec := range map[string]sandbox.Spec{
		"not in the mount":  {ID: "a", Command: []string{sandbox.AgentRootInside + "/usr/bin/none"}, RootFS: root, Mounts: mounts},
		"relative target":   {ID: "b", Command: argv, RootFS: root, Mounts: []sandbox.Mount{{Source: agentRoot, Target: "tmp/x"}}},
		"the root":          {ID: "c", Command: argv, Mounts: []sandbox.Mount{{Source: agentRoot, Target: "/"}}},
		"no such source":    {ID: "d", Command: argv, Mounts: []sandbox.Mount{{Source: filepath.Join(agentRoot, "none"), Target: sandbox.AgentRootInside}}},
		"a link out of it":  {ID: "e", Command: []string{sandbox.AgentRootInside + "/lib64/../../../../usr/bin/env"}, Mounts: mounts},
		"a directory in it": {ID: "f", Command: []string{sandbox.AgentRootInside + "/usr/bin"}, Mounts: mounts},
	} {
		if sb, err := p.Start(t.Context(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) {
			if sb != nil {
				sb.Stop(t.Context())
			}
			t.Errorf("%s: Start = %v, want ErrInvalidSpec", name, err)
		}
	}
	if sb, err := newProcess(sandbox.IsolationNone).Start(t.Context(), sandbox.Spec{ID: "g", Command: argv, Mounts: mounts}); !errors.Is(err, sandbox.ErrInvalidSpec) {
		if sb != nil {
			sb.Stop(t.Context())
		}
		t.Errorf("mounts without bubblewrap: Start = %v, want ErrInvalidSpec", err)
	}
}
