package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/proctorhq/proctor/internal/testenv"
)

// serveLines answers every connection on ln with one line naming its number, until ln closes.
func serveLines(ln net.Listener) {
	for n := 1; ; n++ {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "served %d from outside\n", n)
		c.Close()
	}
}

func TestAListenerInsideIsTheSandboxsOnlyWayOut(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go serveLines(host)
	p := newProvider(t, IsolationBubblewrap)

	var inside net.Listener
	out, sb := run(t, p, Spec{
		Command: []string{testBinary(t)},
		Env:     map[string]string{helperEnv: "inside", "ADDR": "127.0.0.1:7777", "HOST_ADDR": host.Addr().String()},
		Listen: &Listen{Port: 7777, Ready: func(ln net.Listener) {
			inside = ln
			go serveLines(ln)
		}},
	})
	if inside == nil {
		t.Fatal("Ready was not called")
	}
	defer inside.Close()
	if code := exitCode(t, sb); code != 0 || out != "served 1 from outside\n" {
		t.Errorf("the sandbox exited %d having read %q (stderr %q); want 0 and the line served outside", code, out, sb.logs.Tail(3))
	}
	// The listener is the sandbox's, not the host's: nothing listens on the host's 7777.
	if c, err := net.Dial("tcp", "127.0.0.1:7777"); err == nil {
		c.Close()
		t.Error("the listener inside the sandbox is reachable on the host's loopback")
	}
}

func TestAListenerInsideIsRefusedWhereItCannotBeMade(t *testing.T) {
	ready := func(net.Listener) { t.Error("Ready called for a sandbox that was refused") }
	spec := Spec{ID: "refused", Command: []string{testBinary(t)}, Listen: &Listen{Port: 7777, Ready: ready}}
	if _, err := newProvider(t, IsolationNone).Start(t.Context(), spec); !errors.Is(err, ErrNoListen) {
		t.Errorf("a listener inside an unisolated sandbox: %v, want ErrNoListen", err)
	}
}

func TestASandboxUnderBubblewrapHasNoCapabilities(t *testing.T) {
	p := newProvider(t, IsolationBubblewrap)
	// Read by a program the sandbox's shell execs: what it holds after an exec, which a root
	// uid would otherwise regain.
	out, sb := run(t, p, Spec{Command: []string{"sh", "-c", "grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs):' /proc/self/status"}})
	if code := exitCode(t, sb); code != 0 {
		t.Fatalf("exit %d: %q", code, sb.logs.Tail(3))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		name, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if name == "NoNewPrivs" && v != "1" || name != "NoNewPrivs" && strings.Trim(v, "0") != "" {
			t.Errorf("the sandbox's process: %s", line)
		}
	}
	if len(lines) != 5 {
		t.Errorf("read %q", out)
	}
}

// A worker that is not root may not enter a sandbox's network namespace: with the relay it still
// gives the sandbox its listener inside, there from the command's first instruction, and the
// sandbox reaches nothing else (the host's loopback included). The test binary plays that
// worker as nobody (see unprivilegedMain).
func TestAnUnprivilegedWorkerListensInsideThroughTheRelay(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("runs a worker as another user, which takes root")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		testenv.MissingTool(t, "bubblewrap")
	}
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go serveLines(host)
	// Everything the worker runs or writes, where nobody may: the test binary, the relay and a
	// sandbox root.
	dir, err := os.MkdirTemp("", "proctor-unprivileged-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	root := filepath.Join(dir, "root")
	for _, err := range []error{os.Chmod(dir, 0o755), os.Mkdir(root, 0o777), os.Chmod(root, 0o777)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	copyExe := func(src, name string) string {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
		return dst
	}
	worker := copyExe(testBinary(t), "sandbox.test")
	relay := copyExe(testenv.StaticProgram(t, "cmd/proctor-relay"), "proctor-relay")

	cmd := exec.CommandContext(t.Context(), worker)
	cmd.Env = append(os.Environ(), helperEnv+"=unprivileged", "ROOT="+root, "RELAY="+relay, "HOST_ADDR="+host.Addr().String())
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the unprivileged worker: %v\n%s", err, stderr.String())
	}
	var got struct {
		Listen string
		Exit   int
		Read   string
		Ready  int
		Stderr any
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s\n%s", err, out, stderr.String())
	}
	if got.Listen != listenRelay || got.Exit != 0 || got.Read != "served 1 from outside\n" || got.Ready != 1 {
		t.Errorf("an unprivileged worker's sandbox with a listener inside: %+v; want the relay, exit 0, the served line, Ready once\n%s", got, stderr.String())
	}
}

// A sandbox that sees the host's root file system does not see the sandbox root in it: not the
// other sandboxes' work dirs, nor the sockets their listeners are relayed to.
func TestASandboxSeesNoOtherSandboxsWorkDir(t *testing.T) {
	// Outside /tmp, which every sandbox has a fresh one of anyway.
	root, err := os.MkdirTemp("/var/tmp", "proctor-hidden-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(root)
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.Root = root })
	first := start(t, p, Spec{ID: "first", Command: []string{"sleep", "300"}})
	if err := os.WriteFile(filepath.Join(first.WorkDir(), "secret"), []byte("first's"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What is left of the root is the path to the sandbox's own work dir, and nothing beside it.
	// It binds the directory the root is in, as a command kept there would have bound.
	out, sb := run(t, p, Spec{ID: "second", Command: []string{"sh", "-c", `cat "$0/secret"; ls -A "$(dirname "$PWD")"`, first.WorkDir()},
		ReadOnlyBinds: []string{filepath.Dir(root)}})
	if code := exitCode(t, sb); code != 0 || strings.Contains(out, "first") || !strings.HasPrefix(out, "second-") || strings.Count(out, "\n") != 1 {
		t.Errorf("the second sandbox read %q (exit %d, stderr %q); want nothing of the sandbox root", out, code, sb.logs.Tail(3))
	}
}
