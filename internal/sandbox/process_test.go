package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEnvironmentRunsInItsOwnWorkDirWithPipedStdio(t *testing.T) {
	t.Setenv("PROCTOR_TEST_SECRET", "must-not-leak")
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			sb := start(t, p, Spec{
				Command: []string{"sh", "-c", `pwd; echo "$HOME"; echo "secret=$PROCTOR_TEST_SECRET"; echo "extra=$EXTRA"; read line; echo "got $line"`},
				Env:     map[string]string{"EXTRA": "yes"},
			})
			if filepath.Dir(sb.WorkDir()) != p.root {
				t.Errorf("WorkDir() = %s, want a directory directly under %s", sb.WorkDir(), p.root)
			}
			if _, err := fmt.Fprintln(sb.Stdin(), "hello"); err != nil {
				t.Fatalf("write stdin: %v", err)
			}
			got, err := readStdoutLines(sb.Stdout(), 5, 10*time.Second)
			if err != nil {
				t.Fatalf("stdout after %q: %v", got, err)
			}
			want := []string{sb.WorkDir(), sb.WorkDir(), "secret=", "extra=yes", "got hello"}
			if !slices.Equal(got, want) {
				t.Errorf("stdout = %q, want %q (cwd, HOME, no host env, Spec.Env, stdin echoed)", got, want)
			}
		})
	}
}

func TestTwoSandboxesNeverShareAWorkDirOrProcess(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			spec := Spec{ID: "same-id", Command: []string{"sleep", "300"}}
			a, b := start(t, p, spec), start(t, p, spec)
			if a.WorkDir() == b.WorkDir() {
				t.Errorf("both sandboxes got work dir %s", a.WorkDir())
			}
			if a.cmd.Process.Pid == b.cmd.Process.Pid {
				t.Errorf("both sandboxes are process %d", a.cmd.Process.Pid)
			}
			if !strings.HasPrefix(filepath.Base(a.WorkDir()), "same-id-") {
				t.Errorf("work dir %s is not named after the sandbox id", a.WorkDir())
			}
		})
	}
}

func TestStderrLinesAreLogsAndStdoutIsNot(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			var mu sync.Mutex
			var seen []LogLine
			before := time.Now()
			out, sb := run(t, p, Spec{
				Command: []string{"sh", "-c", `echo one >&2; echo mcp-stream; echo two >&2; printf 'three\r\n' >&2`},
				OnLog: func(l LogLine) {
					mu.Lock()
					defer mu.Unlock()
					seen = append(seen, l)
				},
			})
			if out != "mcp-stream\n" {
				t.Errorf("stdout = %q, want %q", out, "mcp-stream\n")
			}
			logs := sb.Logs()
			var lines []string
			for i, l := range logs {
				lines = append(lines, l.Line)
				if l.Stream != "stderr" || l.Time.Before(before) || (i > 0 && l.Time.Before(logs[i-1].Time)) {
					t.Errorf("log line %d = %+v, want stream stderr and a time after the start, not before the previous line", i, l)
				}
			}
			if want := []string{"one", "two", "three"}; !slices.Equal(lines, want) {
				t.Errorf("Logs() lines = %q, want %q", lines, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, logs) {
				t.Errorf("OnLog saw %+v, want the same lines as Logs() %+v", seen, logs)
			}
		})
	}
}

func TestLogRingKeepsTheLastLinesInOrder(t *testing.T) {
	tests := []struct {
		name  string
		max   int
		added int
		want  []string
	}{
		{"empty", 3, 0, []string{}},
		{"under the bound keeps all", 3, 2, []string{"0", "1"}},
		{"at the bound keeps all", 3, 3, []string{"0", "1", "2"}},
		{"over the bound keeps the newest", 3, 7, []string{"4", "5", "6"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewLogRing(tt.max)
			for i := range tt.added {
				r.Add(LogLine{Line: strconv.Itoa(i)})
			}
			got := []string{}
			for _, l := range r.All() {
				got = append(got, l.Line)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("after %d lines into a ring of %d: %q, want %q", tt.added, tt.max, got, tt.want)
			}
		})
	}
}

func TestSandboxLogsAreBoundedTo10000Lines(t *testing.T) {
	p := newProvider(t, IsolationNone)
	_, sb := run(t, p, Spec{Command: []string{"sh", "-c", `i=0; while [ $i -lt 10005 ]; do echo "line $i" >&2; i=$((i+1)); done`}})
	logs := sb.Logs()
	if len(logs) != 10_000 || logs[0].Line != "line 5" || logs[len(logs)-1].Line != "line 10004" {
		t.Errorf("Logs() has %d lines from %q to %q, want 10000 from %q to %q",
			len(logs), logs[0].Line, logs[len(logs)-1].Line, "line 5", "line 10004")
	}
}

