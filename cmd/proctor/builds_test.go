package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/internal/testenv"
)

// outOfTreeEnvironment writes a Go environment the way an author outside this repository has
// one: its own module requiring only the envserver module, its dependencies vendored (go mod
// vendor) because the module is not published. It is the todo example's code.
func outOfTreeEnvironment(t *testing.T) string {
	t.Helper()
	return outOfTreeExample(t, "todo", true)
}

// outOfTreeExample is the example environment name (its main.go and the package it serves,
// NAMEenv, without tests) as an out-of-tree module: the package moves into the new module.
// Unvendored, its go.mod's replace names this checkout's envserver, outside the upload.
func outOfTreeExample(t *testing.T, name string, vendor bool) string {
	t.Helper()
	dir := filepath.Join(testenv.ModuleRoot(t), "examples", "environments", name)
	pkg := name + "env"
	files := map[string][]byte{}
	for _, rel := range []string{"main.go", pkg} {
		err := filepath.WalkDir(filepath.Join(dir, rel), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
				return err
			}
			body, err := os.ReadFile(p)
			r, _ := filepath.Rel(dir, p)
			files[filepath.ToSlash(r)] = bytes.ReplaceAll(body,
				[]byte(`"github.com/proctorhq/proctor/examples/environments/`+name+`/`+pkg+`"`), []byte(`"example.com/todoenv/`+pkg+`"`))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return outOfTreeFiles(t, files, vendor)
}

// outOfTreeModule is an out-of-tree Go environment whose main.go is src, vendored.
func outOfTreeModule(t testing.TB, src []byte) string {
	t.Helper()
	return outOfTreeFiles(t, map[string][]byte{"main.go": src}, true)
}

// outOfTreeFiles makes a module of files as the README tells an author to: go mod init, a
// requirement of the envserver module replaced by this checkout's copy, go mod tidy, and (when
// vendor) go mod vendor, which copies it into vendor/ so that the upload carries it.
func outOfTreeFiles(t testing.TB, files map[string][]byte, vendor bool) string {
	t.Helper()
	dir := t.TempDir()
	files[".gitignore"] = []byte("*.bin\n")
	for name, body := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	envserver := filepath.Join(testenv.ModuleRoot(t), "envserver")
	commands := [][]string{
		{"mod", "init", "example.com/todoenv"},
		{"mod", "edit", "-require", "github.com/proctorhq/proctor/envserver@v0.0.0", "-replace", "github.com/proctorhq/proctor/envserver=" + envserver},
		{"mod", "tidy"},
	}
	if vendor {
		commands = append(commands, []string{"mod", "vendor"})
	}
	for _, args := range commands {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), "GOFLAGS=", "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return dir
}

// tarGz packs all of dir as a gzipped tar, as the CLI does.
func tarGz(t *testing.T, dir string) []byte {
	t.Helper()
	b, _, err := packSource(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deploy uploads an archive and triggers its build; it returns the build as triggered.
func (a api) deploy(archive []byte, body map[string]any) (build map[string]any) {
	a.t.Helper()
	var up struct {
		UploadURL string `json:"upload_url"`
		BuildID   string `json:"build_id"`
	}
	if code := a.call("POST", "/v2/builds/upload-url", nil, &up); code != 200 {
		a.t.Fatalf("upload-url = %d", code)
	}
	req, _ := http.NewRequest(http.MethodPut, up.UploadURL, bytes.NewReader(archive))
	req.Header.Set("Content-Type", "application/gzip")
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode >= 300 {
		a.t.Fatalf("PUT the source: %v %v", res, err)
	}
	res.Body.Close()
	body["build_id"] = up.BuildID
	path := "/v2/builds/trigger"
	if _, ok := body["registry_id"]; ok {
		path = "/v2/builds/trigger-direct" // the older clients' alias
	}
	if code := a.call("POST", path, body, &build); code != 200 {
		a.t.Fatalf("trigger = %d", code)
	}
	return build
}

// waitBuild polls a build until it ends. It fails only when neither the build's status nor its
// log moved for buildStall: a compile on a busy machine writes no log line while it runs.
func (a api) waitBuild(id string) map[string]any {
	a.t.Helper()
	var b map[string]any
	testenv.Wait(a.t, "build "+id, buildStall, func() (bool, string) {
		b = nil
		a.call("GET", "/v2/builds/"+id+"/status", nil, &b)
		var logs struct{ Logs []struct{ Seq int } }
		a.call("GET", "/v2/builds/"+id+"/logs?limit=5000", nil, &logs)
		switch b["status"] {
		case "succeeded", "failed", "cancelled":
			return true, ""
		}
		return false, fmt.Sprintf("%v, %d log lines", b["status"], len(logs.Logs))
	}, nil)
	return b
}

// buildStall is how long a build may show no progress: one step of it (a Go compile of a cold
// package, an image unpacked) can take minutes on a loaded 2-core machine without a log line.
const buildStall = 5 * time.Minute

// testRedeployRunsTheNewBuild: a researcher fixes their environment and deploys again; the next
// run uses the new build, with nothing else to do. A deploy with --no-promote says that runs still
// use the old one, and set-latest switches them.
func testRedeployRunsTheNewBuild(t *testing.T, c api, envDir, oracle string) {
	t.Helper()
	deploy := func(args ...string) string {
		t.Helper()
		out, err := c.cli(append([]string{"env", "deploy", envDir, "--name", "todo-cli"}, args...)...)
		if err != nil {
			t.Fatalf("env deploy %v: %v\n%s", args, err, out)
		}
		return out
	}
	lastTrace := ""
	ranImage := func() string {
		t.Helper()
		tr, logs := c.runToEnd(map[string]any{"task_version_id": c.addTask("redeploy", "todo-cli"), "model_id": oracle})
		if tr.Status != "completed" {
			t.Fatalf("an attempt on todo-cli = %+v", tr)
		}
		lastTrace = tr.ID
		return regexp.MustCompile(`todo-cli:\d+`).FindString(logs)
	}
	if out := deploy(); !strings.Contains(out, "latest: build 2 of todo-cli; new runs use it") {
		t.Errorf("a second deploy did not say it is the latest:\n%s", out)
	}
	if img := ranImage(); img != "todo-cli:2" {
		t.Errorf("after deploying build 2 an attempt ran %q, want todo-cli:2", img)
	}
	out := deploy("--no-promote")
	if !strings.Contains(out, "not latest (--no-promote): new runs of todo-cli still use build 2 (todo-cli:2)") {
		t.Errorf("a deploy with --no-promote did not say which build runs:\n%s", out)
	}
	if img := ranImage(); img != "todo-cli:2" {
		t.Errorf("after a deploy with --no-promote an attempt ran %q, want todo-cli:2", img)
	}
	third := regexp.MustCompile(`set-latest (\S+)`).FindStringSubmatch(out)
	if third == nil {
		t.Fatalf("no set-latest hint in:\n%s", out)
	}
	if set, err := c.cli("env", "set-latest", third[1][:8]); err != nil || !strings.Contains(set, "latest: build 3 of todo-cli") {
		t.Errorf("env set-latest: %v\n%s", err, set)
	}
	if img := ranImage(); img != "todo-cli:3" {
		t.Errorf("after set-latest an attempt ran %q, want todo-cli:3", img)
	}
	// proctor trace says which build the attempt ran.
	if shown, err := c.cli("trace", lastTrace); err != nil || !strings.Contains(shown, "environment todo-cli, build 3 (sha256:") {
		t.Errorf("proctor trace does not name the build that ran: %v\n%s", err, shown)
	} else if !regexp.MustCompile(`evaluate +todos_exist → reward 1: \d+ of \d+ todos`).MatchString(shown) {
		t.Errorf("proctor trace does not give the evaluation's own words:\n%s", shown)
	}
	if list, err := c.cli("env", "list", "--search", "todo-cli"); err != nil || !regexp.MustCompile(`(?m)^todo-cli\s+2\s+`+third[1]).MatchString(list) {
		t.Errorf("env list: %v; want todo-cli with 2 scenarios and build 3 latest:\n%s", err, list)
	}
	if _, err := c.cli("env", "set-latest", uuid.NewString()); err == nil ||
		!strings.Contains(err.Error(), "404") {
		t.Errorf("set-latest of an unknown build: %v, want a 404", err)
	}
}

// addTask uploads, into taskset, an add-todos task over env whose validation earns 1.0, and
// returns its version id.
func (a api) addTask(taskset, env string) string {
	a.t.Helper()
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	if code := a.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": taskset, "tasks": []any{map[string]any{
		"name": "add", "env": env, "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}},
		"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}}}}, &up); code != 201 {
		a.t.Fatalf("upload a task over %s = %d", env, code)
	}
	return up.TaskVersionIDs[0]
}

// twoTodoCalls are the tool calls that solve addTwoTodosTask's task, for scripted models.
var twoTodoCalls = []map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}},
	{"name": "add_todo", "arguments": map[string]any{"title": "walk the dog"}}}

