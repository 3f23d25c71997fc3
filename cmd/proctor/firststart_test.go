package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A dev whose ports are taken says which and how to choose another, instead of failing deep in
// the Temporal server.
func TestDevOnBusyPortsSaysWhich(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	busyAddr := l.Addr().String()
	_, busyPort, _ := net.SplitHostPort(busyAddr)
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"api":         {[]string{"--http-addr", busyAddr}, "the API cannot listen on " + busyAddr + ": the port is in use (another proctor dev?); stop that process, or choose another port with --http-addr"},
		"temporal":    {[]string{"--temporal-address", busyAddr}, "Temporal cannot listen on " + busyAddr + ": the port is in use"},
		"temporal ui": {[]string{"--temporal-address", "127.0.0.1:0", "--temporal-ui-port", busyPort}, "the Temporal UI cannot listen on " + busyAddr + ": the port is in use"},
	} {
		args := append([]string{"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--temporal-address", "127.0.0.1:0", "--temporal-ui-port", "0"}, tc.args...)
		var stderr bytes.Buffer
		err := cmdDev(context.Background(), args, io.Discard, &stderr, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s busy: %v; want %q", name, err, tc.want)
		}
		if strings.Contains(stderr.String(), "panic") || strings.Contains(stderr.String(), "goroutine ") {
			t.Errorf("%s busy: a stack trace:\n%s", name, stderr.String())
		}
	}
}

// dev's embedded Temporal server and its UI ask no credential, so dev keeps them on the loopback
// (which no sandbox reaches) and refuses any other address, saying why and what production does.
func TestDevKeepsItsTemporalOnTheLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", "[::]:0", "192.0.2.1:7233", "temporal.example:7233"} {
		err := cmdDev(context.Background(), []string{"--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0", "--temporal-address", addr}, io.Discard, io.Discard, nil)
		if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "listens on the loopback only") || !strings.Contains(fmt.Sprint(err), "mTLS") {
			t.Errorf("dev with --temporal-address %s: %v (status %d), want refused with status 2, saying why", addr, err, exitCode(err))
		}
	}
}

// A first start that stopped part-way resumes at the next: a team made without its owner gets
// one and a key, a lost key file gets a new key of the same member, and the demo is seeded once.
func TestDevFirstStartResumes(t *testing.T) {
	dataDir := t.TempDir()
	admin := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(t.Context(), append(append([]string{}, args...), "--data-dir", dataDir), &out, &errOut); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, errOut.String())
		}
		return out.String()
	}
	// Interrupted after the team: the database has a team and no member.
	admin("admin", "team", "create", "--name", "default")

	dev := startDev(t, dataDir)
	first := dev.info.APIKey
	c := api{t: t, base: dev.info.APIURL, key: first}
	if first == "" || c.tasksetID("demo") == "" {
		t.Fatalf("the resumed first start: key %q, demo %q", first, c.tasksetID("demo"))
	}
	if teams := regexp.MustCompile(`(?m)^[0-9a-f-]{36}`).FindAllString(admin("admin", "team", "list"), -1); len(teams) != 1 {
		t.Errorf("teams after the resumed bootstrap = %v, want the one the first start made", teams)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "seeded")); err != nil {
		t.Errorf("the seed mark: %v", err)
	}
	dev.stop(t)

	// The key file and the seed mark are lost: the next start makes a new key and seeds again,
	// without a second demo.
	for _, f := range []string{credentialsFile, "seeded"} {
		if err := os.Remove(filepath.Join(dataDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	dev = startDev(t, dataDir, "--log-level", "info")
	if dev.info.APIKey == "" || dev.info.APIKey == first || !strings.Contains(dev.errOut.String(), "the key file was missing") {
		t.Fatalf("after the key file was lost: key %q\n%s", dev.info.APIKey, dev.errOut)
	}
	c.key = dev.info.APIKey
	c.base = dev.info.APIURL
	var page struct{ Total int }
	c.call("GET", "/v2/tasksets?search=demo", nil, &page)
	var tasks struct{ Total int }
	c.call("GET", "/v2/tasksets/"+c.tasksetID("demo")+"/tasks", nil, &tasks)
	if page.Total != 1 || tasks.Total != 3 {
		t.Errorf("demo tasksets %d, demo tasks %d; want 1 and 3", page.Total, tasks.Total)
	}
	// From any directory (no data dir there), client commands find the last instance the user
	// started through the user's config dir.
	if out, err := func() (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), []string{"models", "--data-dir", filepath.Join(t.TempDir(), "elsewhere")}, &out, io.Discard)
		return out.String(), err
	}(); err != nil || !strings.Contains(out, "oracle") {
		t.Errorf("proctor models from another directory: %v\n%s", err, out)
	}
	// Client commands find the new key through the file.
	var out bytes.Buffer
	if err := run(t.Context(), []string{"jobs", "--data-dir", dataDir, "--api-url", c.base}, &out, io.Discard); err != nil {
		t.Errorf("proctor jobs with the recovered key: %v", err)
	}
}