func TestBubblewrapIsolatesTheEnvironment(t *testing.T) {
	p := newProvider(t, IsolationBubblewrap)
	if p.Isolation() != IsolationBubblewrap {
		t.Fatalf("Isolation() = %q, want bubblewrap", p.Isolation())
	}
	hostTmp := t.TempDir()
	os.WriteFile(filepath.Join(hostTmp, "visible"), nil, 0o644)
	leak := fmt.Sprintf("/tmp/proctor-sandbox-leak-%d", time.Now().UnixNano())
	tests := []struct {
		name     string
		script   string
		wantCode int
		wantOut  string // "" means: not checked
	}{
		{"writing the host root fails", "touch /proctor-sandbox-test", 1, ""},
		{"writing /etc fails", "touch /etc/proctor-sandbox-test", 1, ""},
		{"writing the host's /var/tmp fails", "touch /var/tmp/proctor-sandbox-test", 1, ""},
		{"writing the work dir works", `echo hi > "$HOME/f" && cat "$HOME/f"`, 0, "hi\n"},
		{"/tmp is a fresh, private tmpfs", "test ! -e " + hostTmp + "/visible && echo x > " + leak, 0, ""},
		{"/proc shows only the sandbox's processes", `ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\n' ' '; echo "me=$$"`, 0, ""},
		{"hostname is its own", "hostname", 0, "sandbox\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, sb := run(t, p, Spec{Command: []string{"sh", "-c", tt.script}})
			if code := exitCode(t, sb); code != tt.wantCode {
				t.Errorf("exit code %d (stderr %q), want %d", code, sb.logs.Tail(3), tt.wantCode)
			}
			if tt.wantOut != "" && out != tt.wantOut {
				t.Errorf("stdout %q, want %q", out, tt.wantOut)
			}
			if strings.HasPrefix(tt.name, "/proc") {
				// bwrap's init is pid 1, sh pid 2, ls/grep/sort a few more.
				pids, me, _ := strings.Cut(strings.TrimSpace(out), "me=")
				for _, f := range strings.Fields(pids) {
					if n, _ := strconv.Atoi(f); n > 10 {
						t.Errorf("/proc lists pid %d: want only the few of a fresh pid namespace (got %q)", n, pids)
					}
				}
				if me != "2" {
					t.Errorf("the environment is pid %s, want 2 (bwrap's init is 1)", me)
				}
			}
		})
	}
	if _, err := os.Stat(leak); err == nil {
		os.Remove(leak)
		t.Errorf("%s written inside the sandbox appeared on the host", leak)
	}
}

// A sandbox never reaches the worker's network, allowed the network or not (its way out is the
// egress proxy its caller serves inside, Spec.Listen): a listener on the host's loopback, where
// the platform's services listen, is out of its reach either way.
func TestTheWorkersNetworkIsNeverReachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	p := newProvider(t, IsolationBubblewrap)
	tests := []struct {
		name     string
		network  bool
		helper   string
		wantCode int
	}{
		{"without network a host listener on 127.0.0.1 is unreachable", false, "connect", 1},
		{"without network binding 127.0.0.1 inside works", false, "listen", 0},
		{"with network the host listener is still unreachable", true, "connect", 1},
		{"with network binding 127.0.0.1 inside works", true, "listen", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, sb := run(t, p, Spec{
				Command: []string{testBinary(t)},
				Env:     map[string]string{helperEnv: tt.helper, "ADDR": l.Addr().String()},
				Network: tt.network,
			})
			if code := exitCode(t, sb); code != tt.wantCode {
				t.Errorf("%s to %s exited %d (stderr %q), want %d", tt.helper, l.Addr(), code, sb.logs.Tail(3), tt.wantCode)
			}
		})
	}
}

func TestStopKillsEveryProcessOfTheSandbox(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			// The grandchild detaches into a session of its own, out of the
			// process group: only the pid namespace still finds it.
			sb := start(t, p, Spec{Command: []string{"sh", "-c", "setsid sleep 300 & sleep 301 & sleep 302"}})
			var pids []int
			for deadline := time.Now().Add(5 * time.Second); len(pids) < 4 && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
				pids = sb.Pids()
			}
			t.Cleanup(func() { killAll(pids) })
			if len(pids) < 4 {
				t.Fatalf("Pids() = %v, want sh and three sleeps at least", pids)
			}
			if pgidOf(sb.cmd.Process.Pid) != sb.cmd.Process.Pid {
				t.Errorf("the sandbox's process %d leads no process group of its own (pgid %d)", sb.cmd.Process.Pid, pgidOf(sb.cmd.Process.Pid))
			}
			if err := sb.Stop(t.Context()); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if left := waitGone(pids, 2*time.Second); len(left) > 0 {
				t.Errorf("after Stop, processes %v of %v still run", left, pids)
			}
		})
	}
}

