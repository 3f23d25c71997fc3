// Package sandboxtest is what every sandbox provider must do, as one test
// suite that each provider's tests run against a real provider: the process
// provider under bubblewrap, and the container provider against a real
// container engine. The suite runs busybox and the todo example environment
// from one image root file system (Root), so the same commands mean the same
// thing under every provider.
package sandboxtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Harness adapts a provider to the suite.
type Harness struct {
	// New returns a fresh provider that runs at most max sandboxes and stops
	// sandboxes with a grace of at most a second; the suite closes it.
	New func(t *testing.T, max int) sandbox.Provider
	// Spec returns a spec (without ID) that runs argv in the image whose
	// root file system is root, a directory Root made.
	Spec func(t *testing.T, root string, argv ...string) sandbox.Spec
	// NoHostWorkDir says the provider's sandboxes have no work dir on this host (WorkDir is
	// empty: the Kubernetes provider's is on the pod's node); the checks of its contents go.
	NoHostWorkDir bool
}

// Run runs the suite against h.
func Run(t *testing.T, h Harness) {
	su := &suite{h: h, root: Root(t)}
	for _, c := range []struct {
		name string
		test func(*testing.T)
	}{
		{"StdioEnvironmentAndWorkDir", su.stdioEnvironmentAndWorkDir},
		{"StderrIsLogsAndStdoutIsNot", su.stderrIsLogsAndStdoutIsNot},
		{"OnlyLoopbackWithoutNetwork", su.onlyLoopbackWithoutNetwork},
		{"NetworkNeverSharesTheWorkers", su.networkNeverSharesTheWorkers},
		{"ErrSaysWhyItExited", su.errSaysWhyItExited},
		{"StopTearsDownOnceForEveryCaller", su.stopTearsDownOnceForEveryCaller},
		{"Capacity", su.capacity},
		{"WhatCannotRunFailsClearlyAndHoldsNothing", su.whatCannotRunFailsClearlyAndHoldsNothing},
		{"TwoSandboxesNeverShareAWorkDir", su.twoSandboxesNeverShareAWorkDir},
		{"CloseStopsEverySandboxAndStartsNoMore", su.closeStopsEverySandboxAndStartsNoMore},
		{"ARealMCPServerServes", su.aRealMCPServerServes},
	} {
		t.Run(c.name, c.test)
	}
}

// suite holds what every case of Run shares.
type suite struct {
	h    Harness
	root string
}

func (su *suite) spec(t *testing.T, id string, argv ...string) sandbox.Spec {
	s := su.h.Spec(t, su.root, argv...)
	s.ID = id
	return s
}

// newProvider is a provider of max sandboxes, closed when t ends.
func (su *suite) newProvider(t *testing.T, max int) sandbox.Provider {
	p := su.h.New(t, max)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := p.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// start starts a sandbox, stopped when t ends.
func (su *suite) start(t *testing.T, p sandbox.Provider, s sandbox.Spec) sandbox.Sandbox {
	t.Helper()
	sb, err := p.Start(t.Context(), s)
	if err != nil {
		t.Fatalf("Start %q: %v", s.Command, err)
	}
	t.Cleanup(func() { sb.Stop(context.Background()) })
	return sb
}

// exited waits for sb to exit.
func (su *suite) exited(t *testing.T, sb sandbox.Sandbox) {
	t.Helper()
	select {
	case <-sb.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("sandbox %s still running after 30s; stderr %v", sb.ID(), sb.Logs())
	}
}

func (su *suite) stdioEnvironmentAndWorkDir(t *testing.T) {
	t.Setenv("PROCTOR_TEST_SECRET", "must-not-leak")
	p := su.newProvider(t, 4)
	s := su.spec(t, "stdio", "/bin/sh", "-c", `pwd; echo "$HOME"; echo "secret=$PROCTOR_TEST_SECRET"; echo "extra=$EXTRA"; `+
		`echo note > note; touch /etc/x 2>/dev/null && echo su.root-writable || echo su.root-readonly; read line; echo "got $line"`)
	s.Env = map[string]string{"EXTRA": "yes"}
	sb := su.start(t, p, s)
	if _, err := fmt.Fprintln(sb.Stdin(), "hello"); err != nil {
		t.Fatalf("write stdin: %v", err)
	}
	got := readLines(t, sb.Stdout(), 6)
	want := []string{sandbox.WorkDirInImage, sandbox.WorkDirInImage, "secret=", "extra=yes", "su.root-readonly", "got hello"}
	if !slices.Equal(got, want) {
		t.Errorf("stdout = %q, want %q (cwd, HOME, no host env, Spec.Env, a read-only su.root, stdin echoed)", got, want)
	}
	su.exited(t, sb)
	if b, err := os.ReadFile(filepath.Join(sb.WorkDir(), "note")); !su.h.NoHostWorkDir && (err != nil || string(b) != "note\n") {
		t.Errorf("the file written in the work dir reads %q, %v on the host at %s", b, err, sb.WorkDir())
	}
	if err := sb.Err(); !errors.Is(err, sandbox.ErrExited) || errors.Is(err, sandbox.ErrStopped) {
		t.Errorf("Err after a clean exit = %v, want ErrExited and not ErrStopped", err)
	}
}

func (su *suite) stderrIsLogsAndStdoutIsNot(t *testing.T) {
	p := su.newProvider(t, 4)
	var mu sync.Mutex
	var seen []string
	s := su.spec(t, "logs", "/bin/sh", "-c", `echo one >&2; echo mcp-stream; echo two >&2`)
	s.OnLog = func(l sandbox.LogLine) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, l.Stream+":"+l.Line)
	}
	sb := su.start(t, p, s)
	out, err := io.ReadAll(sb.Stdout())
	if err != nil || string(out) != "mcp-stream\n" {
		t.Errorf("stdout = %q, %v; want only the stdout line", out, err)
	}
	su.exited(t, sb)
	var logs []string
	for _, l := range sb.Logs() {
		logs = append(logs, l.Stream+":"+l.Line)
	}
	want := []string{"stderr:one", "stderr:two"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(logs, want) || !slices.Equal(seen, want) {
		t.Errorf("Logs() = %q, OnLog saw %q; want %q", logs, seen, want)
	}
}

