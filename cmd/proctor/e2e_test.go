package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/apitest"
	"github.com/proctorhq/proctor/internal/config"
	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/temporal/devserver"
	"github.com/proctorhq/proctor/workflows/names"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestMain checks every response of the suite against openapi.yaml (see internal/apitest).
func TestMain(m *testing.M) {
	// Started through proctorBinary's link, this binary is the proctor command: the tests that
	// run workers and servers as processes of their own run this one, not a second build.
	if filepath.Base(os.Args[0]) == "proctor" {
		main()
		os.Exit(0)
	}
	// Bundled builds package the running binary, which serves the examples as
	// `proctor example-env NAME`; under test that binary is this one, and it must do the same.
	if len(os.Args) > 1 && os.Args[1] == "example-env" {
		if err := cmdExampleEnv(os.Args[2:], os.Stderr); err != nil {
			os.Exit(exitCode(err))
		}
		os.Exit(0)
	}
	// The scripted models' provider keys, which the tests register models with (--api-key-env):
	// set once here, since tests that run in parallel cannot set the environment.
	for name, value := range map[string]string{"SCRIPTED_KEY": "scripted-key", "SCRIPTED_AGENT_KEY": scriptedProviderKey, "PROBE_PLATFORM_KEY": probePlatformKey} {
		os.Setenv(name, value)
	}
	// dev keeps the last instance's credentials in the user's config dir: here, a throwaway one.
	dir, err := os.MkdirTemp("", "proctor-config-")
	if err != nil {
		panic(err)
	}
	os.Setenv("PROCTOR_CONFIG_DIR", dir)
	storetest.Main(m, testenv.Cleanup, apitest.Install(), removeBuiltBinary, func() error { return os.RemoveAll(dir) })
}

// devReadyWithin bounds a dev start in tests. It is no wait on the platform's throughput: a first
// start seeds the example environments, whose builds compile small programs from the build cache
// the test binary's own build just filled, and a later start reuses them: 1.7 s on a quiet
// machine, seconds more under load. Five minutes only catches a start that hangs.
const devReadyWithin = 5 * time.Minute

type devRun struct {
	info   devInfo
	out    *testenv.Buffer
	errOut *testenv.Buffer // its log
	cancel context.CancelFunc
	done   chan error
}

// startDev runs `proctor dev` in-process on free ports over dataDir and waits until it is ready.
func startDev(t testing.TB, dataDir string, extra ...string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &devRun{out: &testenv.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	ready := make(chan devInfo, 1)
	args := append([]string{"--data-dir", dataDir, "--http-addr", "127.0.0.1:0", "--temporal-address", "127.0.0.1:0", "--temporal-ui-port", "0", "--log-level", "warn"}, extra...)
	stderr := &testenv.Buffer{}
	r.errOut = stderr
	go func() { r.done <- cmdDev(ctx, args, r.out, stderr, ready) }()
	select {
	case r.info = <-ready:
	case err := <-r.done:
		t.Fatalf("proctor dev exited before ready: %v\n%s", err, stderr)
	case <-time.After(devReadyWithin):
		cancel()
		t.Fatalf("proctor dev not ready after %s\n%s", devReadyWithin, stderr)
	}
	// Cleanups run last first: the instance stops, then a failed test shows what it logged.
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("proctor dev's log (its end):\n%s", lastLines(stderr.String(), 80))
		}
	})
	t.Cleanup(func() { r.stop(t) })
	return r
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// stop cancels the instance and returns how long it took to stop.
func (r *devRun) stop(t testing.TB) time.Duration {
	if r.cancel == nil {
		return 0
	}
	start := time.Now()
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("proctor dev exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("proctor dev did not stop within 30s")
	}
	return time.Since(start)
}

func get(t testing.TB, url, key string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), res.Header
}