func TestAnEnvironmentOutlivesTheThreadThatStartedIt(t *testing.T) {
	// Pdeathsig fires when the forking *thread* exits. Start from a goroutine
	// that locks its thread and returns without unlocking, so Go ends that
	// thread: the sandbox must not notice.
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			ch := make(chan *processSandbox, 1)
			go func() {
				runtime.LockOSThread()
				ch <- start(t, p, Spec{Command: []string{"sleep", "300"}})
			}()
			sb := <-ch
			select {
			case <-sb.Done():
				t.Fatalf("the environment died with the thread that started it: %v", sb.Err())
			case <-time.After(500 * time.Millisecond):
			}
		})
	}
}

func TestStop(t *testing.T) {
	t.Run("is idempotent and safe to call concurrently", func(t *testing.T) {
		for _, iso := range bothIsolations {
			t.Run(iso, func(t *testing.T) {
				p := newProvider(t, iso, func(o *ProcessOptions) { o.GPUs, o.GPUType = []string{"0", "1"}, "h100" })
				sb := start(t, p, Spec{Command: []string{"sleep", "300"}, Resources: Resources{GPU: GPURequest{Count: 2}}})
				if p.Running() != 1 || p.FreeGPUs() != 0 {
					t.Fatalf("while running: Running() = %d, FreeGPUs() = %d, want 1 and 0", p.Running(), p.FreeGPUs())
				}
				var wg sync.WaitGroup
				errs := make([]error, 10)
				for i := range errs {
					wg.Go(func() { errs[i] = sb.Stop(t.Context()) })
				}
				wg.Wait()
				for i, err := range errs {
					if err != nil {
						t.Errorf("Stop call %d: %v", i, err)
					}
				}
				if err := sb.Stop(t.Context()); err != nil {
					t.Errorf("Stop after Stop: %v", err)
				}
				select {
				case <-sb.Done():
				default:
					t.Error("Done() not closed after Stop")
				}
				if err := sb.Err(); !errors.Is(err, ErrStopped) || !errors.Is(err, ErrExited) {
					t.Errorf("Err() = %v, want ErrStopped and ErrExited", err)
				}
				if _, err := os.Stat(sb.WorkDir()); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("work dir %s after Stop: %v, want it removed", sb.WorkDir(), err)
				}
				if p.Running() != 0 || p.FreeGPUs() != 2 {
					t.Errorf("after Stop: Running() = %d, FreeGPUs() = %d, want 0 and 2", p.Running(), p.FreeGPUs())
				}
			})
		}
	})

	t.Run("right after Start does not sit out the grace", func(t *testing.T) {
		for _, iso := range bothIsolations {
			t.Run(iso, func(t *testing.T) {
				p := newProvider(t, iso, func(o *ProcessOptions) { o.StopGrace = 5 * time.Second })
				for range 5 {
					sb := start(t, p, Spec{Command: []string{"sleep", "300"}})
					begin := time.Now()
					if err := sb.Stop(t.Context()); err != nil {
						t.Fatal(err)
					}
					if took := time.Since(begin); took > time.Second {
						t.Errorf("Stop at once after Start took %s: the SIGTERM missed the environment", took)
					}
				}
			})
		}
	})

	tests := []struct {
		name    string
		script  string
		grace   time.Duration
		ctxWait time.Duration // 0: no deadline
		min     time.Duration
		max     time.Duration
	}{
		{"an environment with no SIGTERM handler stops at once", "exec sleep 300", 5 * time.Second, 0, 0, time.Second},
		{"an environment that exits on SIGTERM stops at once", "trap 'exit 0' TERM; while :; do sleep 0.05; done", 5 * time.Second, 0, 0, 2 * time.Second},
		{"an environment that ignores SIGTERM is killed after the grace", "trap '' TERM; while :; do sleep 0.05; done", time.Second, 0, time.Second, 3 * time.Second},
		{"a context deadline shortens the grace", "trap '' TERM; while :; do sleep 0.05; done", 5 * time.Second, 300 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second},
	}
	for _, tt := range tests {
		for _, iso := range bothIsolations {
			t.Run(tt.name+"/"+iso, func(t *testing.T) {
				p := newProvider(t, iso, func(o *ProcessOptions) { o.StopGrace = tt.grace })
				sb := start(t, p, Spec{Command: []string{"sh", "-c", tt.script}})
				time.Sleep(200 * time.Millisecond) // let the trap be set
				ctx := t.Context()
				if tt.ctxWait > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctxWait)
					defer cancel()
				}
				begin := time.Now()
				if err := sb.Stop(ctx); err != nil {
					t.Fatalf("Stop: %v", err)
				}
				if took := time.Since(begin); took < tt.min || took > tt.max {
					t.Errorf("Stop took %s, want between %s and %s", took, tt.min, tt.max)
				}
			})
		}
	}
}

