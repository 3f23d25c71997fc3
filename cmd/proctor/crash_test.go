package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/internal/forkthread"
	"github.com/proctorhq/proctor/internal/testenv"
)

// TestKilledWorkerLosesNoAttempt runs the sandbox queue in a separate worker process, kill -9s it
// while attempts are mid-way, and starts another: every attempt finishes, the trajectory holds
// each step once (the failed try's events are kept, superseded), and no environment process
// outlives the killed worker.
func TestKilledWorkerLosesNoAttempt(t *testing.T) {
	bin := proctorBinary(t)
	eachStore(t, func(t *testing.T, storeArgs []string, dbURL string) {
		testStoppedWorker(t, bin, storeArgs, dbURL, syscall.SIGKILL)
	})
}

// TestDrainedWorkerLosesNoAttempt stops the sandbox worker with SIGTERM while attempts are
// mid-way: it lets its running steps finish, says which attempts lose their sandbox (one line
// each, no errors), stops them all, and exits within its shutdown timeout; another worker then
// finishes every attempt.
func TestDrainedWorkerLosesNoAttempt(t *testing.T) {
	t.Parallel()
	bin := proctorBinary(t)
	testStoppedWorker(t, bin, nil, "", syscall.SIGTERM)
}

func testStoppedWorker(t *testing.T, bin string, storeArgs []string, dbURL string, sig syscall.Signal) {
	dataDir := t.TempDir()
	if dbURL == "" {
		dbURL = "sqlite:" + filepath.Join(dataDir, "proctor.db")
	}
	ctx := t.Context()
	// The dev process runs the API, Temporal, the workflow worker and builds; sandboxes run elsewhere.
	info := startSplitDev(t, dataDir, storeArgs)
	worker := func(name string, stderr io.Writer) *exec.Cmd {
		return sandboxWorker(t, bin, dataDir, dbURL, info, name, stderr)
	}
	var firstLog testenv.Buffer
	first := worker("first", &firstLog)

	c := api{t: t, base: info.APIURL, key: info.APIKey, temporal: info.TemporalAddress}
	srv, _ := scriptedOpenAI(t, twoTodoCalls, 700*time.Millisecond)
	if err := run(ctx, []string{"admin", "model", "add", "--name", "slow", "--adapter", "openai", "--base-url", srv.URL + "/v1/",
		"--api-key-env", "SCRIPTED_KEY", "--database-url", dbURL}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var launched struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{c.addTwoTodosTask("crash")},
		"model_ids": []string{c.resolve("/v2/models/resolve?model=slow", "id")}, "group_size": 4, "max_concurrent": 4}, &launched)

	// Wait until attempts are mid-way, then stop the worker: outright (SIGKILL), or as an
	// orchestrator does (SIGTERM).
	testenv.Wait(t, "two attempts running", testenv.StallWindow, func() (bool, string) {
		var s summary
		c.call("GET", "/v2/jobs/"+launched.JobID+"/summary", nil, &s)
		return s.Running >= 2, s.String()
	}, func() string { return c.describeLive(launched.JobID) })
	time.Sleep(500 * time.Millisecond)
	stopAt := time.Now()
	if err := first.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if sig == syscall.SIGTERM {
		took := time.Since(stopAt)
		log := firstLog.String()
		abandoned := strings.Count(log, "abandoning an attempt")
		t.Logf("the drained worker stopped in %s, abandoning %d attempts", took.Round(time.Millisecond), abandoned)
		if took > 10*time.Second || strings.Contains(log, "level=ERROR") || abandoned == 0 || !first.ProcessState.Success() {
			t.Errorf("a drained worker: exit %v after %s, %d attempts abandoned; its log:\n%s", first.ProcessState, took, abandoned, log)
		}
		if left, _ := os.ReadDir(filepath.Join(dataDir, "sandboxes-first")); len(left) != 0 {
			t.Errorf("the drained worker left %d sandbox work dirs", len(left))
		}
	}
	// The kernel ends a killed worker's sandboxes (they die with their parent): no platform
	// step is waited on here, only the processes' exit.
	gone := time.Now().Add(10 * time.Second)
	for envProcesses(dataDir) != "" && time.Now().Before(gone) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Fatalf("environment processes outlived the killed worker:\n%s", p)
	}

	// The next worker shares the root: it sweeps what a killed one left there.
	second := worker("first", os.Stderr)
	defer func() { second.Process.Signal(syscall.SIGTERM); second.Wait() }()
	sum := c.waitJob(launched.JobID, nil)
	if sig == syscall.SIGTERM {
		t.Logf("every attempt done %s after the stop", time.Since(stopAt).Round(time.Millisecond))
	}
	if owners, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes-first", "owner-*")); len(owners) != 1 {
		t.Errorf("the sandbox root holds %v; want only the running worker's directory", owners)
	}
	if sum.Completed != 4 || sum.AvgReward == nil || *sum.AvgReward != 1 {
		t.Fatalf("after the crash: %+v, want 4 completed at 1.0", sum)
	}
	retried := 0
	for _, tr := range c.traces(launched.JobID) {
		var ev struct {
			Events []struct {
				Seq     int
				Kind    string
				Attempt int
				Data    map[string]any
			}
		}
		c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &ev)
		var all struct {
			Events []struct {
				Attempt    int
				Superseded bool
			}
		}
		c.call("GET", "/v2/trace/"+tr.ID+"/events?include_superseded=true", nil, &all)
		calls := map[string]int{}
		attempts := map[int]bool{}
		for _, e := range ev.Events {
			attempts[e.Attempt] = true
			if e.Kind == "tool_call" {
				calls[e.Data["call_id"].(string)]++
			}
		}
		if len(attempts) != 1 || len(calls) != 2 {
			t.Errorf("trace %s: live events span tries %v with calls %v; want one try with two calls", tr.ID, attempts, calls)
		}
		for id, n := range calls {
			if n != 1 {
				t.Errorf("trace %s: call %s recorded %d times", tr.ID, id, n)
			}
		}
		if len(all.Events) > len(ev.Events) {
			retried++
			// Told by the drained worker, the attempt started again at once: its try ended for
			// the worker's signal, not after the 20 s a lost host is waited for.
			var logs struct{ Logs string }
			c.call("GET", "/v2/trace/"+tr.ID+"/logs", nil, &logs)
			if sig == syscall.SIGTERM && !strings.Contains(logs.Logs, "stopped with the sandbox): retrying in a fresh sandbox") {
				t.Errorf("trace %s: its try did not end for the drained worker's signal:\n%s", tr.ID, logs.Logs)
			}
			for _, e := range all.Events {
				if e.Attempt == 1 && !e.Superseded {
					t.Errorf("trace %s: an event of the failed try is not marked superseded", tr.ID)
				}
			}
			// proctor trace says so, and shows them when asked.
			var out, withAll bytes.Buffer
			run(t.Context(), []string{"trace", tr.ID, "--api-url", c.base, "--api-key", c.key}, &out, io.Discard)
			run(t.Context(), []string{"trace", tr.ID, "--all-tries", "--api-url", c.base, "--api-key", c.key}, &withAll, io.Discard)
			if !strings.Contains(out.String(), "their events are superseded; see them with: proctor trace "+tr.ID+" --all-tries") ||
				strings.Contains(out.String(), "superseded]") || !strings.Contains(withAll.String(), "[try 1, superseded]") {
				t.Errorf("proctor trace of a retried attempt:\n%s\nwith --all-tries:\n%s", out.String(), withAll.String())
			}
		}
	}
	if retried == 0 {
		t.Error("no attempt was retried: the worker died before any attempt started?")
	}
	t.Logf("%d of 4 attempts retried in a fresh sandbox", retried)
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("environment processes left: %s", p)
	}
}

