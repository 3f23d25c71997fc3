package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
)

// TestWebApp drives the web app in Chromium against a real dev instance (web/e2e/app.mjs): sign
// in, the jobs list, a job with its histogram and attempts, a trace to its reward, both themes,
// sign out; axe-core audits every page. Screenshots (1400×900) land in $PROCTOR_SCREENSHOTS, or
// a temporary directory.
func TestWebApp(t *testing.T) {
	web := testenv.WebDeps(t)
	chromium := testenv.Chromium(t)
	t.Setenv("SCRIPTED_KEY", "scripted-key")
	dataDir := t.TempDir()
	dev := startDev(t, dataDir)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}

	// A slow model, for a trace to follow live: two calls, a second and a half each.
	slowSrv, _ := scriptedOpenAI(t, []map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}},
		{"name": "add_todo", "arguments": map[string]any{"title": "walk the dog"}}}, 1500*time.Millisecond)
	addScriptedModel(t, c, dataDir, nil, "slow", slowSrv.URL)
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "live-demo", "tasks": []any{map[string]any{
		"name": "add-two", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk", "walk the dog"}}}}}, &up)

	// A long trace: 333 tool calls, about 1,000 events.
	calls := make([]map[string]any, 333)
	for i := range calls {
		calls[i] = map[string]any{"name": "list_todos", "arguments": map[string]any{}}
	}
	longSrv, _ := scriptedOpenAI(t, calls, 0)
	long := addScriptedModel(t, c, dataDir, nil, "long", longSrv.URL)
	var longRun struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": long, "max_steps": 400}, &longRun); code != 201 {
		t.Fatalf("the long run = %d", code)
	}
	c.waitJob(longRun.JobID, nil)
	var events struct {
		Events []struct{ Seq int } `json:"events"`
	}
	c.call("GET", "/v2/trace/"+longRun.TraceID+"/events", nil, &events)
	if len(events.Events) < 1000 {
		t.Fatalf("the long trace has %d events, want 1,000 or more", len(events.Events))
	}

	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	var launched struct {
		JobID string `json:"job_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("demo"), "model_ids": []string{oracle},
		"name": "web demo"}, &launched); code != 200 && code != 201 {
		t.Fatalf("launch = %d", code)
	}
	if sum := c.waitJob(launched.JobID, nil); sum.Completed != 3 {
		t.Fatalf("the demo job: %+v", sum)
	}

	// The demo's review checklist (no route sets one: the store does).
	store, err := models.Open(t.Context(), "sqlite:"+filepath.Join(dataDir, "proctor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	caller, err := store.AuthenticateAPIKey(t.Context(), c.key)
	if err != nil {
		t.Fatal(err)
	}
	demo, _ := uuid.Parse(c.tasksetID("demo"))
	if err := store.SetTasksetStages(t.Context(), caller, demo, []string{"write", "qa"}); err != nil {
		t.Fatal(err)
	}

	shots := os.Getenv("PROCTOR_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	// The script's own steps wait with Playwright's timeouts and fail with the step's name; this
	// only stops a browser that hangs, generously so on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(web, "e2e", "app.mjs"))
	cmd.Env = append(os.Environ(), "PROCTOR_URL="+dev.info.APIURL, "PROCTOR_KEY="+dev.info.APIKey, "JOB_ID="+launched.JobID,
		"JOB_NAME=web demo", "CHROMIUM="+chromium, "SHOTS="+shots, "LONG_TRACE="+longRun.TraceID, "LONG_EVENTS="+fmt.Sprint(len(events.Events)))
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		OK       bool
		Failures []string
		Timings  map[string]int
	}
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil {
		t.Fatalf("the browser run: %v\n%s", err, out)
	}
	t.Logf("browser steps (ms): %v; screenshots in %s", res.Timings, shots)
	for _, f := range res.Failures {
		t.Error(f)
	}
	if err != nil && len(res.Failures) == 0 {
		t.Errorf("the browser run: %v\n%s", err, out)
	}
}
