package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
	"github.com/proctorhq/proctor/temporal/devserver"
	"github.com/proctorhq/proctor/workflows"
	"github.com/proctorhq/proctor/workflows/names"
)

// restartBound is the longest an attempt whose sandbox host was killed can take to start its
// next try, by the engine's own timeouts, for attempts whose model calls are quick (the oracle's):
//   - a model step that was running on the killed worker is retried elsewhere after
//     workflows.ModelHeartbeatTimeout (10 s) without a heartbeat;
//   - the host's running activity, or the next one sent to its queue, is taken for lost after
//     workflows.HostLostTimeout (20 s) without a heartbeat or a pickup;
//   - a workflow task that was on the killed worker goes to another after the sticky queue's 5 s
//     and the task's 10 s timeout;
//   - the next try's StartEnvironment then has startup_timeout_s (120 s by default) to find a
//     host with a free slot; past it the attempt ends as an error, not stuck.
//
// A slow model call in flight on another worker when the host dies delays the loss's discovery
// by what is left of that call (the next sandbox step finds the host gone).
var restartBound = workflows.ModelHeartbeatTimeout + workflows.HostLostTimeout + 15*time.Second + activities.DefaultStartupTimeoutS*time.Second

// TestManyHosts runs a deployment as separate OS processes on one Postgres and one Temporal: the
// API server, a build worker (which also runs workflows) and three sandbox hosts with their own
// sandbox roots and image directories, the third a GPU host polling a queue of its own. Mid-job
// it kill -9s a host that holds live sandboxes and restarts the API server. Every attempt whose
// sandbox lived on the killed host starts a fresh try within restartBound, and every attempt
// ends completed, once, with its tool call and its evaluation recorded once. It checks
// durability, not speed: it waits on progress (testenv.StallWindow), and BenchmarkManyHosts
// measures attempts/s with one and three hosts.
func TestManyHosts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a deployment of five processes")
	}
	d := startDeployment(t)
	d.start(d.hosts...)
	waitHosts(t, d.c, 3)

	// 240 attempts, a fifth of them on the GPU host's queue, 24 at a time: enough that every host
	// holds sandboxes when one of them is killed.
	const attempts = 240
	job := d.launch(d.upload("scale", 8, 2), attempts/10, 24)
	killed := d.hosts[1]
	testenv.Wait(t, "live sandboxes on "+killed.name, testenv.StallWindow, func() (bool, string) {
		var s summary
		d.c.call("GET", "/v2/jobs/"+job+"/summary", nil, &s)
		return len(d.liveSandboxes(job, killed)) >= 3 && s.Completed >= 24, s.String()
	}, func() string { return d.c.describeLive(job) })

	d.stop(killed, syscall.SIGKILL)
	killedAt := time.Now()
	lost := d.liveSandboxes(job, killed)
	d.stop(d.server, syscall.SIGTERM)
	d.start(d.server)
	waitReady(t, d.base, nil)
	t.Logf("killed %s with %d live sandboxes and restarted the API server (back in %s)", killed.name, len(lost), time.Since(killedAt).Round(time.Millisecond))

	sum := d.c.waitJob(job, nil)
	if st := d.c.jobStatus(job); st != "completed" || sum.Completed != attempts || sum.TotalTraces != attempts {
		t.Errorf("the job after a killed host and a restarted server: %s %+v, want %d completed", st, sum, attempts)
	}
	checkEveryAttemptOnce(t, d.dbURL, job, attempts)
	checkRestarts(t, d.dbURL, lost, killedAt)
	t.Logf("the job ended %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	for _, pr := range []*proc{d.server, d.builder, d.hosts[0], d.hosts[2]} {
		d.stop(pr, syscall.SIGTERM)
		log := pr.logText()
		if strings.Contains(log, "level=ERROR") {
			var errs []string
			for line := range strings.Lines(log) {
				if strings.Contains(line, "level=ERROR") && len(errs) < 10 {
					errs = append(errs, line)
				}
			}
			t.Errorf("%s logged errors:\n%s\nits log ends:\n%s", pr.name, strings.Join(errs, ""), tail(log, 3000))
		}
		if !strings.Contains(log, "level=INFO") {
			t.Errorf("%s's log has no INFO line; a failure would have nothing to show:\n%s", pr.name, log)
		}
	}
}

