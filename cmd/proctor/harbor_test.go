package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// harborBase is the base image the tests build the Harbor examples FROM (they default to
// ubuntu:24.04, which no registry here serves): the host's bash with its libraries and busybox's
// tools, made in the build workers' storage.
const harborBase = "localhost/harbor-base:1"

// makeHarborBase builds harborBase into the buildah storage of the builds under buildDir.
func makeHarborBase(t testing.TB, buildDir string) {
	t.Helper()
	for _, tool := range []string{"buildah", "runc", "busybox", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.MissingTool(t, tool)
		}
	}
	ctxDir := t.TempDir()
	root := filepath.Join(ctxDir, "root")
	bash, _ := exec.LookPath("bash")
	busybox, _ := exec.LookPath("busybox")
	files := []string{bash, busybox}
	out, err := exec.Command("ldd", bash).Output()
	if err != nil {
		t.Fatalf("ldd bash: %v", err)
	}
	for _, m := range regexp.MustCompile(`(?m)(/\S+\.so[.\d]*)`).FindAllString(string(out), -1) {
		files = append(files, m)
	}
	for _, f := range files {
		real, err := filepath.EvalSymlinks(f)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(real)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(root, f)
		if f == bash || f == busybox {
			dst = filepath.Join(root, "bin", filepath.Base(f))
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	list, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(list)) {
		if applet != "bash" && applet != "busybox" {
			os.Symlink("busybox", filepath.Join(root, "bin", applet))
		}
	}
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
	for _, d := range []string{"tmp", "root", "usr/bin"} {
		os.MkdirAll(filepath.Join(root, d), 0o755)
	}
	os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky) // as a machine's: anyone's to write in
	os.Symlink("/bin/bash", filepath.Join(root, "usr", "bin", "bash"))
	os.Symlink("/bin/busybox", filepath.Join(root, "usr", "bin", "env"))
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte("FROM scratch\nCOPY root/ /\nENV PATH=/usr/bin:/bin\n"), 0o644)
	args, env, err := activities.Buildah(buildDir)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("buildah", append(args, "bud", "--isolation", "oci", "-t", harborBase, ctxDir)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the Harbor examples' base image: %v\n%s", err, out)
	}
}

// scriptedShellModel is an OpenAI-compatible upstream that plays a model working a Harbor task
// through the shell server's tools: given hello-world's instruction it writes the file in the
// terminal, reads it back with exec, then says it is done; given anything else it is done at once.
// Offered an agent's own read_file (a brought agent inside the task), it writes the file with the
// agent's write_file instead, relative to the working directory. Offered a tool name twice, it
// refuses the request.
func scriptedShellModel(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct{ Name string } `json:"function"`
			} `json:"tools"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Function.Name)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(tools)))) != len(tools) {
			http.Error(w, `{"error":{"message":"scripted model: a tool name twice","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		results, prompt := 0, ""
		for _, m := range req.Messages {
			switch m.Role {
			case "tool":
				results++
			case "user":
				prompt = fmt.Sprint(m.Content)
			}
		}
		// It writes the file in the terminal (its shell starts in the task's working directory),
		// then reads it back with exec.
		calls := []struct {
			tool string
			args map[string]any
		}{
			{"terminal_send", map[string]any{"keys": "echo 'Hello, world!' > hello.txt\n", "wait_sec": 5}},
			{"exec", map[string]any{"command": "cat /app/hello.txt", "timeout_sec": 30}},
		}
		if slices.Contains(tools, "read_file") {
			calls = calls[:1]
			calls[0].tool, calls[0].args = "write_file", map[string]any{"path": "hello.txt", "content": "Hello, world!"}
		}
		message := map[string]any{"role": "assistant", "content": "Done."}
		if strings.Contains(prompt, "hello.txt") && results < len(calls) {
			args, _ := json.Marshal(calls[results].args)
			message = map[string]any{"role": "assistant", "content": "Working.", "tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%d", results), "type": "function",
				"function": map[string]any{"name": calls[results].tool, "arguments": string(args)}}}}
		}
		writeChatCompletion(w, fmt.Sprintf("chatcmpl-%d", results), req.Model, message)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHarborTasks imports the Harbor examples (examples/harbor) into dev, as a user would with
