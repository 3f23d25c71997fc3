package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// The test binary doubles as the environment (and as a worker) when this
// variable names a helper; see TestMain.
const helperEnv = "PROCTOR_SANDBOX_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		code := m.Run()
		testenv.Cleanup()
		os.Exit(code)
	case "connect":
		// Exit 0 when a TCP connection to $ADDR succeeds.
		c, err := net.DialTimeout("tcp", os.Getenv("ADDR"), 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		c.Close()
		os.Exit(0)
	case "listen":
		// Exit 0 when binding 127.0.0.1 and connecting to it works.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err == nil {
			var c net.Conn
			if c, err = net.Dial("tcp", l.Addr().String()); err == nil {
				c.Close()
			}
			l.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "inside":
		// Read a line from $ADDR with no retry (the listener must be there when the command
		// starts), print it, then exit 0 only when $HOST_ADDR cannot be reached.
		c, err := net.DialTimeout("tcp", os.Getenv("ADDR"), 2*time.Second)
		if err != nil {
			fmt.Fprintln(os.Stderr, "inside:", err)
			os.Exit(1)
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "inside:", err)
			os.Exit(1)
		}
		fmt.Print(line)
		if c, err := net.DialTimeout("tcp", os.Getenv("HOST_ADDR"), 2*time.Second); err == nil {
			c.Close()
			fmt.Fprintln(os.Stderr, "the host's listener was reached")
			os.Exit(1)
		}
		os.Exit(0)
	case "worker":
		os.Exit(workerMain())
	case "unprivileged":
		os.Exit(unprivilegedMain())
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// workerMain plays a worker: it starts one sandbox whose command forks a
// grandchild, prints the host pids of every process of the sandbox as one
// JSON line once they all run, then waits to be killed.
func workerMain() int {
	p, err := NewProcess(ProcessOptions{
		Root:      os.Getenv("ROOT"),
		Isolation: os.Getenv("ISOLATION"),
		Logger:    slog.New(slog.NewTextHandler(os.Stderr, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb, err := p.Start(context.Background(), Spec{ID: "orphan", Command: []string{"sh", "-c", "sleep 300 & sleep 300"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Wait for both sleeps, the grandchild included.
	var pids []int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		pids = sb.(*processSandbox).Pids()
		sleeps := 0
		for _, pid := range pids {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
				sleeps++
			}
		}
		if sleeps == 2 {
			break
		}
	}
	json.NewEncoder(os.Stdout).Encode(pids)
	select {}
}

// unprivilegedMain plays a worker that is not root: with the relay at $RELAY, it starts the
// "inside" helper in a sandbox with a listener inside at 127.0.0.1:7777 (and $HOST_ADDR on the
// host's loopback, which it must not reach), and prints how the provider listens inside, the
// sandbox's exit code and what it read, as one JSON line.
func unprivilegedMain() int {
	p, err := NewProcess(ProcessOptions{Root: os.Getenv("ROOT"), Isolation: IsolationBubblewrap, Relay: os.Getenv("RELAY"),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer p.Close(context.Background())
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var served []net.Listener
	sb, err := p.Start(context.Background(), Spec{ID: "unprivileged", Command: []string{exe},
		Env: map[string]string{helperEnv: "inside", "ADDR": "127.0.0.1:7777", "HOST_ADDR": os.Getenv("HOST_ADDR")},
		Listen: &Listen{Port: 7777, Ready: func(ln net.Listener) {
			served = append(served, ln)
			go serveLines(ln)
		}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	sb.Stdin().Close()
	out, _ := io.ReadAll(sb.Stdout())
	<-sb.Done()
	code := 0
	var exit interface{ ExitCode() int }
	if errors.As(sb.Err(), &exit) {
		code = exit.ExitCode()
	}
	for _, ln := range served {
		ln.Close()
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"listen": p.listenBy, "exit": code, "read": string(out), "ready": len(served),
		"stderr": sb.(*processSandbox).logs.Tail(3)})
	return 0
}

// newProvider returns a provider with the given isolation whose sandboxes
// live under a test temp dir; it is closed (every sandbox stopped) when the
// test ends. A bubblewrap provider skips the test where bubblewrap does not
// work.
func newProvider(t *testing.T, isolation string, opts ...func(*ProcessOptions)) *Process {
	t.Helper()
	o := ProcessOptions{
		Root:      t.TempDir(),
		Isolation: isolation,
		StopGrace: 2 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
		// A host without the NVIDIA driver, so that stand-in GPU ids mean the same on a GPU host;
		// a test of the host's own GPUs says /proc.
		procDir: t.TempDir(),
	}
	for _, f := range opts {
		f(&o)
	}
	p, err := NewProcess(o)
	if err != nil {
		if isolation == IsolationBubblewrap {
			t.Skipf("bubblewrap not usable here: %v", err)
		}
		t.Fatalf("NewProcess(%+v): %v", o, err)
	}
	t.Cleanup(func() {
		if err := p.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

var bothIsolations = []string{IsolationBubblewrap, IsolationNone}

// start starts spec and stops the sandbox when the test ends.
func start(t *testing.T, p *Process, spec Spec) *processSandbox {
	t.Helper()
	if spec.ID == "" {
		spec.ID = strings.ReplaceAll(t.Name(), "/", "_")
	}
	sb, err := p.Start(t.Context(), spec)
	if err != nil {
		t.Fatalf("Start(%q): %v", spec.Command, err)
	}
	t.Cleanup(func() {
		if err := sb.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return sb.(*processSandbox)
}

// run starts spec with stdin closed, and returns its stdout once it exited.
func run(t *testing.T, p *Process, spec Spec) (string, *processSandbox) {
	t.Helper()
	sb := start(t, p, spec)
	sb.Stdin().Close()
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(sb.Stdout())
		out <- string(b)
	}()
	select {
	case <-sb.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("%q still running after 20s; stderr %q", spec.Command, sb.logs.Tail(5))
	}
	select {
	case s := <-out:
		return s, sb
	case <-time.After(5 * time.Second):
		t.Fatalf("%q: stdout not closed 5s after exit", spec.Command)
		return "", nil
	}
}

// exitCode is the environment's exit status, or -1 when it did not exit
// normally.
func exitCode(t *testing.T, sb Sandbox) int {
	t.Helper()
	<-sb.Done()
	err := sb.Err()
	if !errors.Is(err, ErrExited) {
		t.Fatalf("Err() = %v after Done, want an error wrapping ErrExited", err)
	}
	var ee interface{ ExitCode() int }
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// alive reports whether pid is a live process (zombies count as dead: they
// only wait to be reaped by whoever inherited them).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && !strings.HasPrefix(strings.TrimSpace(string(b[i+1:])), "Z")
}

// waitGone waits up to d for every pid to die and returns the survivors.
func waitGone(pids []int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killAll SIGKILLs pids that are still alive: cleanup after a failed test.
func killAll(pids []int) {
	for _, pid := range pids {
		if alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// readStdoutLines reads n lines from r within d.
func readStdoutLines(r io.Reader, n int, d time.Duration) ([]string, error) {
	type result struct {
		lines []string
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		var res result
		br := bufio.NewReader(r)
		for range n {
			s, err := br.ReadString('\n')
			if err != nil {
				res.err = err
				break
			}
			res.lines = append(res.lines, strings.TrimSuffix(s, "\n"))
		}
		ch <- res
	}()
	select {
	case res := <-ch:
		return res.lines, res.err
	case <-time.After(d):
		return nil, fmt.Errorf("not %d lines within %s", n, d)
	}
}

func testBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