// BenchmarkManyHosts measures what TestManyHosts does not: attempts/s of 150 oracle attempts with
// one sandbox host, then with three, and the ratio. On a 2-core machine the cores, shared by
// Postgres, Temporal and the processes, bound it, not the hosts.
//
//	go test -run '^$' -bench ManyHosts -benchtime 1x ./cmd/proctor/
func BenchmarkManyHosts(b *testing.B) {
	for b.Loop() {
		d := startDeployment(b)
		cpu := d.upload("cpu", 10, 0)
		const measured = 150
		rate := func() float64 {
			began := time.Now()
			if sum := d.c.waitJob(d.launch(cpu, measured/10, 24), nil); sum.Completed != measured {
				b.Fatalf("a job of %d attempts: %+v", measured, sum)
			}
			return float64(measured) / time.Since(began).Seconds()
		}
		d.start(d.hosts[0])
		waitHosts(b, d.c, 1)
		one := rate()
		d.start(d.hosts[1], d.hosts[2])
		waitHosts(b, d.c, 3)
		three := rate()
		b.ReportMetric(one, "attempts/s-1-host")
		b.ReportMetric(three, "attempts/s-3-hosts")
		b.ReportMetric(three/one, "ratio")
		b.Logf("attempts/s over %d oracle attempts: %.1f with one sandbox host, %.1f with three (×%.2f)", measured, one, three, three/one)
	}
}

// proc is one process of a deployment, logging at info level to a file that outlives restarts.
type proc struct {
	name string
	cmd  string
	args []string
	log  string
	p    *os.Process
}

func (pr *proc) logText() string {
	b, _ := os.ReadFile(pr.log)
	return string(b)
}

// deployment is Proctor as a production deployment runs it, each part a process of the built
// binary: the API server, a build and workflow worker, two CPU sandbox hosts and a "GPU" host on
// sandboxes-gpu-t4 (no device nodes exist here: it hands out the ids, and the sandboxes see
// them). The hosts are not started.
type deployment struct {
	tb              testing.TB
	bin, root       string
	dbURL, base     string
	common          []string
	server, builder *proc
	hosts           []*proc
	c               api
	oracle          string
	ts              *devserver.Server
	// store reads what the test checks in the database.
	store *models.Store
}

func startDeployment(tb testing.TB) *deployment {
	tb.Helper()
	d := &deployment{tb: tb, bin: proctorBinary(tb), dbURL: storetest.PostgresURL(tb), root: tb.TempDir()}
	mustRun(tb, "migrate", "--database-url", d.dbURL)
	team := outputField(tb, mustRun(tb, "admin", "team", "create", "--name", "scale", "--database-url", d.dbURL), "team")
	membership := outputField(tb, mustRun(tb, "admin", "member", "add", "--team", team, "--email", "ops@example.com", "--role", "owner", "--database-url", d.dbURL), "membership")
	key := outputField(tb, mustRun(tb, "admin", "key", "create", "--membership", membership, "--name", "scale", "--database-url", d.dbURL), "key")
	store, err := models.Open(tb.Context(), d.dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	d.store = store
	d.ts = startTemporal(tb)
	mustRun(tb, "admin", "temporal", "setup", "--temporal-address", d.ts.FrontendAddress(), "--temporal-namespace", "scale")

	blobDir := filepath.Join(d.root, "blobs")
	d.common = []string{"--database-url", d.dbURL, "--temporal-address", d.ts.FrontendAddress(), "--temporal-namespace", "scale",
		"--log-level", "info", "--blob-url", "file://" + blobDir, "--signing-key", "k", "--shutdown-timeout", "5s"}
	host := func(name string, extra ...string) *proc {
		return &proc{name: name, cmd: "worker", args: append([]string{"--sandbox-root", filepath.Join(d.root, "sandboxes-"+name),
			"--build-dir", filepath.Join(d.root, "images-"+name)}, extra...)}
	}
	httpAddr := freeAddr(tb)
	d.base = "http://" + httpAddr
	d.server = &proc{name: "server", cmd: "server", args: []string{"--http-addr", httpAddr}}
	d.builder = &proc{name: "builder", cmd: "worker", args: []string{"--queues", "proctor-workflows,builds", "--build-dir", filepath.Join(d.root, "builds")}}
	d.hosts = []*proc{
		host("cpu-1", "--queues", "proctor-workflows,sandboxes-cpu"),
		host("cpu-2", "--queues", "proctor-workflows,sandboxes-cpu"),
		host("gpu", "--queues", "sandboxes-cpu", "--gpus", "0,1,2,3", "--gpu-type", "t4"),
	}
	tb.Cleanup(func() {
		if !tb.Failed() {
			return
		}
		for _, pr := range append([]*proc{d.server, d.builder}, d.hosts...) {
			if pr.p != nil {
				tb.Logf("%s's log:\n%s", pr.name, tail(pr.logText(), 4000))
			}
		}
	})
	d.start(d.server, d.builder)
	waitReady(tb, d.base, nil)

	tc, err := ptemporal.Dial(tb.Context(), d.ts.FrontendAddress(), "scale", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer tc.Close()
	seedOnPostgres(tb, d.dbURL, membership, blobDir, d.base, tc)
	d.c = api{t: tb, base: d.base, key: key, temporal: d.ts.FrontendAddress(), namespace: "scale"}
	d.oracle = d.c.resolve("/v2/models/resolve?model=oracle", "id")
	return d
}

// start starts processes, each appending to its log file (a restarted one too).
func (d *deployment) start(prs ...*proc) {
	d.tb.Helper()
	for _, pr := range prs {
		if pr.log == "" {
			pr.log = filepath.Join(d.root, pr.name+".log")
		}
		f, err := os.OpenFile(pr.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			d.tb.Fatal(err)
		}
		fmt.Fprintf(f, "--- proctor %s started %s\n", pr.cmd, time.Now().Format(time.RFC3339Nano))
		c := exec.Command(d.bin, append(append([]string{pr.cmd}, pr.args...), d.common...)...)
		startWorker(d.tb, c, f)
		f.Close() // the child holds its own descriptor
		pr.p = c.Process
	}
}

func (d *deployment) stop(pr *proc, sig syscall.Signal) {
	d.tb.Helper()
	if err := pr.p.Signal(sig); err != nil {
		d.tb.Fatal(err)
	}
	_, _ = pr.p.Wait()
}

// upload makes a taskset of cpu tasks and gpu tasks (each wanting one t4) that the oracle
// solves, and returns their versions.
func (d *deployment) upload(name string, cpu, gpu int) []string {
	var tasks []any
	for i := range cpu + gpu {
		item := fmt.Sprintf("item %d", i)
		task := map[string]any{"name": fmt.Sprint("add-", i), "env": "todo", "scenario": "add-todos",
			"args":       map[string]any{"items": []string{item}},
			"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": item}}}}
		if i >= cpu {
			task["runtime_config"] = map[string]any{"resources": map[string]any{"gpu": map[string]any{"count": 1, "type": "t4"}}}
		}
		tasks = append(tasks, task)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	if code := d.c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": name, "tasks": tasks}, &up); code != 200 && code != 201 {
		d.tb.Fatalf("upload %s: %d", name, code)
	}
	return up.TaskVersionIDs
}