func TestDevRunsTheWholePlatformAndReusesItsData(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	dev := startDev(t, dataDir)
	info := dev.info
	t.Logf("dev ready in %.2fs", info.StartupSeconds)

	// The key is printed once and kept in a file only the owner can read.
	if !regexp.MustCompile(`API key \(shown once`).MatchString(dev.out.String()) || !strings.Contains(dev.out.String(), info.APIKey) {
		t.Errorf("the first start did not print the key:\n%s", dev.out)
	}
	fi, err := os.Stat(filepath.Join(dataDir, credentialsFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v, mode %v; want 0600", err, fi.Mode())
	}
	// The databases (and their WAL files) and the data directory are the owner's alone.
	for _, f := range []string{"proctor.db", "proctor.db-wal", "temporal/temporal.db", "temporal/temporal.db-wal"} {
		if fi, err := os.Stat(filepath.Join(dataDir, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", f, err, fi.Mode().Perm())
		}
	}
	if fi, err := os.Stat(dataDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the data directory: %v, mode %v; want 0700", err, fi.Mode().Perm())
	}

	// The first start seeds the demo taskset over the example environments.
	if code, body, _ := get(t, info.APIURL+"/v2/tasksets", info.APIKey); code != 200 || !strings.Contains(body, `"name":"demo"`) || !strings.Contains(body, `"total":1,"limit":50,"offset":0`) {
		t.Errorf("tasksets with the key = %d %s, want 200 and the demo taskset", code, body)
	}
	if code, body, _ := get(t, info.APIURL+"/v2/tasksets", ""); code != 401 || !strings.Contains(body, `"code":"unauthorized"`) {
		t.Errorf("tasksets without a key = %d %s, want 401", code, body)
	}
	if code, body, _ := get(t, info.APIURL+"/readyz", ""); code != 200 || !strings.Contains(body, `"temporal":"ok"`) {
		t.Errorf("readyz = %d %s", code, body)
	}
	code, body, _ := get(t, info.APIURL+"/openapi.json", "")
	var doc struct {
		OpenAPI string `json:"openapi"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &doc) != nil || doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi.json = %d, openapi %q", code, doc.OpenAPI)
	}
	if code, body, h := get(t, info.TemporalUIURL, ""); code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/html") || !strings.Contains(body, "<html") {
		t.Errorf("Temporal UI = %d %s %.100s", code, h.Get("Content-Type"), body)
	}
	if code, _, _ := get(t, info.DocsURL+"/", ""); code != 200 {
		t.Errorf("docs = %d", code)
	}

	// A workflow runs on the embedded server through the dev workers, on every queue.
	tc, err := ptemporal.Dial(context.Background(), info.TemporalAddress, "default", slog.New(slog.DiscardHandler), devKeys(t, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	res, err := tc.Ping(ctx, ptemporal.DefaultQueues)
	cancel()
	tc.Close()
	if err != nil || len(res.Answers) != 3 || res.Answers[1].Queue != names.QueueSandboxesCPU || res.Answers[2].Queue != names.QueueBuilds {
		t.Fatalf("ping workflow = %+v, %v", res, err)
	}

	// The embedded server's store runs in WAL mode (a rollback journal halves its throughput).
	tdb, err := sql.Open("sqlite", "file:"+filepath.Join(dataDir, "temporal", "temporal.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	var journal string
	if err := tdb.QueryRow("PRAGMA journal_mode").Scan(&journal); err != nil || journal != "wal" {
		t.Errorf("temporal.db journal_mode = %q, %v; want wal", journal, err)
	}
	tdb.Close()

	testClientCommands(t, dataDir)

	took := dev.stop(t)
	t.Logf("dev stopped in %s", took)
	if took > 15*time.Second {
		t.Errorf("stopping took %s, want a few seconds", took)
	}
	if c, err := net.DialTimeout("tcp", strings.TrimPrefix(info.APIURL, "http://"), time.Second); err == nil {
		c.Close()
		t.Error("the API still accepts connections after stop")
	}

	// A second start reuses the data: same key, no new team, the key not printed again.
	again := startDev(t, dataDir)
	if strings.Contains(again.out.String(), info.APIKey) || again.info.APIKey != info.APIKey {
		t.Errorf("restart printed the key again or lost it:\n%s", again.out)
	}
	if code, _, _ := get(t, again.info.APIURL+"/v2/tasksets", info.APIKey); code != 200 {
		t.Errorf("the first start's key after a restart = %d", code)
	}
	again.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"admin", "team", "list", "--data-dir", dataDir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), "\n"); n != 2 {
		t.Errorf("teams after two starts:\n%s\nwant exactly one", out.String())
	}
}

// testClientCommands drives tasks upload/export and tasksets list against the dev instance,
// finding it through the credentials file under dataDir as a user in that directory would.
func testClientCommands(t *testing.T, dataDir string) {
	ctx := context.Background()
	dir := t.TempDir()
	jsonl := filepath.Join(dir, "smoke.jsonl")
	os.WriteFile(jsonl, []byte(`{"name": "greet", "prompt": "Say hello"}
{"name": "count", "prompt": "Count to three", "external_id": "c-3"}
`), 0o644)
	cli := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(ctx, append(args, "--data-dir", dataDir), &out, &errOut)
		return out.String() + errOut.String(), err
	}
	if out, err := cli("tasks", "upload", jsonl); err != nil || !strings.Contains(out, "uploaded 2 tasks to smoke") || !strings.Contains(out, "2 created") {
		t.Fatalf("tasks upload: %v\n%s", err, out)
	}
	if out, err := cli("tasksets", "list"); err != nil || !regexp.MustCompile(`(?m)^smoke\s+2\s+private\s+yes`).MatchString(out) {
		t.Errorf("tasksets list: %v\n%s", err, out)
	}
	exported := filepath.Join(dir, "smoke.json")
	if out, err := cli("tasks", "export", "smoke", "-o", exported); err != nil {
		t.Fatalf("tasks export: %v\n%s", err, out)
	}
	if out, err := cli("tasks", "upload", exported); err != nil || !strings.Contains(out, "0 created, 0 updated, 2 unchanged") {
		t.Errorf("re-uploading the export: %v\n%s", err, out)
	}
	// An export from another instance: its taskset id is unknown here, its name holds.
	data, _ := os.ReadFile(exported)
	elsewhere := filepath.Join(dir, "elsewhere.json")
	os.WriteFile(elsewhere, regexp.MustCompile(`"taskset_id":\s*"[0-9a-f-]{36}"`).ReplaceAll(data, []byte(`"taskset_id": "0b5e3d3c-8d6e-4a43-9a55-0c6d2a1f9e11"`)), 0o644)
	if out, err := cli("tasks", "upload", elsewhere); err != nil || !strings.Contains(out, "is not on this server: uploading into the taskset named smoke") ||
		!strings.Contains(out, "0 created, 0 updated, 2 unchanged") {
		t.Errorf("uploading another instance's export: %v\n%s", err, out)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`[{"name": "x", "env": "nowhere", "scenario": "s"}]`), 0o644)
	if out, err := cli("tasks", "upload", bad); err == nil || !strings.Contains(err.Error(), "body.tasks[0].env") {
		t.Errorf("an invalid upload: %v\n%s; want the failing field named", err, out)
	}
	if _, err := cli("tasks", "export", "missing"); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("exporting a missing taskset: %v", err)
	}
}

// eachStore runs f as a subtest per store: dev's embedded SQLite, and a fresh Postgres database.
// The test and both subtests run in parallel with the suite's other parallel tests: each starts
// a platform of its own, which mostly waits (on sandboxes, timers, a killed process's timeouts),
// so running them together is what keeps the suite's wall time near its CPU time.
func eachStore(t *testing.T, f func(t *testing.T, storeArgs []string, dbURL string)) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		f(t, nil, "")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		url := storetest.PostgresURL(t)
		f(t, []string{"--database-url", url}, url)
	})
}

// oneStore runs f as eachStore does, on the one store named ("sqlite" or "postgres"): for the
// suites whose flow through the platform does not turn on the dialect. Their queries are the
// store suites' (models/..., storetest.Each runs every one on both), and what does turn on it
// (attempts ending at once, a killed worker, spend accounting, the finished stream, secrets at
// rest) is in the suites that run on both. The suites that use it alternate between the two.
func oneStore(t *testing.T, store string, f func(t *testing.T, storeArgs []string, dbURL string)) {
	t.Parallel()
	t.Run(store, func(t *testing.T) {
		if store == "sqlite" {
			f(t, nil, "")
			return
		}
		url := storetest.PostgresURL(t)
		f(t, []string{"--database-url", url}, url)
	})
}

// devKeys is the secrets key a dev instance in dataDir generated: a Temporal client needs it to
// read what the instance's workers wrote (payloads are encrypted).
func devKeys(t testing.TB, dataDir string) ptemporal.Sealer {
	t.Helper()
	k, err := secrets.Load(filepath.Join(dataDir, "secrets-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// outputField is the value printed after name at the start of a line of a command's output
// (`proctor admin` prints "team <id>", "key <key>", …).
func outputField(t testing.TB, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no %s in:\n%s", name, out)
	}
	return m[1]
}

func freeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestProductionProcessesOnPostgres runs migrate, admin, server and worker as separate commands
// against Postgres and a Temporal server, as a deployment would.
func TestProductionProcessesOnPostgres(t *testing.T) {
	t.Parallel()
	dbURL := storetest.PostgresURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	field := func(out, name string) string { return outputField(t, out, name) }

	if err := run(ctx, []string{"server"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "PROCTOR_DATABASE_URL") {
		t.Errorf("server without a database: %v, want a missing-configuration error", err)
	}
	// A worker refuses an unmigrated database, before it dials anything.
	if err := run(ctx, []string{"worker", "--database-url", dbURL, "--temporal-address", "127.0.0.1:1", "--log-level", "error"}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "refusing to start the worker") || !strings.Contains(err.Error(), "proctor migrate") {
		t.Errorf("a worker on an unmigrated database: %v", err)
	}
	if out := mustRun(t, "migrate", "--database-url", dbURL); !strings.Contains(out, "applied") {
		t.Errorf("first migrate: %s", out)
	}
	if out := mustRun(t, "migrate", "--database-url", dbURL); !strings.Contains(out, "up to date") {
		t.Errorf("second migrate: %s", out)
	}
	team := field(mustRun(t, "admin", "team", "create", "--name", "research", "--database-url", dbURL), "team")
	membership := field(mustRun(t, "admin", "member", "add", "--team", team, "--email", "ops@example.com", "--role", "owner", "--database-url", dbURL), "membership")
	key := field(mustRun(t, "admin", "key", "create", "--membership", membership, "--name", "ci", "--database-url", dbURL), "key")
	project := field(mustRun(t, "admin", "project", "create", "--team", team, "--name", "vision", "--database-url", dbURL), "project")
	if out := mustRun(t, "admin", "project", "list", "--team", team, "--database-url", dbURL); !strings.Contains(out, project) {
		t.Errorf("project list:\n%s", out)
	}
	if out := mustRun(t, "admin", "key", "list", "--team", team, "--database-url", dbURL); !strings.Contains(out, key[:11]) || strings.Contains(out, key) {
		t.Errorf("key list must show the prefix and never the key:\n%s", out)
	}
	mustRun(t, "admin", "session", "create", "--membership", membership, "--database-url", dbURL)
	if out := mustRun(t, "admin", "session", "revoke", "--team", team, "--database-url", dbURL); !strings.Contains(out, "1 sessions") {
		t.Errorf("session revoke --team:\n%s", out)
	}

	ts := startTemporal(t)

	// The namespace a deployment runs in is made by `proctor admin temporal setup`, once.
	if out := mustRun(t, "admin", "temporal", "setup", "--temporal-address", ts.FrontendAddress(), "--temporal-namespace", "research-ns", "--retention", "72h"); !strings.Contains(out, "created namespace research-ns") || !strings.Contains(out, "72h0m0s") {
		t.Errorf("temporal setup: %s", out)
	}
	if out := mustRun(t, "admin", "temporal", "setup", "--temporal-address", ts.FrontendAddress(), "--temporal-namespace", "research-ns"); !strings.Contains(out, "namespace research-ns exists") || !strings.Contains(out, "72h0m0s") {
		t.Errorf("temporal setup again: %s", out)
	}
	if err := run(ctx, []string{"admin", "temporal", "setup", "--temporal-address", ts.FrontendAddress(), "--retention", "1h"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "at least 24h") {
		t.Errorf("a retention under a day: %v", err)
	}

	httpAddr := freeAddr(t)
	blobDir, buildDir := t.TempDir(), t.TempDir()
	otlp := startOTLPReceiver(t)
	common := []string{"--database-url", dbURL, "--temporal-address", ts.FrontendAddress(), "--temporal-namespace", "research-ns", "--log-level", "warn",
		"--blob-url", "file://" + blobDir, "--signing-key", "k", "--build-dir", buildDir, "--otlp-endpoint", "http://" + otlp.addr}
	serverDone, workerDone := make(chan error, 1), make(chan error, 1)
	go func() {
		serverDone <- run(ctx, append([]string{"server", "--http-addr", httpAddr, "--metrics-token", "scrape-token"}, common...), io.Discard, io.Discard)
	}()
	metricsAddr := freeAddr(t)
	go func() {
		workerDone <- run(ctx, append([]string{"worker", "--metrics-addr", metricsAddr}, common...), io.Discard, io.Discard)
	}()

	base := "http://" + httpAddr
	waitReady(t, base, map[string]chan error{"server": serverDone, "worker": workerDone})
	if code, body, _ := get(t, base+"/v2/tasksets", key); code != 200 || !strings.Contains(body, `"total":0`) {
		t.Errorf("tasksets on postgres = %d %s", code, body)
	}
	tc, err := ptemporal.Dial(ctx, ts.FrontendAddress(), "research-ns", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	pctx, pcancel := context.WithTimeout(ctx, time.Minute)
	res, err := tc.Ping(pctx, ptemporal.DefaultQueues)
	pcancel()
	if err != nil || len(res.Answers) != len(ptemporal.DefaultQueues) {
		t.Fatalf("the worker process did not answer: %+v, %v", res, err)
	}

	// The rollout engine on Postgres: the demo over the example environments, by the oracle,
	// three attempts per task, every one at reward 1.0.
	seedOnPostgres(t, dbURL, membership, blobDir, base, tc)
	// The launch continues the caller's trace: the spans from its request to the last activity
	// of every attempt share this trace id (checked below, once the processes have exported).
	const launchTrace, launchParent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	c := api{t: t, base: base, key: key}
	var launched struct {
		JobID string `json:"job_id"`
	}
	body := map[string]any{"taskset_id": c.tasksetID("demo"), "model_ids": []string{c.resolve("/v2/models/resolve?model=oracle", "id")}, "group_size": 3, "max_concurrent": 3}
	c.header = http.Header{"Traceparent": {"00-" + launchTrace + "-" + launchParent + "-01"}}
	if code := c.call("POST", "/v2/rollouts/run_list", body, &launched); code != 201 {
		t.Fatalf("run_list on postgres = %d", code)
	}
	c.header = nil
	sum := c.waitJob(launched.JobID, nil)
	if sum.Completed != 9 || sum.AvgReward == nil || *sum.AvgReward != 1 {
		t.Errorf("the demo on postgres = %+v, want 9 completed at 1.0", sum)
	}
	if st := c.jobStatus(launched.JobID); st != "completed" {
		t.Errorf("job status on postgres = %s", st)
	}
	if p := imageProcesses(buildDir); p != "" {
		t.Errorf("environment processes left: %s", p)
	}
	// Prometheus metrics: the server's requests by route and status, the worker's sandboxes and
	// attempt outcomes.
	// The API listener serves them only with the metrics token: they name every team's models.
	if code, body, _ := get(t, base+"/metrics", ""); code != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics without the metrics token = %d %.200s", code, body)
	}
	_, serverMetrics, _ := get(t, base+"/metrics", "scrape-token")
	_, workerMetrics, _ := get(t, "http://"+metricsAddr+"/metrics", "")
	// A sandbox per try: an attempt a loaded machine retried (its host taken for lost) started two.
	tries := 0
	for _, tr := range c.traces(launched.JobID) {
		var one struct{ Attempt int }
		c.call("GET", "/v2/trace/"+tr.ID, nil, &one)
		tries += one.Attempt
	}
	for _, want := range []struct{ body, line string }{
		{serverMetrics, `proctor_http_requests_total{method="POST",route="/v2/rollouts/run_list",status="201"} 1`},
		{serverMetrics, `proctor_http_request_duration_seconds_count{method="GET",route="/v2/jobs/{job_id}/summary"}`},
		{serverMetrics, `go_goroutines `},
		{workerMetrics, fmt.Sprintf(`proctor_sandboxes_started_total{provider="process",queue="sandboxes-cpu"} %d`, tries)},
		{workerMetrics, `proctor_attempts_ended_total{status="completed"} 9`},
		{workerMetrics, `proctor_sandboxes_live{provider="process"} 0`},
		// The Temporal SDK's own, from each process's client.
		{serverMetrics, `temporal_request{`},
		{workerMetrics, `temporal_activity_execution_latency_seconds_count{activity_type="ToolStep"`},
	} {
		if !strings.Contains(want.body, want.line) {
			t.Errorf("metrics lack %s", want.line)
		}
	}

	// The health checks the compose file and the chart use: the server's readiness and the
	// worker's liveness on its metrics listener.
	for _, url := range []string{base + "/readyz", "http://" + metricsAddr + "/healthz"} {
		if out := mustRun(t, "healthcheck", url); !strings.Contains(out, "200 OK") {
			t.Errorf("healthcheck %s: %s", url, out)
		}
	}
	if err := run(ctx, []string{"healthcheck", base + "/v2/nowhere"}, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("healthcheck of a 404: %v", err)
	}
	cancel()
	for name, ch := range map[string]chan error{"server": serverDone, "worker": workerDone} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s exited with %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("%s did not stop within 20s", name)
		}
	}
	checkLaunchTrace(t, otlp.trace(launchTrace), launchParent, 9)
	for _, sp := range otlp.all() {
		if sp.attrs["url.path"] == "/readyz" || sp.attrs["url.path"] == "/metrics" {
			t.Errorf("a probe or scrape was traced: %s", sp.name)
		}
	}
}

// checkLaunchTrace checks one job launch's trace, as both processes exported it on their way
// out: the API server's span for the request, under the caller's; the workflow start it made;
// the worker's run list, every attempt's rollout and each of their activities, and the run
// list's last (the job's status); and no span whose parent is missing.
func checkLaunchTrace(t *testing.T, spans []receivedSpan, callerSpan string, attempts int) {
	t.Helper()
	ids := map[string]bool{callerSpan: true}
	count := map[string]int{}
	byName := map[string]receivedSpan{}
	for _, s := range spans {
		ids[s.spanID] = true
		count[s.role+" "+s.name]++
		byName[s.name] = s
	}
	t.Logf("the launch's trace: %d spans: %v", len(spans), count)
	for _, s := range spans {
		if !ids[s.parentID] {
			t.Errorf("span %s (%s) has a parent %s outside the trace", s.name, s.role, s.parentID)
		}
	}
	// The request and its workflow start happen once. The worker's spans happen at least once
	// each: a workflow task the SDK runs again (one timed out on a busy machine) spans again. The
	// RunList hears of each Rollout's end from its completion: no signal is sent (the run does
	// not continue as new), from a workflow or an activity.
	for name, want := range map[string]int{"server POST /v2/rollouts/run_list": 1, "server StartWorkflow:RunList": 1,
		"worker SignalExternalWorkflow:rollout-done": 0, "worker HandleSignal:rollout-done": 0} {
		if count[name] != want {
			t.Errorf("%d spans %q, want %d", count[name], name, want)
		}
	}
	for name, least := range map[string]int{
		"worker RunWorkflow:RunList": 1, "worker StartChildWorkflow:Rollout": attempts, "worker RunWorkflow:Rollout": attempts,
		"worker RunActivity:PrepareRollout": attempts, "worker RunActivity:StartEnvironment": attempts, "worker RunActivity:Evaluate": attempts,
		"worker RunActivity:ModelStep": attempts, "worker RunActivity:ToolStep": attempts, "worker RunActivity:SetJobStatus": 1,
	} {
		if count[name] < least {
			t.Errorf("%d spans %q, want at least %d", count[name], name, least)
		}
	}
	httpSpan := byName["POST /v2/rollouts/run_list"]
	if httpSpan.parentID != callerSpan || httpSpan.kind != tracepb.Span_SPAN_KIND_SERVER ||
		httpSpan.attrs["http.route"] != "/v2/rollouts/run_list" || httpSpan.attrs["http.response.status_code"] != "201" {
		t.Errorf("the request's span: %+v", httpSpan)
	}
	if start := byName["StartWorkflow:RunList"]; start.parentID != httpSpan.spanID {
		t.Errorf("the workflow start's parent is %s, want the request's span %s", start.parentID, httpSpan.spanID)
	}
}

// startTemporal starts a Temporal server for the test, stopped after it (and after the
// processes the test started).
func startTemporal(t testing.TB) *devserver.Server {
	t.Helper()
	ts, err := devserver.Start(devserver.Options{DataDir: t.TempDir(), FrontendPort: -1, DisableUI: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ts.Stop)
	return ts
}

// waitReady waits up to a minute for the API server at base to answer /readyz with 200,
// failing at once if one of the in-process commands in exited ends first.
func waitReady(t testing.TB, base string, exited map[string]chan error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if code, _, _ := getQuiet(base + "/readyz"); code == 200 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the API server was not ready within a minute")
		}
		for name, ch := range exited {
			select {
			case err := <-ch:
				t.Fatalf("the %s stopped before the API server was ready: %v", name, err)
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// mustRun runs a proctor command to its end and returns what it printed.
func mustRun(t testing.TB, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := run(t.Context(), args, &out, &errOut); err != nil {
		t.Fatalf("proctor %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// seedOnPostgres gives a production deployment's team (membership's) the models and the
// example environments, deployed as dev deploys them: through a worker's builds queue.
func seedOnPostgres(t testing.TB, dbURL, membership, blobDir, base string, tc *ptemporal.Client) {
	t.Helper()
	ctx := t.Context()
	store, err := models.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	mid, _ := strconv.ParseInt(membership, 10, 64)
	m, err := store.GetMembership(ctx, mid)
	if err != nil {
		t.Fatal(err)
	}
	caller := &models.Caller{TeamID: m.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: m.Role}
	if err := seedModels(ctx, store); err != nil {
		t.Fatal(err)
	}
	bucket, _, err := openBucket(ctx, &config.Config{BlobURL: "file://" + blobDir, SigningKey: "k", PublicURL: base})
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	if done, err := seedExamples(ctx, store, bucket, tc, caller, true, slog.New(slog.DiscardHandler)); err != nil || !done {
		t.Fatal(done, err)
	}
}

func getQuiet(url string) (int, string, error) {
	res, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

func TestOpenAPICommandPrintsTheDocument(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"openapi"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	want, err := httpapi.Spec()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Error("`proctor openapi` differs from httpapi.Spec()")
	}
}

func TestUnknownCommandsAndHelp(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(context.Background(), []string{"launch"}, &out, &errOut); exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `unknown command "launch" for proctor`) || out.Len()+errOut.Len() != 0 {
		t.Errorf("unknown command: %v\n%s%s", err, out.String(), errOut.String())
	}
	// No command: the overview, on stderr, and status 2.
	if err := run(context.Background(), nil, &out, &errOut); exitCode(err) != 2 || !strings.Contains(errOut.String(), "Use it (client commands):") || out.Len() != 0 {
		t.Errorf("no command: %v\n%s", err, errOut.String())
	}
	out.Reset()
	err := run(context.Background(), []string{"server", "--help"}, &out, io.Discard)
	if err != nil || !strings.Contains(out.String(), "PROCTOR_DATABASE_URL") || !strings.Contains(out.String(), "PROCTOR_TEMPORAL_ADDRESS") {
		t.Errorf("server --help must document the environment variables: %v\n%s", err, out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"eval", "--help"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "proctor eval TASKSET --model MODEL") || !strings.Contains(out.String(), "--max-concurrent") {
		t.Errorf("eval --help: %v\n%s", err, out.String())
	}
	if err := run(context.Background(), []string{"admin", "team", "frobnicate", "--data-dir", t.TempDir()}, io.Discard, io.Discard); exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), `unknown command "frobnicate" for proctor admin team`) {
		t.Errorf("an unknown admin command: %v", err)
	}
	if err := run(context.Background(), []string{"jobs", "show"}, io.Discard, io.Discard); exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "usage: proctor jobs show JOB") {
		t.Errorf("jobs show without a job: %v", err)
	}
	// An admin action's help lists the flags it reads, not the server's.
	for _, tc := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"admin", "model", "add", "--help"}, []string{"--base-url", "--api-key-env", "--database-url"}, []string{"--sandbox-root", "--http-addr", "--email"}},
		{[]string{"admin", "team", "create", "--help"}, []string{"--name", "--database-url"}, []string{"--adapter", "--max-sandboxes"}},
		{[]string{"admin", "temporal", "setup", "--help"}, []string{"--retention", "--temporal-address"}, []string{"--database-url"}},
	} {
		out.Reset()
		err := run(context.Background(), tc.args, &out, io.Discard)
		for _, w := range tc.want {
			if err != nil || !strings.Contains(out.String(), w) {
				t.Errorf("proctor %v: %v; want %s in:\n%s", tc.args, err, w, out.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("proctor %v lists %s, which it does not read", tc.args, n)
			}
		}
	}
	// A mistyped id is explained before any request, not answered with the server's validation.
	for _, args := range [][]string{{"trace", "123"}, {"jobs", "cancel", "latest"}, {"env", "set-latest", "v2"}} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("%q is not a", args[len(args)-1])) || !strings.Contains(fmt.Sprint(err), "ids are UUIDs") {
			t.Errorf("proctor %v: %v, want a usage error saying what an id is", args, err)
		}
	}
	// Shell completion comes with the command tree.
	out.Reset()
	if err := run(context.Background(), []string{"completion", "bash"}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "__start_proctor") {
		t.Errorf("completion bash: %v (%d bytes)", err, out.Len())
	}
	out.Reset()
	if err := run(context.Background(), []string{"__complete", "jobs", ""}, &out, io.Discard); err != nil || !strings.Contains(out.String(), "show") || !strings.Contains(out.String(), "watch") {
		t.Errorf("completing jobs: %v\n%s", err, out.String())
	}
}

// A frontend port another process holds makes the embedded server's construction fail (the
// server's own code panics on the listener it could not open): Start answers an error instead
// of taking the whole process down, and a port it picked itself is picked again.
func TestEmbeddedTemporalOnATakenPortIsAnError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	ts, err := devserver.Start(devserver.Options{DataDir: t.TempDir(), FrontendPort: port, DisableUI: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		ts.Stop()
		t.Fatalf("started on port %d, which another listener holds", port)
	}
	if !strings.Contains(err.Error(), "devserver") {
		t.Errorf("error = %v", err)
	}
}