// TestKilledBuildWorkerLosesNoBuild kills the only build worker (kill -9) in the middle of a
// build: once another build worker joins, the build is redone from its uploaded source and
// succeeds; it is never left running.
func TestKilledBuildWorkerLosesNoBuild(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a binary and waits out a heartbeat timeout")
	}
	bin := proctorBinary(t)
	dataDir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready, done := make(chan devInfo, 1), make(chan error, 1)
	// dev runs no build worker: builds run in the worker processes below.
	go func() {
		done <- cmdDev(ctx, []string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--temporal-address", "127.0.0.1:0",
			"--temporal-ui-port", "0", "--log-level", "warn", "--queues", "proctor-workflows,sandboxes-cpu"}, io.Discard, io.Discard, ready)
	}()
	var info devInfo
	select {
	case info = <-ready:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(devReadyWithin):
		t.Fatal("dev not ready")
	}
	defer func() { cancel(); <-done }()
	worker := func() *exec.Cmd {
		cmd := exec.Command(bin, "worker", "--database-url", "sqlite:"+filepath.Join(dataDir, "proctor.db"),
			"--temporal-address", info.TemporalAddress, "--queues", "builds", "--build-goproxy", "off",
			"--blob-url", "file://"+filepath.Join(dataDir, "blobs"), "--signing-key", "unused", "--build-dir", filepath.Join(dataDir, "builds"),
			"--sandbox-root", filepath.Join(dataDir, "sandboxes-builds"), "--secrets-key-file", filepath.Join(dataDir, "secrets-key.json"), "--log-level", "warn")
		startWorker(t, cmd, os.Stderr)
		return cmd
	}
	first := worker()
	c := api{t: t, base: info.APIURL, key: info.APIKey, temporal: info.TemporalAddress}

	// A source whose compile takes seconds (never cached: it names a fresh constant).
	env := outOfTreeEnvironment(t)
	var big strings.Builder
	fmt.Fprintf(&big, "package main\n\nconst slowBuild = %q\n\n", uuid.NewString())
	const n = 30000
	for i := range n {
		fmt.Fprintf(&big, "func f%d(x int) int { y := x*%d + 1; for j := 0; j < %d; j++ { y = y*31 + j ^ %d }; return y }\n", i, i, i%7+1, i)
	}
	big.WriteString("var table = []func(int) int{")
	for i := range n {
		fmt.Fprintf(&big, "f%d,", i)
	}
	big.WriteString("}\n")
	if err := os.WriteFile(filepath.Join(env, "big.go"), []byte(big.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	id := c.deploy(tarGz(t, env), map[string]any{"name": "slow"})["id"].(string)
	testenv.Wait(t, "build "+id+" to start", buildStall, func() (bool, string) {
		var b map[string]any
		c.call("GET", "/v2/builds/"+id+"/status", nil, &b)
		return b["status"] == "running", fmt.Sprint(b["status"])
	}, nil)
	time.Sleep(time.Second) // mid-compile
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killed := time.Now()
	second := worker()
	defer func() { second.Process.Signal(syscall.SIGTERM); second.Wait() }()
	b := c.waitBuild(id)
	t.Logf("the build ended %v %.1fs after its worker was killed", b["status"], time.Since(killed).Seconds())
	if b["status"] != "succeeded" {
		t.Errorf("a build whose worker was killed = %v, want succeeded", b)
	}
}

// startSplitDev starts dev in dataDir with the workflow and build queues only: the sandboxes run
// in worker processes of their own (sandboxWorker), which a test can kill. dev stops at the end
// of the test.
func startSplitDev(t *testing.T, dataDir string, storeArgs []string) devInfo {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan devInfo, 1), make(chan error, 1)
	go func() {
		done <- cmdDev(ctx, append([]string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--temporal-address", "127.0.0.1:0",
			"--temporal-ui-port", "0", "--log-level", "warn", "--queues", "proctor-workflows,builds"}, storeArgs...), io.Discard, io.Discard, ready)
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case info := <-ready:
		return info
	case err := <-done:
		t.Fatal(err)
	case <-time.After(devReadyWithin):
		t.Fatal("dev not ready")
	}
	return devInfo{}
}