func (d *deployment) launch(versions []string, group, concurrent int) string {
	var launched struct {
		JobID string `json:"job_id"`
	}
	if code := d.c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": versions, "model_ids": []string{d.oracle},
		"group_size": group, "max_concurrent": concurrent}, &launched); code != 201 {
		d.tb.Fatalf("launch: %d", code)
	}
	return launched.JobID
}

// lostTry is a try whose sandbox lived on a host that was killed.
type lostTry struct {
	TraceID string
	Attempt int
}

// liveSandboxes lists the job's tries whose sandboxes run on a host now: the instance rows still
// running whose work dirs are under that host's sandbox root (every host of the deployment has
// the same hostname, so its queue, "host/<hostname>/<random>", does not tell them apart).
func (d *deployment) liveSandboxes(job string, host *proc) []lostTry {
	d.tb.Helper()
	var rows []struct {
		TraceID   string
		Attempt   int
		SandboxID string
	}
	if err := d.store.DB.NewRaw(`SELECT trace_id, attempt, sandbox_id FROM instances WHERE job_id = ? AND status = 'running' ORDER BY 1, 2`, job).Scan(d.tb.Context(), &rows); err != nil {
		d.tb.Fatal(err)
	}
	// A host's work dirs are in its provider's owner directory, named after the sandbox.
	root := filepath.Join(d.root, "sandboxes-"+host.name)
	var lost []lostTry
	for _, r := range rows {
		if m, _ := filepath.Glob(filepath.Join(root, "owner-*", r.SandboxID+"*")); len(m) > 0 {
			lost = append(lost, lostTry{r.TraceID, r.Attempt})
		}
	}
	return lost
}