// addTwoTodosTask uploads to taskset a task named "add" over the todo environment that asks for
// two todos, "buy milk" and "walk the dog", and returns its version id.
func (a api) addTwoTodosTask(taskset string) string {
	a.t.Helper()
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	if code := a.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": taskset, "tasks": []any{map[string]any{
		"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk", "walk the dog"}}}}}, &up); code != 201 {
		a.t.Fatalf("upload the two-todos task = %d", code)
	}
	return up.TaskVersionIDs[0]
}

// runToEnd runs one attempt (the body of POST /v2/rollouts/run) and returns its trace and
// worker log once it ended.
func (a api) runToEnd(body map[string]any) (traceRow, string) {
	a.t.Helper()
	var launched struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := a.call("POST", "/v2/rollouts/run", body, &launched); code != 201 {
		a.t.Fatalf("run = %d", code)
	}
	a.waitJob(launched.JobID, nil)
	var tr traceRow
	a.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr)
	var logs struct{ Logs string }
	a.call("GET", "/v2/trace/"+launched.TraceID+"/logs", nil, &logs)
	return tr, logs.Logs
}

func TestDeployAnEnvironmentFromSource(t *testing.T) { oneStore(t, "postgres", testDeployFromSource) }

// testDeployFromSource deploys an environment written outside this repository through the API,
// runs an oracle attempt on its image, and checks that hostile sources fail cleanly.
func testDeployFromSource(t *testing.T, storeArgs []string, dbURL string) {
	dataDir := t.TempDir()
	// At info level, so that the scan for the build secret below reads a full log.
	dev := startDev(t, dataDir, append([]string{"--build-goproxy", "off", "--log-level", "info",
		"--build-max-source-bytes", fmt.Sprint(32 << 20), "--max-upload-bytes", fmt.Sprint(16 << 20)}, storeArgs...)...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")

	start := time.Now()
	triggered := c.deploy(tarGz(t, outOfTreeEnvironment(t)), map[string]any{"name": "todo-oot", "source": "test"})
	b := c.waitBuild(triggered["id"].(string))
	t.Logf("build of an out-of-tree environment: %s (status %v)", time.Since(start).Round(time.Millisecond), b["status"])
	if b["status"] != "succeeded" || !strings.HasPrefix(b["digest"].(string), "sha256:") || b["image_name"] != "todo-oot:1" {
		t.Fatalf("build = %v", b)
	}
	lock, _ := b["lock"].(map[string]any)
	if tools, _ := lock["tools"].([]any); len(tools) < 4 || lock["transport"] != "stdio" {
		t.Errorf("lock = %v", lock)
	}
	// Each tool comes with its arguments' schema, and the hubs' dispatchers with their role.
	roles := map[string]any{}
	tools, _ := lock["tools"].([]any)
	for _, tool := range tools {
		tm, _ := tool.(map[string]any)
		if schema, _ := tm["input_schema"].(map[string]any); schema["type"] != "object" {
			t.Errorf("tool %v has no input schema", tm["name"])
		}
		roles[fmt.Sprint(tm["name"])] = tm["role"]
	}
	if roles["setup"] != "setup" || roles["evaluate"] != "evaluate" || roles["add_todo"] != nil {
		t.Errorf("tool roles = %v, want setup and evaluate on the dispatchers and none on add_todo", roles)
	}
	registry := b["registry_id"].(string)
	var scenarios []struct{ Name string }
	c.call("GET", "/v2/registry/"+registry+"/scenarios", nil, &scenarios)
	if len(scenarios) != 2 {
		t.Errorf("discovered scenarios = %+v, want add-todos and complete-todos", scenarios)
	}
	// The deprecated discover-scenarios route runs the image again.
	var again []struct {
		Slug    string `json:"slug"`
		BuildID string `json:"build_id"`
	}
	if code := c.call("POST", "/v2/builds/"+b["id"].(string)+"/discover-scenarios", nil, &again); code != 200 || len(again) != 2 || again[0].Slug == "" || again[0].BuildID != b["id"] {
		t.Errorf("discover-scenarios = %d %+v", code, again)
	}

	// The source can be browsed, previewed and downloaded file by file.
	id := b["id"].(string)
	var root struct {
		Status     string
		Entries    []struct{ Path, Name, Type string }
		NextCursor *string `json:"next_cursor"`
	}
	c.call("GET", "/v2/builds/"+id+"/source", nil, &root)
	names := map[string]string{}
	for _, e := range root.Entries {
		names[e.Name] = e.Type
	}
	if root.Status != "ready" || names["main.go"] != "file" || names["vendor"] != "dir" || names["go.mod"] != "file" {
		t.Errorf("the source's root = %+v", root)
	}
	c.call("GET", "/v2/builds/"+id+"/source?limit=1", nil, &root)
	if len(root.Entries) != 1 || root.NextCursor == nil {
		t.Fatalf("a page of one = %+v", root)
	}
	first := root.Entries[0].Name
	c.call("GET", "/v2/builds/"+id+"/source?limit=1&cursor="+*root.NextCursor, nil, &root)
	if len(root.Entries) != 1 || root.Entries[0].Name <= first {
		t.Errorf("the next page = %+v after %s", root, first)
	}
	var preview struct {
		Content     string
		Size        int
		ContentHash string `json:"content_hash"`
		ContentType string `json:"content_type"`
	}
	if code := c.call("GET", "/v2/builds/"+id+"/source/preview?path=main.go", nil, &preview); code != 200 ||
		!strings.Contains(preview.Content, "package main") || !strings.HasPrefix(preview.ContentHash, "sha256:") || preview.Size != len(preview.Content) {
		t.Errorf("preview main.go = %d %+v", code, preview)
	}
	for path, want := range map[string]int{"nothing.go": 404, "../../etc/passwd": 422, "vendor": 404, "": 422} {
		if code := c.call("GET", "/v2/builds/"+id+"/source/preview?path="+path, nil, nil); code != want {
			t.Errorf("preview %q = %d, want %d", path, code, want)
		}
	}
	var dl struct{ URL string }
	c.call("GET", "/v2/builds/"+id+"/source/download?path=go.mod", nil, &dl)
	if res, err := http.Get(dl.URL); err != nil || res.StatusCode != 200 {
		t.Errorf("download go.mod: %v %v", res, err)
	} else {
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.HasPrefix(string(got), "module example.com/todoenv") {
			t.Errorf("downloaded go.mod = %.100s", got)
		}
	}

	// The built workspace (the image's working directory) can be read and downloaded.
	for path, want := range map[string]int{"env": 422, "nope": 404} {
		if code := c.call("GET", "/v2/builds/"+id+"/workspace/preview?path="+path, nil, nil); code != want {
			t.Errorf("workspace preview %s = %d, want %d", path, code, want)
		}
	}
	req, _ := http.NewRequest("GET", c.base+"/v2/builds/"+id+"/workspace/download", nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("workspace download: %v %v", res, err)
	} else {
		gzr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Fatalf("the workspace is not a tar.gz: %v", err)
		}
		if h, err := tar.NewReader(gzr).Next(); err != nil || h.Name != "env" || h.Size < 1<<20 {
			t.Errorf("the workspace's first entry: %+v %v", h, err)
		}
		res.Body.Close()
	}

	// The uploaded source can be downloaded back through the environment.
	var src struct {
		DownloadURL string `json:"download_url"`
		BuildID     string `json:"build_id"`
	}
	if code := c.call("GET", "/v2/registry/"+registry+"/source-url", nil, &src); code != 200 || src.BuildID != b["id"] {
		t.Fatalf("source-url = %d %+v", code, src)
	}
	if res, err := http.Get(src.DownloadURL); err != nil || res.StatusCode != 200 {
		t.Errorf("download the source: %v %v", res, err)
	} else {
		gzr, err := gzip.NewReader(res.Body)
		if err != nil {
			t.Errorf("the source is not the uploaded tar.gz: %v", err)
		} else if h, err := tar.NewReader(gzr).Next(); err != nil || h.Name == "" {
			t.Errorf("the source's first entry: %v %v", h, err)
		}
		res.Body.Close()
	}
	var list struct {
		Builds []map[string]any
		Total  int
	}
	c.call("GET", "/v2/builds?registry_id="+registry, nil, &list)
	if list.Total != 1 || list.Builds[0]["id"] != b["id"] {
		t.Errorf("builds of the environment = %+v", list)
	}

	// An attempt on a task of that environment runs its image and earns 1.0.
	version := c.addTask("built", "todo-oot")
	tr, logs := c.runToEnd(map[string]any{"task_version_id": version, "model_id": oracle})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
		t.Errorf("an attempt on the built image = %+v", tr)
	}
	if !strings.Contains(logs, "todo-oot:1 /app/env") {
		t.Errorf("the worker log does not show the image run:\n%s", logs)
	}

	// A second build of the same environment (through the older alias) does not replace the
	// latest until set-latest; cancelling a finished build returns it as it ended.
	// (name and registry_id may both be given when they agree; runtime_provider is any of the
	// sandbox providers.)
	ootSource := tarGz(t, outOfTreeEnvironment(t))
	second := c.waitBuild(c.deploy(ootSource, map[string]any{"registry_id": registry, "name": "todo-oot", "runtime_provider": "container"})["id"].(string))
	if second["status"] != "succeeded" || second["version"] != 2.0 {
		t.Fatalf("second build = %v", second)
	}
	// The same files again (written anew, at other times) are not compiled again: the worker's
	// build cache has their image.
	var secondLog struct{ Logs []struct{ Line string } }
	c.call("GET", "/v2/builds/"+second["id"].(string)+"/logs?limit=5000", nil, &secondLog)
	if second["digest"] != b["digest"] || !slices.ContainsFunc(secondLog.Logs, func(l struct{ Line string }) bool {
		return strings.HasPrefix(l.Line, "build cache: this worker built the same source") && strings.Contains(l.Line, b["digest"].(string))
	}) {
		t.Errorf("a second build of the same source = %v, want digest %v, its log saying the cached image was reused: %+v", second, b["digest"], secondLog.Logs)
	}
	var reg struct {
		LatestBuildID string `json:"latest_build_id"`
	}
	c.call("GET", "/v2/registry/"+registry, nil, &reg)
	if reg.LatestBuildID != b["id"] {
		t.Errorf("latest after a second build = %s, want the first %s", reg.LatestBuildID, b["id"])
	}
	if code := c.call("POST", "/v2/builds/"+second["id"].(string)+"/set-latest", nil, nil); code != 200 {
		t.Errorf("set-latest = %d", code)
	}
	c.call("GET", "/v2/registry/"+registry, nil, &reg)
	if reg.LatestBuildID != second["id"] {
		t.Errorf("latest after set-latest = %s, want %s", reg.LatestBuildID, second["id"])
	}
	// name and registry_id that name different environments are refused, saying which is which.
	var up3 struct {
		UploadURL string `json:"upload_url"`
		BuildID   string `json:"build_id"`
	}
	c.call("POST", "/v2/builds/upload-url", nil, &up3)
	if req, _ := http.NewRequest(http.MethodPut, up3.UploadURL, bytes.NewReader(ootSource)); req != nil {
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}
	if code, body := c.raw("POST", "/v2/builds/trigger", map[string]any{"build_id": up3.BuildID, "registry_id": registry, "name": "todo-cli"}); code != 422 ||
		!strings.Contains(body, `registry_id names the environment \"todo-oot\"`) {
		t.Errorf("trigger with a name and a registry_id that disagree = %d %s, want 422 naming todo-oot", code, body)
	}
	// A runtime_provider no sandbox provider answers to is taken at trigger and fails the build.
	lambda := c.waitBuild(c.deploy(ootSource, map[string]any{"name": "todo-lambda", "runtime_provider": "lambda"})["id"].(string))
	if lambda["status"] != "failed" || !strings.Contains(fmt.Sprint(lambda["error_message"]), `runtime_provider "lambda" is none this platform runs: process, container, kubernetes`) {
		t.Errorf("a build for runtime_provider lambda = %v", lambda)
	}
	// runtime_config.image runs a named build instead of the latest; an unknown one fails clearly.
	for _, tc := range []struct{ image, status, log string }{
		{"todo-oot:1", "completed", "todo-oot:1 /app/env"},
		// Both builds of the same source have the same digest: by digest, the newest runs.
		{b["digest"].(string), "completed", "todo-oot:2 /app/env"},
		{"todo-oot:9", "error", ""},
	} {
		tr, logs := c.runToEnd(map[string]any{"task_version_id": version, "model_id": oracle, "runtime_config": map[string]any{"image": tc.image}})
		if tr.Status != tc.status || (tc.log != "" && !strings.Contains(logs, tc.log)) ||
			(tc.status == "error" && !strings.Contains(tr.Error, "is no succeeded build")) {
			t.Errorf("image %s: %+v\n%s", tc.image, tr, logs)
		}
	}
	var cancelled map[string]any
	if code := c.call("POST", "/v2/builds/"+second["id"].(string)+"/cancel", nil, &cancelled); code != 200 || cancelled["status"] != "succeeded" {
		t.Errorf("cancel of a finished build = %d %v", code, cancelled)
	}

	// The upload URL writes once: once the build has read the source, a PUT to the same URL is
	// refused (412), and neither the build's source nor the answer to a repeated trigger changes.
	var up struct {
		UploadURL string `json:"upload_url"`
		BuildID   string `json:"build_id"`
	}
	c.call("POST", "/v2/builds/upload-url", nil, &up)
	original := tarGz(t, outOfTreeEnvironment(t))
	for i, body := range [][]byte{original, []byte("replaced after the build")} {
		if i == 1 {
			var kept map[string]any
			if code := c.call("POST", "/v2/builds/trigger", map[string]any{"build_id": up.BuildID, "name": "todo-once"}, &kept); code != 200 {
				t.Fatalf("trigger = %d", code)
			}
			if b := c.waitBuild(up.BuildID); b["status"] != "succeeded" {
				t.Fatalf("build = %v", b)
			}
		}
		req, _ := http.NewRequest(http.MethodPut, up.UploadURL, bytes.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("PUT %d: %v", i, err)
		}
		res.Body.Close()
		if want := []int{200, 412}[i]; res.StatusCode != want {
			t.Errorf("PUT %d to the upload URL = %d, want %d", i, res.StatusCode, want)
		}
	}
	var retriggered map[string]any
	if code := c.call("POST", "/v2/builds/trigger", map[string]any{"build_id": up.BuildID, "name": "todo-once"}, &retriggered); code != 200 || retriggered["id"] != up.BuildID || retriggered["status"] != "succeeded" {
		t.Errorf("a repeated trigger after the upload was consumed = %d %v", code, retriggered)
	}
	var srcURL struct {
		DownloadURL string `json:"download_url"`
	}
	c.call("GET", "/v2/registry/"+retriggered["registry_id"].(string)+"/source-url?build_id="+up.BuildID, nil, &srcURL)
	if res, err := http.Get(srcURL.DownloadURL); err != nil {
		t.Errorf("download the build's source: %v", err)
	} else {
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !bytes.Equal(got, original) {
			t.Errorf("the build's source changed after its upload URL was used again (%d bytes, want %d)", len(got), len(original))
		}
	}

	// The CLI deploys a directory (its .gitignore honoured) as a newcomer would.
	envDir := outOfTreeEnvironment(t)
	os.WriteFile(filepath.Join(envDir, "notes.bin"), bytes.Repeat([]byte("x"), 1<<20), 0o644)
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"env", "deploy", envDir, "--name", "todo-cli", "--api-url", dev.info.APIURL, "--api-key", dev.info.APIKey}, &out, &errOut)
	t.Logf("$ proctor env deploy %s --name todo-cli\n%s%s", filepath.Base(envDir), out.String(), errOut.String())
	if err != nil || !strings.Contains(out.String(), "succeeded") || !strings.Contains(out.String(), "add-todos") || !strings.Contains(out.String(), "todo-cli:1") ||
		!strings.Contains(out.String(), "latest: build 1 of todo-cli; new runs use it") {
		t.Errorf("env deploy: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "1.0 MB") || !strings.Contains(out.String(), "packed") {
		t.Errorf("env deploy packed what .gitignore leaves out:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "   go build: module .") || !strings.Contains(out.String(), "   image todo-cli:1 (sha256:") {
		t.Errorf("env deploy did not show the build's log:\n%s", out.String())
	}
	testRedeployRunsTheNewBuild(t, c, envDir, oracle)
	testAgentSeesScreenshots(t, c, dataDir, storeArgs)
	testDeployChecksScenarioCalls(t, c)

	// A source that escapes its archive, and one that does not compile, fail with a reason.
	var slip bytes.Buffer
	gz := gzip.NewWriter(&slip)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: "../../escaped.go", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
	tw.Write([]byte("x"))
	tw.Close()
	gz.Close()
	bad := c.waitBuild(c.deploy(slip.Bytes(), map[string]any{"name": "slip"})["id"].(string))
	if bad["status"] != "failed" || !strings.Contains(bad["error_message"].(string), "escapes the archive") {
		t.Errorf("a zip-slip source = %v", bad)
	}
	if code := c.call("POST", "/v2/builds/"+bad["id"].(string)+"/discover-scenarios", nil, nil); code != 409 {
		t.Errorf("discover-scenarios of a failed build = %d, want 409", code)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "escaped.go")); err == nil {
		t.Error("a zip-slip entry was written outside the build dir")
	}
	// A symlink that leads out, and a decompression bomb (64 MiB of zeros, 64 KiB packed, over
	// the 32 MiB the server was given), fail the build; an upload over the PUT cap is refused.
	outside := t.TempDir()
	for name, members := range map[string][]tar.Header{
		"symlink": {{Name: "lnk", Typeflag: tar.TypeSymlink, Linkname: outside}, {Name: "lnk/planted.go", Typeflag: tar.TypeReg, Mode: 0o644, Size: 1}},
		"bomb":    {{Name: "zeros", Typeflag: tar.TypeReg, Mode: 0o644, Size: 64 << 20}},
	} {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		for _, h := range members {
			tw.WriteHeader(&h)
			tw.Write(make([]byte, h.Size))
		}
		tw.Close()
		gz.Close()
		bad := c.waitBuild(c.deploy(buf.Bytes(), map[string]any{"name": name})["id"].(string))
		want := map[string]string{"symlink": "points outside", "bomb": "more than the"}[name]
		if bad["status"] != "failed" || !strings.Contains(bad["error_message"].(string), want) {
			t.Errorf("a %s source = %v, want failed with %q", name, bad, want)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("the symlink's target got %d entries", len(entries))
	}
	var big struct {
		UploadURL string `json:"upload_url"`
	}
	c.call("POST", "/v2/builds/upload-url", nil, &big)
	req, _ = http.NewRequest(http.MethodPut, big.UploadURL, bytes.NewReader(make([]byte, 17<<20)))
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a 17 MiB upload over a 16 MiB cap: %v %v, want 413", res, err)
	} else {
		res.Body.Close()
	}
	broken := t.TempDir()
	os.WriteFile(filepath.Join(broken, "go.mod"), []byte("module example.com/broken\n\ngo 1.24\n"), 0o644)
	os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { notDefined() }\n"), 0o644)
	bad = c.waitBuild(c.deploy(tarGz(t, broken), map[string]any{"name": "broken"})["id"].(string))
	if bad["status"] != "failed" || !strings.Contains(bad["error_message"].(string), "notDefined") {
		t.Errorf("a source that does not compile = %v", bad)
	}
	// Its log, read a page of one line at a time as a follower would, ends with why it failed.
	var lines []string
	for after, pages := -1, 0; ; pages++ {
		var page struct {
			Status string
			Logs   []struct {
				Seq  int
				Line string
			}
			HasMore bool `json:"has_more"`
			Done    bool
		}
		if code := c.call("GET", fmt.Sprintf("/v2/builds/%s/logs?after_seq=%d&limit=1", bad["id"], after), nil, &page); code != 200 || pages > 100 {
			t.Fatalf("build logs = %d after %d pages", code, pages)
		}
		for _, l := range page.Logs {
			if l.Seq != after+1 {
				t.Fatalf("log line seq %d after %d", l.Seq, after)
			}
			lines, after = append(lines, l.Line), l.Seq
		}
		if page.Done {
			break
		}
		if !page.HasMore {
			t.Fatalf("a page of an ended build's log neither done nor has_more: %+v", page)
		}
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "build ") || !strings.Contains(lines[len(lines)-1], "build failed:") || !strings.Contains(strings.Join(lines, "\n"), "notDefined") {
		t.Errorf("the failed build's log:\n%s", strings.Join(lines, "\n"))
	}
	for q, want := range map[string]int{"after_seq=-2": 422, "limit=0": 422, "limit=5001": 422, "after_seq=x": 422} {
		if code := c.call("GET", "/v2/builds/"+bad["id"].(string)+"/logs?"+q, nil, nil); code != want {
			t.Errorf("logs?%s = %d, want %d", q, code, want)
		}
	}
	if code := c.call("GET", "/v2/builds/"+uuid.NewString()+"/logs", nil, nil); code != 404 {
		t.Errorf("logs of an unknown build = %d, want 404", code)
	}
	out.Reset()
	if err := run(t.Context(), []string{"env", "deploy", broken, "--api-url", dev.info.APIURL, "--api-key", dev.info.APIKey}, &out, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "failed") || !strings.Contains(err.Error(), "notDefined") {
		t.Errorf("env deploy of code that does not compile: %v", err)
	}
	// Triggering without an upload is refused before any work.
	var up2 struct {
		BuildID string `json:"build_id"`
	}
	c.call("POST", "/v2/builds/upload-url", nil, &up2)
	if code := c.call("POST", "/v2/builds/trigger", map[string]any{"build_id": up2.BuildID, "name": "empty"}, nil); code != 422 {
		t.Errorf("trigger without an upload = %d, want 422", code)
	}
	deployDockerfile(t, c, dataDir, dbURL, oracle, dev)
}

// deployDockerfile deploys an environment built from a Dockerfile with a RUN step, on a base
// image made here (no registry is reachable), and runs an oracle attempt on it.
func deployDockerfile(t *testing.T, c api, dataDir, dbURL, oracle string, dev *devRun) {
	for _, tool := range []string{"buildah", "runc", "busybox"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.MissingTool(t, tool)
		}
	}
	args, env, err := activities.Buildah(filepath.Join(dataDir, "builds"))
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	busybox, _ := exec.LookPath("busybox")
	bb, err := os.ReadFile(busybox)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(base, "busybox"), bb, 0o755)
	os.WriteFile(filepath.Join(base, "Dockerfile"), []byte("FROM scratch\nCOPY busybox /bin/busybox\n"), 0o644)
	cmd := exec.Command("buildah", append(args, "bud", "--isolation", "oci", "-t", "localhost/bb:1", base)...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make the base image: %v\n%s", err, out)
	}
	ctxDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(ctxDir, "env"), "./examples/environments/todo")
	build.Dir, build.Env = testenv.ModuleRoot(t), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the server: %v\n%s", err, out)
	}
	os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(`FROM localhost/bb:1
ARG GREETING=hello
COPY env /app/env
RUN ["/bin/busybox", "sh", "-c", "/bin/busybox mkdir -p /app/data && echo \"$GREETING from a RUN step\" > /app/data/built.txt"]
RUN --mount=type=secret,id=api_token ["/bin/busybox", "sh", "-c", "/bin/busybox wc -c < /run/secrets/api_token > /app/data/token-length"]
ENTRYPOINT ["/app/env"]
`), 0o644)
	start := time.Now()
	const secret = "sk-proctor-test-0f9e8d7c6b5a"
	triggered := c.deploy(tarGz(t, ctxDir), map[string]any{"name": "todo-df", "build_args": map[string]string{"GREETING": "hi"},
		"build_secrets": map[string]string{"api_token": secret}})
	b := c.waitBuild(triggered["id"].(string))
	t.Logf("Dockerfile build with a RUN step: %s (status %v)", time.Since(start).Round(time.Millisecond), b["status"])
	if b["status"] != "succeeded" || b["image_name"] != "todo-df:1" {
		t.Fatalf("Dockerfile build = %v", b)
	}
	var preview struct{ Content string }
	if code := c.call("GET", "/v2/builds/"+b["id"].(string)+"/workspace/preview?path=app/data/built.txt", nil, &preview); code != 200 || preview.Content != "hi from a RUN step\n" {
		t.Errorf("the RUN step's file = %d %q", code, preview.Content)
	}
	tr, _ := c.runToEnd(map[string]any{"task_version_id": c.addTask("dockerfile", "todo-df"), "model_id": oracle})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
		t.Errorf("an attempt on the Dockerfile image = %+v", tr)
	}

	// The build secret reached its RUN step, and is nowhere else: not in the store's rows, the
	// data dir (the SQLite databases, Temporal's histories, the bucket with the image and the
	// source, the builder's storage), the logs, or any answer.
	if code := c.call("GET", "/v2/builds/"+b["id"].(string)+"/workspace/preview?path=app/data/token-length", nil, &preview); code != 200 || strings.TrimSpace(preview.Content) != fmt.Sprint(len(secret)) {
		t.Errorf("the secret's length as its RUN step saw it = %d %q, want %d", code, preview.Content, len(secret))
	}
	var logs struct{ Logs []struct{ Line string } }
	c.call("GET", "/v2/builds/"+b["id"].(string)+"/logs?limit=5000", nil, &logs)
	seen := false
	for _, l := range logs.Logs {
		seen = seen || strings.Contains(l.Line, "build secrets: api_token")
	}
	if !seen {
		t.Errorf("the build log does not name the secret it used: %+v", logs.Logs)
	}
	var answers strings.Builder
	for _, path := range []string{"/v2/builds/" + b["id"].(string) + "/status", "/v2/builds/" + b["id"].(string) + "/logs?limit=5000", "/v2/builds?registry_id=" + b["registry_id"].(string)} {
		var raw json.RawMessage
		c.call("GET", path, nil, &raw)
		answers.Write(raw)
	}
	triggeredJSON, _ := json.Marshal(triggered)
	answers.Write(triggeredJSON)
	for where, text := range map[string]string{"API answers": answers.String(), "dev's output": dev.out.String() + dev.errOut.String()} {
		if strings.Contains(text, secret) {
			t.Errorf("the build secret appears in %s", where)
		}
	}
	scanDirFor(t, dataDir, secret)
	if dbURL != "" {
		scanPostgresFor(t, dbURL, secret)
	}
}

