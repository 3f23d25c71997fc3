package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dynamicImage makes a root file system like a merged-/usr image's (/bin and /lib links into
// /usr) holding this host's cat, its loader (reached through an absolute link, as Debian's
// /lib64/ld-linux-x86-64.so.2 is) and the libraries it links, and /etc/greeting.
func dynamicImage(t *testing.T) string {
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
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Symlink("usr/bin", filepath.Join(root, "bin"))
	os.Symlink("usr/lib", filepath.Join(root, "lib"))
	copyIn := func(host, at string) {
		t.Helper()
		b, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		// Directories through the image's own links: /lib/x → /usr/lib/x.
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
			os.MkdirAll(filepath.Dir(filepath.Join(root, lib)), 0o755)
			if err := os.Symlink(real, filepath.Join(root, lib)); err != nil && !errors.Is(err, os.ErrExist) {
				t.Fatal(err)
			}
		}
	}
	os.WriteFile(filepath.Join(root, "etc", "greeting"), []byte("hello from the agent's image\n"), 0o644)
	return root
}

// TestAgentCommandRunsAProgramByItsOwnLoader checks the command a brought agent's image runs by
// from elsewhere: its loader and library directories found in the image, links followed there,
// the image's files among the arguments moved under the prefix, a script run by its image's
// interpreter; it runs on this host with the image shown at its own path (prefix = root).
func TestAgentCommandRunsAProgramByItsOwnLoader(t *testing.T) {
	root := dynamicImage(t)
	const prefix = "/tmp/.proctor/agent"
	argv, err := AgentCommand(root, prefix, []string{"/bin/cat", "/etc/greeting", "relative", "/no/such/file", "/etc"})
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
	argv, err = AgentCommand(root, root, []string{"/bin/cat", "/etc/greeting"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(argv); got != "hello from the agent's image\n" {
		t.Errorf("%q printed %q", argv, got)
	}
	// A script found by name in the image's PATH, its "#!" interpreter the image's.
	os.WriteFile(filepath.Join(root, "usr", "bin", "hello"), []byte("#!/bin/cat\nthe script itself\n"), 0o755)
	argv, err = AgentCommand(root, root, []string{"hello"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(argv); got != "#!/bin/cat\nthe script itself\n" || argv[len(argv)-1] != filepath.Join(root, "usr/bin/hello") {
		t.Errorf("%q printed %q", argv, got)
	}

	// Links never lead out of the image, and what is not there is said.
	os.Symlink("/../../../../../../usr/bin/env", filepath.Join(root, "usr", "bin", "out"))
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
		if argv, err := AgentCommand(root, prefix, []string{argv0}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("AgentCommand(%s) = %q, %v; want an error saying %q", argv0, argv, err, want)
		}
	}
}

// TestAnAgentRunsFromItsImageInAnotherImagesSandbox runs a dynamically linked program of one
// image, shown read-only at AgentRootInside, in the sandbox of an image that holds no libc at
// all (a static Go program's), by its own loader; and checks what such a spec may ask.
func TestAnAgentRunsFromItsImageInAnotherImagesSandbox(t *testing.T) {
	agentRoot := dynamicImage(t)
	envRoot := imageRoot(t)
	p := newProvider(t, IsolationBubblewrap)
	argv, err := AgentCommand(agentRoot, AgentRootInside, []string{"/bin/cat", "/etc/greeting", "/app/probe"})
	if err != nil {
		t.Fatal(err)
	}
	mounts := []Mount{{Source: agentRoot, Target: AgentRootInside}}
	out, sb := run(t, p, Spec{Command: argv, RootFS: envRoot, Mounts: mounts})
	// /app/probe is the environment image's (the agent's has none): cat prints it too.
	if code := exitCode(t, sb); code != 0 || !strings.HasPrefix(out, "hello from the agent's image\n\x7fELF") {
		t.Errorf("exit %d, printed %.40q; stderr %q", code, out, sb.logs.Tail(5))
	}
	argv, _ = AgentCommand(agentRoot, AgentRootInside, []string{"/bin/cat"})
	for name, spec := range map[string]Spec{
		"not in the mount":  {ID: "a", Command: []string{AgentRootInside + "/usr/bin/none"}, RootFS: envRoot, Mounts: mounts},
		"relative target":   {ID: "b", Command: argv, RootFS: envRoot, Mounts: []Mount{{Source: agentRoot, Target: "tmp/x"}}},
		"the root":          {ID: "c", Command: argv, Mounts: []Mount{{Source: agentRoot, Target: "/"}}},
		"no such source":    {ID: "d", Command: argv, Mounts: []Mount{{Source: filepath.Join(agentRoot, "none"), Target: AgentRootInside}}},
		"a link out of it":  {ID: "e", Command: []string{AgentRootInside + "/lib64/../../../../usr/bin/env"}, Mounts: mounts},
		"a directory in it": {ID: "f", Command: []string{AgentRootInside + "/usr/bin"}, Mounts: mounts},
	} {
		if sb, err := p.Start(t.Context(), spec); !errors.Is(err, ErrInvalidSpec) {
			if sb != nil {
				sb.Stop(t.Context())
			}
			t.Errorf("%s: Start = %v, want ErrInvalidSpec", name, err)
		}
	}
	if sb, err := newProvider(t, IsolationNone).Start(t.Context(), Spec{ID: "g", Command: argv, Mounts: mounts}); !errors.Is(err, ErrInvalidSpec) {
		if sb != nil {
			sb.Stop(t.Context())
		}
		t.Errorf("mounts without bubblewrap: Start = %v, want ErrInvalidSpec", err)
	}
}