// checkRestarts checks that every try lost with a killed host was followed by a fresh try (or
// had recorded its outcome before the host died) within restartBound, and logs how long
// noticing the loss and starting the next try took.
func checkRestarts(t *testing.T, dbURL string, lost []lostTry, killedAt time.Time) {
	t.Helper()
	if len(lost) == 0 {
		t.Fatal("no sandbox was live on the killed host")
	}
	store, err := models.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	var restarted []time.Duration
	kept := 0
	for _, l := range lost {
		var next []models.Instance
		if err := store.DB.NewSelect().Model(&next).Where("trace_id = ? AND attempt > ?", l.TraceID, l.Attempt).Order("attempt").Scan(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(next) == 0 {
			// Its evaluation had recorded the outcome before the host died: the outcome stands
			// (checkEveryAttemptOnce saw it completed, once).
			kept++
			continue
		}
		after := next[0].CreatedAt.Sub(killedAt)
		restarted = append(restarted, after)
		if after > restartBound {
			t.Errorf("attempt %s's try %d was lost with its host and its next try started %s after the kill, past the bound of %s",
				l.TraceID, l.Attempt, after.Round(time.Millisecond), restartBound)
		}
	}
	slices.Sort(restarted)
	t.Logf("%d tries lost with the killed host: %d started a fresh try %s after the kill (median %.1fs; bound %s), %d had recorded the outcome before it",
		len(lost), len(restarted), spread(restarted), median(seconds(restarted)), restartBound, kept)
}

func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s–%s", ds[0].Round(100*time.Millisecond), ds[len(ds)-1].Round(100*time.Millisecond))
}

func seconds(ds []time.Duration) []float64 {
	var xs []float64
	for _, d := range ds {
		xs = append(xs, d.Seconds())
	}
	return xs
}

// waitHosts waits until n worker processes announce the sandboxes-cpu queue.
func waitHosts(t testing.TB, c api, n int) {
	t.Helper()
	testenv.Wait(t, fmt.Sprintf("%d sandbox hosts to announce themselves", n), testenv.StallWindow, func() (bool, string) {
		var ws struct {
			Queues []struct {
				Queue   string
				Workers int
			}
		}
		c.call("GET", "/v2/workers", nil, &ws)
		for _, q := range ws.Queues {
			if q.Queue == names.QueueSandboxesCPU {
				return q.Workers == n, fmt.Sprint(q.Workers)
			}
		}
		return false, "0"
	}, nil)
}

// checkEveryAttemptOnce reads a finished job from the database: every attempt completed at
// reward 1, its live events holding the oracle's one tool call and one evaluation (a try a
// killed host cut short is kept, superseded), and every sandbox it ran in ended.
func checkEveryAttemptOnce(t *testing.T, dbURL, jobID string, attempts int) {
	t.Helper()
	store, err := models.Open(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, q := range []struct {
		what  string
		query string
		want  int
	}{
		{"attempts", `SELECT count(*) FROM traces WHERE job_id = ?`, attempts},
		{"attempts completed at 1.0", `SELECT count(*) FROM traces WHERE job_id = ? AND status = 'completed' AND reward = 1`, attempts},
		{"attempts without exactly one live tool call", `SELECT count(*) FROM traces tr WHERE job_id = ? AND (SELECT count(*) FROM trace_events ev
			WHERE ev.trace_id = tr.id AND ev.kind = 'tool_call' AND NOT ev.superseded) <> 1`, 0},
		{"attempts without exactly one live evaluation", `SELECT count(*) FROM traces tr WHERE job_id = ? AND (SELECT count(*) FROM trace_events ev
			WHERE ev.trace_id = tr.id AND ev.kind = 'evaluate' AND NOT ev.superseded) <> 1`, 0},
		{"sandboxes still running", `SELECT count(*) FROM instances WHERE job_id = ? AND status = 'running'`, 0},
	} {
		var n int
		if err := store.DB.NewRaw(q.query, jobID).Scan(t.Context(), &n); err != nil {
			t.Fatalf("%s: %v", q.what, err)
		}
		if n != q.want {
			t.Errorf("%s: %d, want %d", q.what, n, q.want)
		}
	}
	if t.Failed() {
		var odd []struct {
			TraceID      string
			Attempt, Seq int
			Kind         string
			EventAttempt int
			Superseded   bool
		}
		store.DB.NewRaw(`SELECT tr.id AS trace_id, tr.attempt, ev.seq, ev.kind, ev.attempt AS event_attempt, ev.superseded FROM traces tr JOIN trace_events ev ON ev.trace_id = tr.id
			WHERE tr.job_id = ? AND (SELECT count(*) FROM trace_events e WHERE e.trace_id = tr.id AND e.kind = 'evaluate' AND NOT e.superseded) <> 1 ORDER BY 1, 3`, jobID).Scan(t.Context(), &odd) //nolint:errcheck
		for _, o := range odd {
			t.Logf("%+v", o)
		}
	}
	var perHost []struct {
		HostQueue string
		Sandboxes int
		Retries   int
	}
	if err := store.DB.NewRaw(`SELECT host_queue, count(*) AS sandboxes, count(*) FILTER (WHERE attempt > 1) AS retries
		FROM instances WHERE job_id = ? GROUP BY host_queue ORDER BY host_queue`, jobID).Scan(t.Context(), &perHost); err != nil {
		t.Fatal(err)
	}
	t.Logf("sandboxes per host: %+v", perHost)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