// Where there is neither a checkout nor the Go toolchain (a release binary run anywhere), dev
// deploys the examples by packaging its own binary through the build pipeline, and the demo
// runs to 1.0 on them; the builds keep the examples' source for browsing.
func TestDevWithoutGoToolchainOrCheckout(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	devWithoutToolchain(t, filepath.Base(exe))
}

// With proctor-examples beside the binary (as task build and the release image put it), the
// builds package it instead, and the demo runs the same.
func TestDevWithoutGoToolchainPackagesProctorExamples(t *testing.T) {
	small := testenv.StaticProgram(t, "cmd/proctor-examples")
	dir := t.TempDir()
	program, err := os.ReadFile(small)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, environments.Binary), program, 0o755); err != nil {
		t.Fatal(err)
	}
	executable = func() (string, error) { return filepath.Join(dir, "proctor"), nil }
	t.Cleanup(func() { executable = os.Executable })
	devWithoutToolchain(t, environments.Binary)
}

// devWithoutToolchain starts dev with no Go toolchain on PATH, outside any checkout, and checks
// that the examples were built by packaging the binary named packaged, and that the demo runs
// on them.
func devWithoutToolchain(t *testing.T, packaged string) {
	var keep []string
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err != nil {
			keep = append(keep, dir)
		}
	}
	t.Setenv("PATH", strings.Join(keep, string(os.PathListSeparator)))
	if p, err := exec.LookPath("go"); err == nil {
		t.Fatalf("go is still on PATH at %s", p)
	}
	t.Chdir(t.TempDir())

	start := time.Now()
	dev := startDev(t, t.TempDir(), "--log-level", "info")
	t.Logf("dev ready without a toolchain in %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(dev.errOut.String(), "deploying the bundled example environments") {
		t.Errorf("the log does not say the bundled examples were deployed:\n%s", dev.errOut)
	}
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	for _, name := range exampleEnvs {
		var page struct {
			Items []struct {
				Name          string  `json:"name"`
				LatestBuildID *string `json:"latest_build_id"`
			}
		}
		c.call("GET", "/v2/registry?search="+name, nil, &page)
		var build string
		for _, it := range page.Items {
			if it.Name == name && it.LatestBuildID != nil {
				build = *it.LatestBuildID
			}
		}
		if build == "" {
			t.Fatalf("%s has no build: %+v", name, page.Items)
		}
		var logs struct{ Logs []struct{ Line string } }
		c.call("GET", "/v2/builds/"+build+"/logs", nil, &logs)
		var text strings.Builder
		for _, l := range logs.Logs {
			text.WriteString(l.Line + "\n")
		}
		if !strings.Contains(text.String(), "bundled example "+name+": packaging "+packaged+",") || strings.Contains(text.String(), "go build") {
			t.Errorf("%s's build log does not say it packaged the bundled example:\n%s", name, text.String())
		}
		list := func(dir string) []string {
			var src struct{ Entries []struct{ Path string } }
			c.call("GET", "/v2/builds/"+build+"/source?path="+dir, nil, &src)
			var paths []string
			for _, e := range src.Entries {
				paths = append(paths, e.Path)
			}
			return paths
		}
		root, pkg := list(""), list(name+"env")
		if want := name + "env/" + name + "env.go"; !slices.Contains(root, "main.go") || slices.Contains(root, "main_test.go") || !slices.Contains(pkg, want) {
			t.Errorf("%s's browsable source = %v and %v, want main.go and %s without tests", name, root, pkg, want)
		}
	}

	var out bytes.Buffer
	start = time.Now()
	if err := run(t.Context(), []string{"eval", "demo", "--model", "oracle", "--api-url", c.base, "--api-key", c.key}, &out, io.Discard); err != nil {
		t.Fatalf("eval demo: %v\n%s", err, out.String())
	}
	t.Logf("eval demo on the bundled examples: %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(out.String(), "3 attempts: 3 completed, 0 errors, 0 cancelled · mean reward 1.000") {
		t.Errorf("eval demo on the bundled examples:\n%s", out.String())
	}
	// eval says which build of each environment it runs.
	if !regexp.MustCompile(`(?m)^environment todo: build 1 \(sha256:[0-9a-f]{64}\)$`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "environment game2048: build 1 (") {
		t.Errorf("eval demo does not say which builds it runs:\n%s", out.String())
	}
}