func TestErrSaysWhyTheEnvironmentExited(t *testing.T) {
	p := newProvider(t, IsolationNone)
	tests := []struct {
		name       string
		script     string
		wantCode   int
		wantInText string
	}{
		{"a clean exit is still an exit", "exit 0", 0, "exit status 0"},
		{"a failure carries the status and the last stderr lines", "echo 'bad config' >&2; exit 3", 3, "bad config"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sb := start(t, p, Spec{Command: []string{"sh", "-c", tt.script}})
			if sb.Err() != nil {
				select {
				case <-sb.Done():
				default:
					t.Errorf("Err() = %v while running, want nil", sb.Err())
				}
			}
			if code := exitCode(t, sb); code != tt.wantCode {
				t.Errorf("exit code %d, want %d", code, tt.wantCode)
			}
			if err := sb.Err(); errors.Is(err, ErrStopped) || !strings.Contains(err.Error(), tt.wantInText) {
				t.Errorf("Err() = %q, want it to mention %q and not ErrStopped", err, tt.wantInText)
			}
		})
	}
}

func TestCapacity(t *testing.T) {
	t.Run("Start beyond MaxSandboxes fails at once with ErrCapacity and Stop frees the slot", func(t *testing.T) {
		p := newProvider(t, IsolationNone, func(o *ProcessOptions) { o.MaxSandboxes = 2 })
		a := start(t, p, Spec{ID: "a", Command: []string{"sleep", "300"}})
		start(t, p, Spec{ID: "b", Command: []string{"sleep", "300"}})
		begin := time.Now()
		_, err := p.Start(t.Context(), Spec{ID: "c", Command: []string{"sleep", "300"}})
		if !errors.Is(err, ErrCapacity) || time.Since(begin) > 100*time.Millisecond {
			t.Fatalf("third Start: %v after %s, want ErrCapacity at once", err, time.Since(begin))
		}
		if p.Running() != 2 || p.Capacity() != 2 {
			t.Errorf("Running() = %d, Capacity() = %d, want 2 and 2", p.Running(), p.Capacity())
		}
		if err := a.Stop(t.Context()); err != nil {
			t.Fatal(err)
		}
		start(t, p, Spec{ID: "c", Command: []string{"sleep", "300"}})
	})
	t.Run("concurrent Starts never exceed MaxSandboxes", func(t *testing.T) {
		const max, tries = 5, 20
		p := newProvider(t, IsolationNone, func(o *ProcessOptions) { o.MaxSandboxes = max })
		var mu sync.Mutex
		var started []Sandbox
		var wg sync.WaitGroup
		var full int
		for i := range tries {
			wg.Go(func() {
				sb, err := p.Start(t.Context(), Spec{ID: fmt.Sprint("s", i), Command: []string{"sleep", "300"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					started = append(started, sb)
				case errors.Is(err, ErrCapacity):
					full++
				default:
					t.Errorf("Start: %v", err)
				}
			})
		}
		wg.Wait()
		dirs := map[string]bool{}
		for _, sb := range started {
			dirs[sb.WorkDir()] = true
		}
		if len(started) != max || full != tries-max || len(dirs) != max {
			t.Errorf("%d Starts: %d started in %d dirs, %d ErrCapacity; want %d, %d, %d", tries, len(started), len(dirs), full, max, max, tries-max)
		}
	})
}

func TestStartOfWhatCannotRunFailsClearlyAndLeaksNothing(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "script")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"a missing absolute command", Spec{ID: "x", Command: []string{"/nonexistent/bin/env-server"}}, "no such file"},
		{"a command not in PATH", Spec{ID: "x", Command: []string{"no-such-env-server"}}, "executable file not found"},
		{"a directory", Spec{ID: "x", Command: []string{"/usr"}}, "not an executable"},
		{"a file that is not executable", Spec{ID: "x", Command: []string{notExec}}, "not an executable"},
		{"no command", Spec{ID: "x"}, "no command"},
		{"no id", Spec{Command: []string{"true"}}, "id"},
		{"an id with a slash", Spec{ID: "../x", Command: []string{"true"}}, "id"},
		{"a relative read-only bind", Spec{ID: "x", Command: []string{"true"}, ReadOnlyBinds: []string{"data"}}, "not absolute"},
		{"negative memory", Spec{ID: "x", Command: []string{"true"}, Resources: Resources{MemoryMB: -1}}, "negative"},
	}
	for _, iso := range bothIsolations {
		p := newProvider(t, iso, func(o *ProcessOptions) { o.MaxSandboxes = 1 })
		for _, tt := range tests {
			t.Run(iso+"/"+tt.name, func(t *testing.T) {
				sb, err := p.Start(t.Context(), tt.spec)
				if sb != nil || !errors.Is(err, ErrInvalidSpec) || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("Start: %v, want ErrInvalidSpec mentioning %q", err, tt.want)
				}
				if p.Running() != 0 {
					t.Errorf("Running() = %d after a failed Start, want 0", p.Running())
				}
				if entries, _ := os.ReadDir(p.root); len(entries) != 1 || entries[0].Name() != ".lock" {
					t.Errorf("the provider's directory holds %v after a failed Start, want only its lock", entries)
				}
			})
		}
	}
}

