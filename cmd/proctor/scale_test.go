package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	ptemporal "github.com/proctorhq/proctor/temporal"
)

// TestManyHosts runs a deployment as separate processes on one Postgres and one Temporal: the
// API server, a build worker (which also runs workflows) and three sandbox hosts with their own
// sandbox roots and image directories, the third a GPU host polling a queue of its own. It
// measures attempts/s with one and with three hosts, then runs a job of 1,000 oracle attempts
// and, mid-job, kill -9s a host and restarts the API server: every attempt ends completed, once,
// with its tool call and its evaluation recorded once.
func TestManyHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 1,300 attempts over six processes")
	}
	bin := proctorBinary(t)
	dbURL := storetest.PostgresURL(t)
	mustRun(t, "migrate", "--database-url", dbURL)
	team := outputField(t, mustRun(t, "admin", "team", "create", "--name", "scale", "--database-url", dbURL), "team")
	membership := outputField(t, mustRun(t, "admin", "member", "add", "--team", team, "--email", "ops@example.com", "--role", "owner", "--database-url", dbURL), "membership")
	key := outputField(t, mustRun(t, "admin", "key", "create", "--membership", membership, "--name", "scale", "--database-url", dbURL), "key")
	ts := startTemporal(t)
	mustRun(t, "admin", "temporal", "setup", "--temporal-address", ts.FrontendAddress(), "--temporal-namespace", "scale")

	root := t.TempDir()
	blobDir := filepath.Join(root, "blobs")
	common := []string{"--database-url", dbURL, "--temporal-address", ts.FrontendAddress(), "--temporal-namespace", "scale",
		"--log-level", "warn", "--blob-url", "file://" + blobDir, "--signing-key", "k", "--shutdown-timeout", "5s"}
	type proc struct {
		name string
		cmd  string
		args []string
		log  *testenv.Buffer
		p    *os.Process
	}
	start := func(pr *proc) {
		t.Helper()
		c := exec.Command(bin, append(append([]string{pr.cmd}, pr.args...), common...)...)
		pr.log = &testenv.Buffer{}
		startWorker(t, c, pr.log)
		pr.p = c.Process
	}
	stop := func(pr *proc, sig syscall.Signal) {
		t.Helper()
		if err := pr.p.Signal(sig); err != nil {
			t.Fatal(err)
		}
		_, _ = pr.p.Wait()
	}
	host := func(name string, extra ...string) *proc {
		return &proc{name: name, cmd: "worker", args: append([]string{"--sandbox-root", filepath.Join(root, "sandboxes-"+name),
			"--build-dir", filepath.Join(root, "images-"+name)}, extra...)}
	}
	httpAddr := freeAddr(t)
	base := "http://" + httpAddr
	server := &proc{name: "server", cmd: "server", args: []string{"--http-addr", httpAddr}}
	builder := &proc{name: "builder", cmd: "worker", args: []string{"--queues", "proctor-workflows,builds", "--build-dir", filepath.Join(root, "builds")}}
	hosts := []*proc{
		host("cpu-1", "--queues", "proctor-workflows,sandboxes-cpu"),
		host("cpu-2", "--queues", "proctor-workflows,sandboxes-cpu"),
		// No device nodes exist here: the host hands out the ids, and the sandboxes see them.
		host("gpu", "--queues", "sandboxes-cpu", "--gpus", "0,1,2,3", "--gpu-type", "t4"),
	}
	procs := []*proc{server, builder, hosts[0], hosts[1], hosts[2]}
	defer func() {
		if t.Failed() {
			for _, pr := range procs {
				if pr.log != nil {
					t.Logf("%s's log:\n%s", pr.name, tail(pr.log.String(), 3000))
				}
			}
		}
	}()
	start(server)
	start(builder)
	start(hosts[0])
	waitReady(t, base, nil)

	tc, err := ptemporal.Dial(t.Context(), ts.FrontendAddress(), "scale", slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	seedOnPostgres(t, dbURL, membership, blobDir, base, tc)
	c := api{t: t, base: base, key: key}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	upload := func(name string, cpu, gpu int) []string {
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
		if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": name, "tasks": tasks}, &up); code != 200 && code != 201 {
			t.Fatalf("upload %s: %d", name, code)
		}
		return up.TaskVersionIDs
	}
	launch := func(versions []string, group int) string {
		var launched struct {
			JobID string `json:"job_id"`
		}
		if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": versions, "model_ids": []string{oracle},
			"group_size": group, "max_concurrent": 24}, &launched); code != 201 {
			t.Fatalf("launch: %d", code)
		}
		return launched.JobID
	}
	// rate runs a job of n CPU attempts to its end and returns attempts/s.
	cpuTasks := upload("cpu", 10, 0)
	rate := func(n int) float64 {
		began := time.Now()
		sum := c.waitJob(launch(cpuTasks, n/len(cpuTasks)), nil)
		if sum.Completed != n {
			t.Fatalf("a job of %d attempts: %+v", n, sum)
		}
		return float64(n) / time.Since(began).Seconds()
	}
	const measured = 150
	one := rate(measured)
	start(hosts[1])
	start(hosts[2])
	waitHosts(t, c, 3)
	three := rate(measured)
	t.Logf("attempts/s over %d oracle attempts on this %d-core machine: %.1f with one sandbox host, %.1f with three (×%.2f)",
		measured, goruntime.NumCPU(), one, three, three/one)

	// 1,000 attempts, a fifth of them on the GPU host's queue.
	job := launch(upload("scale", 8, 2), 100)
	began := time.Now()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var s summary
		c.call("GET", "/v2/jobs/"+job+"/summary", nil, &s)
		if s.Completed >= 250 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the job did not reach 250 attempts in 5 minutes: %+v", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stop(hosts[1], syscall.SIGKILL)
	killedAt := time.Now()
	stop(server, syscall.SIGTERM)
	start(server)
	waitReady(t, base, nil)
	t.Logf("killed %s and restarted the API server (back in %s)", hosts[1].name, time.Since(killedAt).Round(time.Millisecond))
	sum := c.waitJob(job, nil)
	took := time.Since(began)
	if st := c.jobStatus(job); st != "completed" || sum.Completed != 1000 || sum.TotalTraces != 1000 {
		t.Errorf("the job after a killed host and a restarted server: %s %+v, want 1,000 completed", st, sum)
	}
	checkEveryAttemptOnce(t, dbURL, job)
	t.Logf("1,000 attempts in %s (%.1f/s) through a killed host and a server restart", took.Round(time.Millisecond), 1000/took.Seconds())
	for _, pr := range []*proc{server, builder, hosts[0], hosts[2]} {
		stop(pr, syscall.SIGTERM)
		if log := pr.log.String(); strings.Contains(log, "level=ERROR") {
			t.Errorf("%s logged errors:\n%s", pr.name, tail(log, 3000))
		}
	}
}

// waitHosts waits until n worker processes announce the sandboxes-cpu queue.
func waitHosts(t *testing.T, c api, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var ws struct {
			Queues []struct {
				Queue   string
				Workers int
			}
		}
		c.call("GET", "/v2/workers", nil, &ws)
		for _, q := range ws.Queues {
			if q.Queue == ptemporal.QueueSandboxesCPU && q.Workers == n {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sandbox hosts never announced themselves: %+v", n, ws)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkEveryAttemptOnce reads a finished job from the database: every attempt completed at
// reward 1, its live events holding the oracle's one tool call and one evaluation (a try a
// killed host cut short is kept, superseded), and every sandbox it ran in ended.
func checkEveryAttemptOnce(t *testing.T, dbURL, jobID string) {
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
		{"attempts", `SELECT count(*) FROM traces WHERE job_id = ?`, 1000},
		{"attempts completed at 1.0", `SELECT count(*) FROM traces WHERE job_id = ? AND status = 'completed' AND reward = 1`, 1000},
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