func (su *suite) onlyLoopbackWithoutNetwork(t *testing.T) {
	p := su.newProvider(t, 4)
	sb := su.start(t, p, su.spec(t, "net", "/bin/cat", "/proc/net/dev"))
	out, _ := io.ReadAll(sb.Stdout())
	var ifaces []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if !slices.Equal(ifaces, []string{"lo"}) {
		t.Errorf("network interfaces %q, want only lo", ifaces)
	}
}

func (su *suite) networkNeverSharesTheWorkers(t *testing.T) {
	// A sandbox allowed the network does not share the worker's: its namespace has its loopback
	// only, as without, and its way out is the egress proxy its caller serves on Spec.Listen.
	p := su.newProvider(t, 4)
	s := su.spec(t, "net-on", "/bin/cat", "/proc/net/dev")
	s.Network = true
	sb := su.start(t, p, s)
	out, _ := io.ReadAll(sb.Stdout())
	var ifaces []string
	for _, l := range strings.Split(string(out), "\n") {
		if name, _, ok := strings.Cut(l, ":"); ok {
			ifaces = append(ifaces, strings.TrimSpace(name))
		}
	}
	if !slices.Equal(ifaces, []string{"lo"}) {
		t.Errorf("with Network the sandbox sees interfaces %q, want only lo: it never shares the worker's network", ifaces)
	}
}

func (su *suite) errSaysWhyItExited(t *testing.T) {
	p := su.newProvider(t, 4)
	sb := su.start(t, p, su.spec(t, "exit", "/bin/sh", "-c", "echo going >&2; exit 3"))
	su.exited(t, sb)
	err := sb.Err()
	if !errors.Is(err, sandbox.ErrExited) || errors.Is(err, sandbox.ErrStopped) || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("Err = %v, want ErrExited with exit status 3, not ErrStopped", err)
	}
	if err := sb.Stop(t.Context()); err != nil {
		t.Errorf("Stop after the exit: %v", err)
	}
}