func TestCloseStopsEverySandboxAndStartsNoMore(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			var sbs []Sandbox
			for i := range 3 {
				sb, err := p.Start(t.Context(), Spec{ID: fmt.Sprint(i), Command: []string{"sleep", "300"}})
				if err != nil {
					t.Fatal(err)
				}
				sbs = append(sbs, sb)
			}
			if err := p.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			for i, sb := range sbs {
				select {
				case <-sb.Done():
				default:
					t.Errorf("sandbox %d still running after Close", i)
				}
			}
			if p.Running() != 0 {
				t.Errorf("Running() = %d after Close, want 0", p.Running())
			}
			if _, err := p.Start(t.Context(), Spec{ID: "late", Command: []string{"true"}}); !errors.Is(err, ErrClosed) {
				t.Errorf("Start after Close: %v, want ErrClosed", err)
			}
		})
	}
}

func TestMemoryLimit(t *testing.T) {
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			if strings.Contains(p.Limits(), "memory: not limited") {
				t.Skipf("this host allows neither cgroup v2 memory nor rlimits: %s", p.Limits())
			}
			t.Logf("limits: %s", p.Limits())
			tests := []struct {
				name     string
				bytes    int
				wantFail bool
			}{
				{"256 MB in a 64 MB sandbox fails", 300_000_000, true},
				{"10 MB in a 64 MB sandbox works", 10_000_000, false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					// tail holds its whole input when it has no newline.
					_, sb := run(t, p, Spec{
						Command:   []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tail", tt.bytes)},
						Resources: Resources{MemoryMB: 64},
					})
					if failed := exitCode(t, sb) != 0; failed != tt.wantFail {
						t.Errorf("failed = %v (%v), want %v", failed, sb.Err(), tt.wantFail)
					}
				})
			}
		})
	}
}

func TestIsolationChoice(t *testing.T) {
	tests := []struct {
		name      string
		opts      ProcessOptions
		want      string // Isolation(); "" means NewProcess fails
		wantInErr string
	}{
		{"auto without bubblewrap runs unisolated", ProcessOptions{Isolation: IsolationAuto, Bubblewrap: "/nonexistent/bwrap"}, IsolationNone, ""},
		{"required bubblewrap that is missing is an error", ProcessOptions{Isolation: IsolationBubblewrap, Bubblewrap: "/nonexistent/bwrap"}, "", "isolation bubblewrap"},
		{"none is none", ProcessOptions{Isolation: IsolationNone}, IsolationNone, ""},
		{"an unknown isolation is an error", ProcessOptions{Isolation: "docker"}, "", "isolation"},
		{"an unknown limiter is an error", ProcessOptions{Limiter: "ulimit"}, "", "limiter"},
		{"a negative capacity is an error", ProcessOptions{MaxSandboxes: -1}, "", "MaxSandboxes"},
		{"duplicate GPU ids are an error", ProcessOptions{GPUs: []string{"0", "0"}}, "", "duplicate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Root = t.TempDir()
			p, err := NewProcess(tt.opts)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantInErr) {
					t.Errorf("NewProcess: %v, want an error mentioning %q", err, tt.wantInErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewProcess: %v", err)
			}
			defer p.Close(t.Context())
			if p.Isolation() != tt.want {
				t.Errorf("Isolation() = %q, want %q", p.Isolation(), tt.want)
			}
		})
	}
}