// sandboxWorker starts a worker process of the sandbox queue for a dev started by startSplitDev,
// with a sandbox root of its own name.
func sandboxWorker(t *testing.T, bin, dataDir, dbURL string, info devInfo, name string, stderr io.Writer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "worker", "--database-url", dbURL, "--shutdown-timeout", "5s",
		"--temporal-address", info.TemporalAddress, "--queues", "sandboxes-cpu", "--sandbox-root", filepath.Join(dataDir, "sandboxes-"+name),
		// The images the attempts run come from dev's bucket; they unpack beside dev's.
		"--blob-url", "file://"+filepath.Join(dataDir, "blobs"), "--signing-key", "unused", "--build-dir", filepath.Join(dataDir, "builds"),
		// The secrets key dev generated: every process reads the others' (encrypted) payloads.
		"--secrets-key-file", filepath.Join(dataDir, "secrets-key.json"), "--log-level", "warn")
	startWorker(t, cmd, stderr)
	return cmd
}

// builtBinary is the proctor command for the tests that run it as processes of their own: a link
// named proctor to this test binary, which TestMain runs as the command when started by that
// name, in a directory TestMain removes.
var builtBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// proctorBinary returns the proctor command, for the tests that run it as processes of their own
// (to kill -9 them). It is this test binary, which holds every package the command does, so no
// second build of the command is linked.
func proctorBinary(t testing.TB) string {
	t.Helper()
	builtBinary.once.Do(func() {
		self, err := os.Executable()
		if err != nil {
			builtBinary.err = err
			return
		}
		if builtBinary.dir, builtBinary.err = os.MkdirTemp("", "proctor-bin-"); builtBinary.err != nil {
			return
		}
		builtBinary.path = filepath.Join(builtBinary.dir, "proctor")
		builtBinary.err = os.Symlink(self, builtBinary.path)
	})
	if builtBinary.err != nil {
		t.Fatal(builtBinary.err)
	}
	return builtBinary.path
}

func removeBuiltBinary() error {
	if builtBinary.dir == "" {
		return nil
	}
	return os.RemoveAll(builtBinary.dir)
}

// startWorker starts a worker process that dies with the test: killed at cleanup, and by the
// kernel if the test binary dies first (a live worker would hold go test's output open).
func startWorker(t testing.TB, cmd *exec.Cmd, stderr io.Writer) {
	t.Helper()
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// From the thread that lives as long as this process: tests run in parallel, and the
	// thread a test's goroutine forks from may be retired while the worker should live on.
	if err := forkthread.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) //nolint:errcheck // it may have been killed already
}