func (su *suite) stopTearsDownOnceForEveryCaller(t *testing.T) {
	p := su.newProvider(t, 4)
	sb := su.start(t, p, su.spec(t, "stop", "/bin/sh", "-c", "sleep 300 & sleep 300"))
	if sb.Err() != nil {
		t.Fatalf("Err of a running sandbox = %v", sb.Err())
	}
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = sb.Stop(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
	if took := time.Since(begin); took > 15*time.Second {
		t.Errorf("Stop took %s", took)
	}
	select {
	case <-sb.Done():
	default:
		t.Error("Done is open after Stop")
	}
	if err := sb.Err(); !errors.Is(err, sandbox.ErrStopped) || !errors.Is(err, sandbox.ErrExited) {
		t.Errorf("Err after Stop = %v, want ErrStopped and ErrExited", err)
	}
	if _, err := os.Stat(sb.WorkDir()); !os.IsNotExist(err) {
		t.Errorf("work dir %s after Stop: %v, want it removed", sb.WorkDir(), err)
	}
	if n := p.Running(); n != 0 {
		t.Errorf("Running() = %d after Stop", n)
	}
}

func (su *suite) capacity(t *testing.T) {
	p := su.newProvider(t, 2)
	if p.Capacity() != 2 {
		t.Errorf("Capacity() = %d", p.Capacity())
	}
	a := su.start(t, p, su.spec(t, "a", "/bin/sleep", "300"))
	su.start(t, p, su.spec(t, "b", "/bin/sleep", "300"))
	if _, err := p.Start(t.Context(), su.spec(t, "c", "/bin/sleep", "300")); !errors.Is(err, sandbox.ErrCapacity) {
		t.Fatalf("a third Start: %v, want ErrCapacity", err)
	}
	a.Stop(t.Context())
	if p.Running() != 1 {
		t.Errorf("Running() = %d after a stop, want 1", p.Running())
	}
	su.start(t, p, su.spec(t, "c", "/bin/sleep", "300"))
}

func (su *suite) whatCannotRunFailsClearlyAndHoldsNothing(t *testing.T) {
	p := su.newProvider(t, 4)
	cases := map[string]sandbox.Spec{
		"no id":            su.spec(t, "", "/bin/true"),
		"no command":       su.spec(t, "none"),
		"not in the image": su.spec(t, "missing", "/app/none"),
		"negative memory":  func() sandbox.Spec { s := su.spec(t, "neg", "/bin/true"); s.Resources.MemoryMB = -1; return s }(),
	}
	for name, s := range cases {
		sb, err := p.Start(t.Context(), s)
		if !errors.Is(err, sandbox.ErrInvalidSpec) {
			if sb != nil {
				sb.Stop(t.Context())
			}
			t.Errorf("%s: Start = %v, want ErrInvalidSpec", name, err)
		}
	}
	if n := p.Running(); n != 0 {
		t.Errorf("Running() = %d after failed starts", n)
	}
}

func (su *suite) twoSandboxesNeverShareAWorkDir(t *testing.T) {
	p := su.newProvider(t, 4)
	a, b := su.start(t, p, su.spec(t, "same", "/bin/sleep", "300")), su.start(t, p, su.spec(t, "same", "/bin/sleep", "300"))
	if a.WorkDir() == b.WorkDir() && !su.h.NoHostWorkDir {
		t.Errorf("both got work dir %s", a.WorkDir())
	}
}

func (su *suite) closeStopsEverySandboxAndStartsNoMore(t *testing.T) {
	p := su.h.New(t, 4)
	a, _ := p.Start(t.Context(), su.spec(t, "a", "/bin/sleep", "300"))
	b, _ := p.Start(t.Context(), su.spec(t, "b", "/bin/sleep", "300"))
	if a == nil || b == nil {
		t.Fatal("Start failed")
	}
	if err := p.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, sb := range []sandbox.Sandbox{a, b} {
		if !errors.Is(sb.Err(), sandbox.ErrStopped) {
			t.Errorf("after Close, Err = %v", sb.Err())
		}
	}
	if _, err := p.Start(t.Context(), su.spec(t, "c", "/bin/true")); !errors.Is(err, sandbox.ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func (su *suite) aRealMCPServerServes(t *testing.T) {
	p := su.newProvider(t, 4)
	s := su.spec(t, "mcp", TodoCommand...)
	s.Resources = sandbox.Resources{MemoryMB: 256, CPU: 1}
	sb := su.start(t, p, s)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "sandboxtest", Version: "0"}, nil)
	session, err := c.Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %v)", err, sb.Logs())
	}
	defer session.Close()
	res, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "add_todo") {
		t.Errorf("tools/list = %q, want add_todo among them", names)
	}
	call, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "add_todo", Arguments: map[string]any{"title": "from the sandbox"}})
	if err != nil || call.IsError {
		t.Fatalf("add_todo: %v %+v", err, call)
	}
	begin := time.Now()
	if err := sb.Stop(t.Context()); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	// The server handles SIGTERM: Stop needs no SIGKILL.
	if took := time.Since(begin); took > 3*time.Second {
		t.Errorf("Stop of a server that handles SIGTERM took %s", took)
	}
}

// readLines reads n lines from r, failing the test after 20s.
func readLines(t *testing.T, r io.Reader, n int) []string {
	t.Helper()
	type result struct {
		lines []string
		err   error
	}
	ch := make(chan result, 1)
	go func() {
		var lines []string
		buf := make([]byte, 1)
		var cur []byte
		for len(lines) < n {
			if _, err := r.Read(buf); err != nil {
				ch <- result{lines, err}
				return
			}
			if buf[0] == '\n' {
				lines = append(lines, string(cur))
				cur = nil
				continue
			}
			cur = append(cur, buf[0])
		}
		ch <- result{lines, nil}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			t.Fatalf("stdout after %q: %v", res.lines, res.err)
		}
		return res.lines
	case <-time.After(20 * time.Second):
		t.Fatal("stdout: no lines after 20s")
		return nil
	}
}