// `proctor tasks import harbor`, and runs them on the process provider (bubblewrap, each
// sandbox's own overlay of the image as a writable root) and the container provider (podman):
// every valid task reaches 1.0 with the oracle (its solution/solve.sh, then its tests), an idle
// agent scores 0, the task whose tests write both reward files ends in error as a task fault,
// and the task that needs what Proctor does not honour yet is refused at import, saying why.
func TestHarborTasks(t *testing.T) {
	t.Parallel()
	// One provider on each store: what turns on the store is the store suites' (both), and the
	// flow through the platform is the same on either.
	t.Run("process/sqlite", func(t *testing.T) {
		t.Parallel()
		harborTasks(t, nil, nil)
	})
	t.Run("container/postgres", func(t *testing.T) {
		t.Parallel()
		host := testenv.ContainerEngine(t)
		harborTasks(t, []string{"--sandbox-provider", "container", "--container-host", host, "--container-owner", "harbor-" + filepath.Base(t.TempDir())},
			[]string{"--database-url", storetest.PostgresURL(t)})
	})
}

func harborTasks(t *testing.T, provider, storeArgs []string) {
	dataDir := t.TempDir()
	makeHarborBase(t, filepath.Join(dataDir, "builds"))
	dev := startDev(t, dataDir, slices.Concat(provider, storeArgs, []string{"--shell-server", testenv.StaticProgram(t, "cmd/proctor-shell"),
		"--agent-relay", testenv.StaticProgram(t, "cmd/proctor-relay")})...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	examples := filepath.Join(testenv.ModuleRoot(t), "examples", "harbor")

	// What Proctor does not honour refuses the task, saying why, before anything is built.
	unsupported := filepath.Join(t.TempDir(), "multi-step")
	for name, content := range map[string]string{"task.toml": "schema_version = \"1.4\"\nos = \"windows\"\n[[steps]]\nname = \"one\"\n",
		"instruction.md": "x", "environment/Dockerfile": "FROM scratch\n", "tests/test.sh": "exit 0\n"} {
		os.MkdirAll(filepath.Dir(filepath.Join(unsupported, name)), 0o755)
		os.WriteFile(filepath.Join(unsupported, name), []byte(content), 0o644)
	}
	out, err := c.cli("tasks", "import", "harbor", unsupported)
	if err == nil || !regexp.MustCompile(`multi-step\s+refused: os: not a field Proctor knows .*; \[\[steps\]\]: multi-step tasks are not supported yet`).MatchString(out) ||
		!strings.Contains(out, "1 tasks: 0 imported into ") {
		t.Errorf("an unsupported task: %v\n%s", err, out)
	}

	// api-token's [environment].env names the launching member's secret.
	if code := c.call("POST", "/v2/member-secrets", map[string]any{"name": "API_TOKEN", "value": "tok-0123456789"}, nil); code != 201 {
		t.Fatalf("member secret: %d", code)
	}
	importArgs := []string{"tasks", "import", "harbor", examples, "--taskset", "harbor-examples", "--build-arg", "BASE_IMAGE=" + harborBase}
	out, err = c.cli(importArgs...)
	if err != nil {
		t.Fatalf("import: %v\n%s", err, out)
	}
	for _, want := range []string{
		`6 tasks: 6 imported into harbor-examples \(6 created, 0 updated, 0 unchanged\), 0 refused; 3 builds made, 3 tasks on a shared build`,
		`proctor/hello-world\s+imported`,
		`proctor/api-token\s+imported`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("import output lacks %q:\n%s", want, out)
		}
	}
	shared := regexp.MustCompile(`proctor/hello-world\s+imported \((?:built|shared build) (harbor-[0-9a-f]{16})\)`).FindStringSubmatch(out)
	if shared == nil {
		t.Fatalf("import output names no environment for hello-world:\n%s", out)
	}
	// Again, unchanged, from an archive of the dataset: no build, no new task version.
	archivePath := filepath.Join(t.TempDir(), "harbor-examples.tar.gz")
	if err := os.WriteFile(archivePath, tarGz(t, examples), 0o644); err != nil {
		t.Fatal(err)
	}
	importArgs[3] = archivePath
	out, _ = c.cli(importArgs...)
	if !strings.Contains(out, "(0 created, 0 updated, 6 unchanged), 0 refused; 0 builds made, 6 tasks on a shared build") {
		t.Errorf("an unchanged re-import:\n%s", out)
	}

	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	idle := c.resolve("/v2/models/resolve?model=idle", "id")
	for _, m := range []struct {
		name, id string
		want     map[string]string // task → "reward" or "error: …"
	}{
		{"oracle", oracle, map[string]string{"proctor/hello-world": "1", "proctor/log-census": "1", "proctor/inventory-report": "1", "proctor/offline-check": "1", "proctor/api-token": "1",
			"proctor/two-rewards": "error: task fault: the verifier wrote both reward.txt and reward.json"}},
		{"idle", idle, map[string]string{"proctor/hello-world": "0", "proctor/log-census": "0", "proctor/inventory-report": "0", "proctor/offline-check": "0", "proctor/api-token": "0",
			"proctor/two-rewards": "error: task fault: the verifier wrote both"}},
	} {
		var launched struct {
			JobID string `json:"job_id"`
		}
		if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("harbor-examples"), "model_ids": []string{m.id},
			"max_concurrent": 5, "name": "harbor " + m.name}, &launched); code != 201 {
			t.Fatalf("run_list = %d", code)
		}
		c.waitJob(launched.JobID, nil)
		got := map[string]string{}
		var lines []string
		for _, tr := range c.traces(launched.JobID) {
			switch {
			case tr.Status == "completed" && tr.Reward != nil:
				got[tr.Name] = strconv.FormatFloat(*tr.Reward, 'g', -1, 64)
			case tr.Status == "error":
				got[tr.Name] = "error: " + tr.Error
			default:
				got[tr.Name] = tr.Status
			}
			lines = append(lines, tr.Name+" = "+got[tr.Name])
		}
		sort.Strings(lines)
		for task, want := range m.want {
			if g := got[task]; g != want && !(strings.HasPrefix(want, "error: ") && strings.Contains(g, strings.TrimPrefix(want, "error: "))) {
				t.Errorf("%s on %s = %q, want %q\nall: %s", m.name, task, g, want, strings.Join(lines, "\n"))
			}
		}
		if m.name == "oracle" {
			checkHarborExport(t, c, launched.JobID, got)
		}
	}

	// A launch's timeout multiplier reaches the verifier: a task whose tests take 2 s with a
	// verifier timeout of 1 s is a task fault, and with --timeout-multiplier 4 passes.
	slow := filepath.Join(t.TempDir(), "slow-tests")
	os.CopyFS(slow, os.DirFS(filepath.Join(examples, "hello-world")))
	os.WriteFile(filepath.Join(slow, "task.toml"), []byte("schema_version = \"1.4\"\n[task]\nname = \"proctor/slow-tests\"\n[verifier]\ntimeout_sec = 1\n"), 0o644)
	os.WriteFile(filepath.Join(slow, "tests", "test.sh"), []byte("#!/bin/bash\nsleep 2\necho 1 > /logs/verifier/reward.txt\n"), 0o755)
	if out, err := c.cli("tasks", "import", "harbor", slow, "--taskset", "harbor-slow", "--build-arg", "BASE_IMAGE="+harborBase); err != nil || !strings.Contains(out, "built before") {
		t.Fatalf("import the slow task: %v\n%s", err, out)
	}
	for _, multiplier := range []float64{1, 4} {
		var launched struct {
			JobID string `json:"job_id"`
		}
		body := map[string]any{"taskset_id": c.tasksetID("harbor-slow"), "model_ids": []string{oracle}, "name": fmt.Sprint("slow ×", multiplier)}
		if multiplier != 1 {
			body["timeout_multiplier"] = multiplier
		}
		if code := c.call("POST", "/v2/rollouts/run_list", body, &launched); code != 201 {
			t.Fatalf("run_list = %d", code)
		}
		c.waitJob(launched.JobID, nil)
		tr := c.traces(launched.JobID)[0]
		var job struct {
			Metadata struct {
				TimeoutMultiplier float64 `json:"timeout_multiplier"`
			} `json:"metadata"`
		}
		c.call("GET", "/v2/jobs/"+launched.JobID, nil, &job)
		switch {
		case multiplier == 1 && (tr.Status != "error" || !strings.Contains(tr.Error, "task fault: the verifier ran past its 1s")):
			t.Errorf("a 2 s test with a 1 s verifier: %+v", tr)
		case multiplier == 4 && (tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || job.Metadata.TimeoutMultiplier != 4):
			t.Errorf("the same with a timeout multiplier of 4: %+v (job metadata %+v)", tr, job.Metadata)
		}
	}

	// [agent].user: the oracle's solve.sh runs as uid 1000 and the tests (as root) see its file;
	// the process provider's sandboxes have no user but root, and say so at the start.
	asAgent := filepath.Join(t.TempDir(), "as-agent")
	os.CopyFS(asAgent, os.DirFS(filepath.Join(examples, "hello-world")))
	os.WriteFile(filepath.Join(asAgent, "task.toml"), []byte("schema_version = \"1.4\"\n[task]\nname = \"proctor/as-agent\"\n[agent]\nuser = 1000\n"), 0o644)
	os.WriteFile(filepath.Join(asAgent, "solution", "solve.sh"), []byte("#!/bin/bash\nid -u > /tmp/solved-by\n"), 0o755)
	os.WriteFile(filepath.Join(asAgent, "tests", "test.sh"), []byte("#!/bin/bash\n[ \"$(cat /tmp/solved-by):$(stat -c %u /tmp/solved-by):$(id -u)\" = 1000:1000:0 ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n"), 0o755)
	if out, err := c.cli("tasks", "import", "harbor", asAgent, "--taskset", "harbor-users", "--build-arg", "BASE_IMAGE="+harborBase); err != nil {
		t.Fatalf("import the as-agent task: %v\n%s", err, out)
	}
	{
		var launched struct {
			JobID string `json:"job_id"`
		}
		if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("harbor-users"), "model_ids": []string{oracle}, "name": "as agent"}, &launched); code != 201 {
			t.Fatalf("run_list = %d", code)
		}
		c.waitJob(launched.JobID, nil)
		tr := c.traces(launched.JobID)[0]
		switch {
		case provider == nil && (tr.Status != "error" || !strings.Contains(tr.Error, "[agent].user: the task runs commands as uid 1000, which this sandbox cannot switch to")):
			t.Errorf("a task with an agent user on the process provider: %+v", tr)
		case provider != nil && (tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1):
			t.Errorf("a task with an agent user on the container provider: %+v", tr)
		}
	}

	// The built-in agent, driven by a scripted model that works through the terminal and exec as
	// a model would: it solves hello-world (and does nothing for the other tasks).
	model := addScriptedModel(t, c, dataDir, storeArgs, "shell-scripted", scriptedShellModel(t).URL)
	var launched struct {
		JobID string `json:"job_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("harbor-examples"), "model_ids": []string{model},
		"max_concurrent": 5, "name": "harbor scripted"}, &launched); code != 201 {
		t.Fatalf("run_list = %d", code)
	}
	c.waitJob(launched.JobID, nil)
	for _, tr := range c.traces(launched.JobID) {
		if tr.Name == "proctor/hello-world" && (tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1) {
			t.Errorf("the built-in agent through exec on hello-world: %+v", tr)
		}
	}

	// A brought agent inside the task, as Harbor runs agents: the TypeScript example deployed
	// --inside runs in the task's container (an exec of it, its image copied in), from its
	// WORKDIR, and its own write_file puts hello.txt where the tests read it. (The process
	// provider's case is TestTheTypeScriptExampleAgentSolvesATask's.)
	if provider != nil {
		if out, err := c.cli("agent", "deploy", preparedTSAgent(t), "--name", "react-ts-inside", "--inside"); err != nil {
			t.Fatalf("agent deploy --inside: %v\n%s", err, out)
		}
		var tasks struct {
			Items []struct {
				Name            string `json:"name"`
				LatestVersionID string `json:"latest_version_id"`
			} `json:"items"`
		}
		c.call("GET", "/v2/tasksets/"+c.tasksetID("harbor-examples")+"/tasks", nil, &tasks)
		hello := ""
		for _, it := range tasks.Items {
			if it.Name == "proctor/hello-world" {
				hello = it.LatestVersionID
			}
		}
		tr, logs := c.runToEnd(map[string]any{"task_version_id": hello, "model_id": model, "agent": "react-ts-inside"})
		if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(c.agentOutput(tr.ID), "react-ts: 5 tools") {
			t.Errorf("the TypeScript agent inside a Harbor task's container = %+v\n%s%s", tr, logs, c.agentOutput(tr.ID))
		}
	}

	// Certification of the build three tasks share: the sound two pass (the tamper probe's
	// planted reward files score nothing), the broken one is flagged.
	var envs struct {
		Items []environmentRow `json:"items"`
	}
	c.call("GET", "/v2/registry?search="+shared[1], nil, &envs)
	if len(envs.Items) != 1 || envs.Items[0].LatestBuildID == nil {
		t.Fatalf("environment %s: %+v", shared[1], envs.Items)
	}
	out, err = c.cli("env", "certify", *envs.Items[0].LatestBuildID, "--taskset", "harbor-examples", "--k", "2")
	if err == nil || !strings.Contains(err.Error(), "flagged") {
		t.Errorf("certification: %v, want it flagged for the broken task\n%s", err, out)
	}
	for _, want := range []string{
		`proctor/hello-world\s+2/2\s+0\.000\s+0\.000\s+2/2 refused; claimed success via exec → 0\.000\s+–`,
		`proctor/offline-check\s+2/2\s+0\.000\s+0\.000\s+2/2 refused; claimed success via exec → 0\.000\s+–`,
		`proctor/api-token\s+2/2\s+0\.000\s+0\.000\s+2/2 refused; claimed success via exec → 0\.000\s+–`,
		`proctor/two-rewards\s+0/0\s.*task_fault`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("certification lacks %q:\n%s", want, out)
		}
	}
}

// BenchmarkHarborImport imports 50 generated Harbor tasks whose environment/ folders are five
// distinct build contexts (ten tasks each), into dev: it reports the builds made (5 when tasks
// share builds by content) and the import's wall time.
func BenchmarkHarborImport(b *testing.B) {
	dataDir := b.TempDir()
	makeHarborBase(b, filepath.Join(dataDir, "builds"))
	dev := startDev(b, dataDir, "--shell-server", testenv.StaticProgram(b, "cmd/proctor-shell"))
	c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey}
	var took []time.Duration
	builds := 0
	for i := 0; b.Loop(); i++ {
		dataset := b.TempDir()
		for n := range 50 {
			dir := filepath.Join(dataset, fmt.Sprintf("task-%02d", n))
			for name, content := range map[string]string{
				"task.toml":               "schema_version = \"1.4\"\n[task]\nname = \"bench/task-" + fmt.Sprint(n) + "\"\n",
				"instruction.md":          fmt.Sprintf("Write %d to /app/answer.txt.\n", n),
				"environment/Dockerfile":  "ARG BASE_IMAGE=ubuntu:24.04\nFROM ${BASE_IMAGE}\nWORKDIR /app\nCOPY context.txt /app/context.txt\n",
				"environment/context.txt": fmt.Sprintf("context %d of round %d\n", n%5, i),
				"tests/test.sh":           fmt.Sprintf("#!/bin/bash\n[ \"$(cat /app/answer.txt)\" = %d ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n", n),
				"solution/solve.sh":       fmt.Sprintf("#!/bin/bash\necho %d > /app/answer.txt\n", n),
			} {
				os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755)
				os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755)
			}
		}
		begin := time.Now()
		out, err := c.cli("tasks", "import", "harbor", dataset, "--taskset", fmt.Sprint("bench-", i), "--build-arg", "BASE_IMAGE="+harborBase)
		took = append(took, time.Since(begin))
		m := regexp.MustCompile(`50 imported .* (\d+) builds made, (\d+) tasks on a shared build`).FindStringSubmatch(out)
		if err != nil || m == nil {
			b.Fatalf("import: %v\n%s", err, out)
		}
		builds, _ = strconv.Atoi(m[1])
	}
	slices.Sort(took)
	b.ReportMetric(float64(builds), "builds")
	b.ReportMetric(took[len(took)/2].Seconds(), "import-s")
}

// endpointBenchAgent is a brought agent that measures the agent's side of a Harbor task: 200
// calls of exec `true` through PROCTOR_MCP_URL (the worker's endpoint, which records each call
// in the trace and passes it to the task's shell server), and prints their p50 and p99.
const endpointBenchAgent = `package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	ctx := context.Background()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("PROCTOR_MCP_URL")}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer s.Close()
	var d []time.Duration
	for range 200 {
		begin := time.Now()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "exec", Arguments: map[string]any{"command": "true"}})
		if err != nil || res.IsError {
			fmt.Fprintln(os.Stderr, "exec:", err, res)
			os.Exit(1)
		}
		d = append(d, time.Since(begin))
	}
	slices.Sort(d)
	fmt.Printf("endpoint-exec p50=%.3f p99=%.3f\n", float64(d[len(d)/2].Microseconds())/1000, float64(d[len(d)*99/100].Microseconds())/1000)
}
`

// BenchmarkExecThroughTheAgentsEndpoint is the exec round trip a brought agent sees in a Harbor
// task (examples/harbor/hello-world): `true` through the attempt's MCP endpoint, the worker's
// recording of the call, and the task's shell server, per provider (endpoint-exec-ms and
// endpoint-exec-p99-ms, over 200 calls). Run:
//
//	go test -run '^$' -bench ExecThroughTheAgentsEndpoint -benchtime 1x ./cmd/proctor/
func BenchmarkExecThroughTheAgentsEndpoint(b *testing.B) {
	agentDir := outOfTreeModule(b, []byte(endpointBenchAgent))
	for _, pc := range []struct {
		name string
		args func() []string
	}{
		{"process", func() []string { return nil }},
		{"container", func() []string {
			return []string{"--sandbox-provider", "container", "--container-host", testenv.ContainerEngine(b), "--container-owner", "bench-" + filepath.Base(b.TempDir())}
		}},
	} {
		b.Run(pc.name, func(b *testing.B) {
			var p50, p99 []float64
			for b.Loop() {
				dataDir := b.TempDir()
				makeHarborBase(b, filepath.Join(dataDir, "builds"))
				dev := startDev(b, dataDir, append(pc.args(), "--shell-server", testenv.StaticProgram(b, "cmd/proctor-shell"),
					"--agent-relay", testenv.StaticProgram(b, "cmd/proctor-relay"))...)
				c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
				if out, err := c.cli("tasks", "import", "harbor", filepath.Join(testenv.ModuleRoot(b), "examples", "harbor", "hello-world"), "--taskset", "bench",
					"--build-arg", "BASE_IMAGE="+harborBase); err != nil {
					b.Fatalf("import: %v\n%s", err, out)
				}
				if out, err := c.cli("agent", "deploy", agentDir, "--name", "endpoint-bench"); err != nil {
					b.Fatalf("agent deploy: %v\n%s", err, out)
				}
				model := addScriptedModel(b, c, dataDir, nil, "unused", "http://127.0.0.1:9") // the agent calls no model
				var tasks struct {
					Items []struct {
						LatestVersionID string `json:"latest_version_id"`
					} `json:"items"`
				}
				c.call("GET", "/v2/tasksets/"+c.tasksetID("bench")+"/tasks", nil, &tasks)
				tr, logs := c.runToEnd(map[string]any{"task_version_id": tasks.Items[0].LatestVersionID, "model_id": model, "agent": "endpoint-bench"})
				out := c.agentOutput(tr.ID)
				m := regexp.MustCompile(`endpoint-exec p50=([\d.]+) p99=([\d.]+)`).FindStringSubmatch(out)
				if tr.Status != "completed" || m == nil {
					b.Fatalf("the attempt: %+v\n%s%s", tr, logs, out)
				}
				v50, _ := strconv.ParseFloat(m[1], 64)
				v99, _ := strconv.ParseFloat(m[2], 64)
				p50, p99 = append(p50, v50), append(p99, v99)
				dev.stop(b)
			}
			b.ReportMetric(median(p50), "endpoint-exec-ms")
			b.ReportMetric(median(p99), "endpoint-exec-p99-ms")
		})
	}
}

// checkHarborExport exports the job in Harbor's layout and reads it back as Harbor's tools do:
// a trial folder per attempt whose result.json says the task, the rewards the verifier read
// (every number of a reward.json) or the exception that ended it, beside the verifier's files
// and the agent's trajectory; the job's result.json counts them.
func checkHarborExport(t *testing.T, c api, jobID string, want map[string]string) {
	t.Helper()
	dir := t.TempDir()
	if out, err := c.cli("export", jobID, "--format", "harbor", "--out", dir); err != nil || !strings.Contains(out, "6 trials written in Harbor's layout") {
		t.Fatalf("export --format harbor: %v\n%s", err, out)
	}
	var job harborJobResult
	if err := json.Unmarshal(mustRead(t, filepath.Join(dir, jobID, "result.json")), &job); err != nil || job.NTotalTrials != 6 || job.Stats.NErrors != 1 ||
		job.Stats.MeanReward == nil || *job.Stats.MeanReward != 1 {
		t.Errorf("the job's result.json: %+v, %v", job, err)
	}
	trials, _ := filepath.Glob(filepath.Join(dir, jobID, "*", "result.json"))
	seen := map[string]bool{}
	for _, path := range trials {
		var tr harborTrialResult
		if err := json.Unmarshal(mustRead(t, path), &tr); err != nil {
			t.Fatal(err)
		}
		seen[tr.TaskName] = true
		trial := filepath.Dir(path)
		if _, err := os.Stat(filepath.Join(trial, "agent", "trajectory.json")); err != nil {
			t.Errorf("%s: no agent/trajectory.json", tr.TrialName)
		}
		switch w := want[tr.TaskName]; {
		case strings.HasPrefix(w, "error: "):
			if tr.ExceptionInfo == nil || tr.ExceptionInfo.ExceptionType != "TaskFault" || tr.VerifierResult != nil {
				t.Errorf("%s: exception %+v, verifier %+v; want a TaskFault and no rewards", tr.TaskName, tr.ExceptionInfo, tr.VerifierResult)
			}
		case tr.VerifierResult == nil || strconv.FormatFloat(tr.VerifierResult.Rewards["reward"], 'g', -1, 64) != w || tr.ExceptionInfo != nil:
			t.Errorf("%s: verifier %+v, exception %+v; want reward %s", tr.TaskName, tr.VerifierResult, tr.ExceptionInfo, w)
		case tr.TaskName == "proctor/inventory-report":
			// Every number of its reward.json, in the result and the file.
			var file map[string]float64
			json.Unmarshal(mustRead(t, filepath.Join(trial, "verifier", "reward.json")), &file)
			if tr.VerifierResult.Rewards["files_passed"] != 3 || file["total_ok"] != 1 || !strings.Contains(string(mustRead(t, filepath.Join(trial, "verifier", "test-stdout.txt"))), "total=1") {
				t.Errorf("inventory-report's rewards %v, reward.json %v", tr.VerifierResult.Rewards, file)
			}
		default:
			if got := strings.TrimSpace(string(mustRead(t, filepath.Join(trial, "verifier", "reward.txt")))); got != w {
				t.Errorf("%s: verifier/reward.txt %q, want %s", tr.TaskName, got, w)
			}
		}
	}
	if len(seen) != 6 {
		t.Errorf("trials of %d tasks: %v", len(seen), seen)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