// scanDirFor fails the test if any file under dir holds needle.
func scanDirFor(t *testing.T, dir, needle string) {
	t.Helper()
	files := 0
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		files++
		if bytes.Contains(b, []byte(needle)) {
			t.Errorf("%s holds the secret", p)
		}
		return nil
	})
	if files < 10 {
		t.Errorf("scanned only %d files under %s", files, dir)
	}
}

// scanPostgresFor fails the test if any row of any table of the database holds needle.
func scanPostgresFor(t *testing.T, dbURL, needle string) {
	t.Helper()
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	if len(tables) < 10 {
		t.Fatalf("found only tables %q", tables)
	}
	for _, table := range tables {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM "`+table+`" t WHERE t::text LIKE '%' || $1 || '%'`, needle).Scan(&n); err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		if n > 0 {
			t.Errorf("%d rows of %s hold the secret", n, table)
		}
	}
}

// The CLI refuses a source with a link out of its folder before uploading it, naming the link
// and what to do; a link within the folder, or one .dockerignore leaves out, is packed.
func TestADeployRefusesALinkOutOfItsFolderBeforeTheUpload(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"here": "main.go", "lib64": "/usr/lib64"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	_, _, err := packUpload(dir)
	if want := filepath.Join(dir, "lib64") + " is a symlink to /usr/lib64, outside the folder"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("packUpload = %v, want an error starting %q", err, want)
	}
	if err := os.WriteFile(filepath.Join(dir, ".dockerignore"), []byte("lib64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, files, err := packUpload(dir); err != nil || files != 2 {
		t.Fatalf("packUpload with lib64 ignored = %d files, %v; want main.go and .dockerignore", files, err)
	}
}

// --agent-config gathers KEY=VALUE (JSON when it parses) and @FILE objects, later ones winning.
func TestTheAgentConfigFlagBuildsOneObject(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.json")
	if err := os.WriteFile(file, []byte(`{"system_prompt": "from the file", "max_turns": 3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	f := agentConfigFlag{}
	for _, v := range []string{"@" + file, "system_prompt=Be brief.", `allowed_tools=["add_*"]`, "temperature=0.2"} {
		if err := f.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if got, want := f.String(), `{"allowed_tools":["add_*"],"max_turns":3,"system_prompt":"Be brief.","temperature":0.2}`; got != want {
		t.Errorf("the agent config = %s, want %s", got, want)
	}
	for _, bad := range []string{"no-equals", "=x", "@" + file + ".missing"} {
		if err := f.Set(bad); err == nil {
			t.Errorf("Set(%q) took it", bad)
		}
	}
}