// When the workers run fewer sandboxes at once than a job may, eval says so and why; the
// workers are listed per queue, and a stopped worker takes its rows with it.
func TestEvalSaysWhenWorkersRunFewerSandboxes(t *testing.T) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, "--max-sandboxes", "2")
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	var w struct {
		Queues []struct {
			Queue           string `json:"queue"`
			Workers         int    `json:"workers"`
			SandboxCapacity int    `json:"sandbox_capacity"`
		}
		SandboxCapacity int `json:"sandbox_capacity"`
	}
	c.call("GET", "/v2/workers", nil, &w)
	queues := map[string]int{}
	for _, q := range w.Queues {
		queues[q.Queue] = q.SandboxCapacity
		if q.Workers != 1 {
			t.Errorf("queue %s has %d workers, want this dev's 1", q.Queue, q.Workers)
		}
	}
	if w.SandboxCapacity != 2 || queues["sandboxes-cpu"] != 2 || len(queues) != 3 {
		t.Fatalf("workers = %+v, want the three dev queues and 2 sandboxes on sandboxes-cpu", w)
	}
	cli := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), append(args, "--api-url", c.base, "--api-key", c.key), &out, io.Discard); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	if out := cli("workers"); !regexp.MustCompile(`sandboxes-cpu\s+1\s+2\s+0`).MatchString(out) {
		t.Errorf("proctor workers:\n%s", out)
	}
	out := cli("eval", "demo", "--model", "oracle", "--group-size", "2", "--max-concurrent", "5")
	if !strings.Contains(out, "note: at most 2 attempts run at once, not 5 (--max-concurrent 5): the live workers run 2 sandboxes at once (1 worker)") ||
		!strings.Contains(out, "6 attempts: 6 completed") {
		t.Errorf("eval with more concurrency than sandboxes:\n%s", out)
	}
	if out := cli("eval", "demo", "--model", "oracle", "--max-concurrent", "2"); strings.Contains(out, "note:") {
		t.Errorf("eval within the capacity has a note:\n%s", out)
	}

	dev.stop(t)
	store, err := models.Open(t.Context(), "sqlite:"+filepath.Join(dataDir, "proctor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if left, err := rollouts.Of(store).QueueCapacities(t.Context()); err != nil || len(left) != 0 {
		t.Errorf("after dev stopped, its queues are still listed: %+v, %v", left, err)
	}
}

// Instances that start at once each write the user's config dir: every write replaces the whole
// file (a temporary file of its own, renamed), so none fails and the file is always one of them.
func TestCredentialsWrittenAtOnceEachReplaceTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), credentialsFile)
	const writers = 8
	errs := make(chan error, writers)
	for i := range writers {
		go func() { errs <- replaceFile(path, []byte(fmt.Sprintf("{\"n\": %d}\n", i))) }()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Errorf("a write at the same time as others: %v", err)
		}
	}
	var got struct{ N *int }
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &got) != nil || got.N == nil {
		t.Errorf("the file after %d writes at once: %q, %v", writers, b, err)
	}
	if left, _ := filepath.Glob(path + ".*.tmp"); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode: %v, %v; want 0600", fi.Mode(), err)
	}
}
