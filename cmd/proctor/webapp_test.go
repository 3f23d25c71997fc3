package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/rollouts"
)

// TestWebApp drives the web app in Chromium against a real dev instance (web/e2e/app.mjs): sign
// in, the jobs list, @mentions, a job with its histogram and attempts, a trace to its reward,
// both themes, sign out; axe-core audits every page. Screenshots (1400×900) land in
// $PROCTOR_SCREENSHOTS, or a temporary directory.
func TestWebApp(t *testing.T) {
	t.Parallel()
	web := testenv.WebDeps(t)
	chromium := testenv.Chromium(t)
	dataDir := t.TempDir()
	dev := startDev(t, dataDir)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}

	// A slow model, for a trace to follow live: two calls, a second and a half each.
	slowSrv, _ := scriptedOpenAI(t, twoTodoCalls, 1500*time.Millisecond)
	addScriptedModel(t, c, dataDir, nil, "slow", slowSrv.URL)
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "live-demo", "tasks": []any{map[string]any{
		"name": "add-two", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk", "walk the dog"}}}}}, &up)

	// A long trace: 333 tool calls, about 1,000 events; the first call's argument is a string of
	// two lines, which the trace viewer shows as two lines.
	calls := make([]map[string]any, 333)
	for i := range calls {
		calls[i] = map[string]any{"name": "list_todos", "arguments": map[string]any{}}
	}
	calls[0] = map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "line one\nline two"}}
	longSrv, _ := scriptedOpenAI(t, calls, 0)
	long := addScriptedModel(t, c, dataDir, nil, "long", longSrv.URL)
	var longRun struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": long, "max_steps": 400}, &longRun); code != 201 {
		t.Fatalf("the long run = %d", code)
	}
	// It runs while the other jobs below are made; it is waited for after them.

	store, err := models.Open(t.Context(), "sqlite:"+filepath.Join(dataDir, "proctor.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	// A job whose attempts end in errors of two kinds, beside two that succeed: the environment
	// rejects the scenario's arguments given at launch, and a model answers 400.
	brokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error"}}`)
	}))
	t.Cleanup(brokenSrv.Close)
	addScriptedModel(t, c, dataDir, nil, "broken", brokenSrv.URL)
	errJob := uuid.NewString()
	for i, agentArgs := range []struct {
		agent string
		args  map[string]any
	}{
		{"oracle", map[string]any{"items": "not a list"}}, {"oracle", map[string]any{"items": "not a list"}},
		{"broken", nil}, {"broken", nil}, {"oracle", nil}, {"oracle", nil},
	} {
		body := map[string]any{"trace_id": uuid.NewString(), "job_id": errJob, "task": up.TaskVersionIDs[0], "agent": map[string]any{"type": agentArgs.agent}}
		if agentArgs.args != nil {
			body["args"] = agentArgs.args
		}
		if code := c.call("POST", "/v2/rollouts/submit", body, nil); code != 201 {
			t.Fatalf("submit %d to the errored job = %d", i, code)
		}
	}
	if sum := c.waitJob(errJob, nil); sum.Error != 4 || sum.Completed != 2 {
		t.Fatalf("the errored job: %v, want 4 errors and 2 completed", sum)
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

	c.waitJob(longRun.JobID, nil)
	// A screenshot in the long trace's first step, kept in object storage as the engine keeps a
	// tool result's images, for the trace viewer to show inline.
	shotKey := keepScreenshot(t, store, dataDir, longRun.TraceID)
	var events struct {
		Events []traceEvent `json:"events"`
	}
	// As the page reads them: a try a loaded machine retried shows its superseded rows too.
	c.call("GET", "/v2/trace/"+longRun.TraceID+"/events?include_superseded=true", nil, &events)
	if len(events.Events) < 1000 {
		t.Fatalf("the long trace has %d events, want 1,000 or more", len(events.Events))
	}

	// The demo's review checklist (no route sets one: the store does).
	caller, err := store.AuthenticateAPIKey(t.Context(), c.key)
	if err != nil {
		t.Fatal(err)
	}
	demo, _ := uuid.Parse(c.tasksetID("demo"))
	if err := catalog.Of(store).SetTasksetStages(t.Context(), caller, demo, []string{"write", "qa"}); err != nil {
		t.Fatal(err)
	}

	// Bob, a second member of the team, mentions the dev member (dev@localhost) in a comment on a
	// demo task: the header counts it, the mentions page lists it.
	bob, mentionTask := mentionDev(t, c, dev.info.TeamID, dataDir)

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
		"JOB_NAME=web demo", "CHROMIUM="+chromium, "SHOTS="+shots, "LONG_TRACE="+longRun.TraceID, "LONG_EVENTS="+fmt.Sprint(len(events.Events)),
		"LONG_STEPS="+fmt.Sprint(countSteps(events.Events)), "SHOT_KEY="+shotKey, "ERR_JOB="+errJob,
		"BOB_KEY="+bob.key, "MENTION_TASK="+mentionTask.ID, "MENTION_TASK_NAME="+mentionTask.Name, "MENTION_TASKSET="+demo.String())
	out, err := cmd.CombinedOutput()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var res struct {
		OK       bool
		Failures []string
		Timings  map[string]int
		// LongTrace is what the browser measured of the long trace: time to interactive, scroll.
		LongTrace json.RawMessage
	}
	if jerr := json.Unmarshal([]byte(lines[len(lines)-1]), &res); jerr != nil {
		t.Fatalf("the browser run: %v\n%s", err, out)
	}
	t.Logf("browser steps (ms): %v; screenshots in %s", res.Timings, shots)
	t.Logf("the %d-event trace (%d steps), times in ms: %s", len(events.Events), countSteps(events.Events), res.LongTrace)
	for _, f := range res.Failures {
		t.Error(f)
	}
	if err != nil && len(res.Failures) == 0 {
		t.Errorf("the browser run: %v\n%s", err, out)
	}
}

// mentionTask is the task a mention is on, as the browser test looks for it.
type mentionTask struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// mentionDev adds Bob to the team with a key of his own, and has him write a two-line comment that
// mentions the dev member on the demo taskset's first task. It returns Bob's client and the task.
func mentionDev(t *testing.T, c api, teamID, dataDir string) (api, mentionTask) {
	t.Helper()
	var member, key bytes.Buffer
	if err := run(t.Context(), []string{"admin", "member", "add", "--team", teamID, "--email", "bob@example.com", "--name", "Bob", "--data-dir", dataDir},
		&member, io.Discard); err != nil {
		t.Fatalf("add Bob: %v", err)
	}
	membership := outputField(t, member.String(), "membership")
	if err := run(t.Context(), []string{"admin", "key", "create", "--membership", membership, "--name", "bob", "--data-dir", dataDir}, &key, io.Discard); err != nil {
		t.Fatalf("a key for Bob: %v", err)
	}
	bob := c
	bob.key = outputField(t, key.String(), "key")

	var tasks struct {
		Items []mentionTask `json:"items"`
	}
	c.call("GET", "/v2/tasksets/"+c.tasksetID("demo")+"/tasks", nil, &tasks)
	if len(tasks.Items) == 0 {
		t.Fatal("the demo taskset has no tasks")
	}
	task := tasks.Items[0]
	if code := bob.call("POST", "/v2/tasks/"+task.ID+"/comments", map[string]any{"body": "@dev please check this\nthe second line stays a line"}, nil); code != 200 {
		t.Fatalf("Bob's comment = %d, want 200", code)
	}
	var mentions struct {
		Unread int `json:"unread"`
	}
	c.call("GET", "/v2/mentions", nil, &mentions)
	if mentions.Unread != 1 {
		t.Fatalf("the dev member has %d unread mentions after Bob's comment, want 1", mentions.Unread)
	}
	return bob, task
}

// traceEvent is what the browser test reads of a trace event.
type traceEvent struct {
	Seq     int            `json:"seq"`
	Attempt int            `json:"attempt"`
	Kind    string         `json:"kind"`
	Data    map[string]any `json:"data"`
}

// countSteps counts the rows the trace viewer shows: one per model step (its answer, tool calls
// and results share the step number) and one per event outside any step.
func countSteps(events []traceEvent) int {
	rows := map[string]bool{}
	for _, e := range events {
		step, ok := e.Data["step"].(float64)
		switch {
		case ok && (e.Kind == "assistant_message" || e.Kind == "tool_call" || e.Kind == "tool_result"):
			rows[fmt.Sprintf("%d-s%v", e.Attempt, step)] = true
		default:
			rows[fmt.Sprintf("%d-e%d", e.Attempt, e.Seq)] = true
		}
	}
	return len(rows)
}

// keepScreenshot stores a small PNG in the dev instance's object storage under the key the engine
// gives a tool result's image, and records a tool result of step 1 that carries it, as a tool
// that returns a screenshot would. It returns the object's key.
func keepScreenshot(t *testing.T, store *models.Store, dataDir, traceID string) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 48, 32))
	for x := range 48 {
		for y := range 32 {
			img.Set(x, y, color.RGBA{R: uint8(x * 5), G: 160, B: uint8(y * 7), A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	digest := hex.EncodeToString(sum[:])
	key := "traces/" + traceID + "/images/" + digest + ".png"
	bucket, err := blob.NewLocalBucket(filepath.Join(dataDir, "blobs"), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.Put(t.Context(), key, bytes.NewReader(buf.Bytes()), "image/png"); err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(traceID)
	seq, err := rollouts.Of(store).LatestSeq(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	ev := models.TraceEvent{TraceID: id, Seq: seq + 1, Attempt: 1, Kind: models.EventToolResult, Text: "a screenshot of the list",
		Data: models.EventData(models.ToolResultEventData{Step: 1, CallID: "screenshot", Name: "screenshot",
			Images: []agent.Image{{MIMEType: "image/png", Size: buf.Len(), SHA256: digest, Key: key}}}),
		StartedAt: now, EndedAt: &now}
	if err := rollouts.Of(store).AppendTraceEvents(t.Context(), []models.TraceEvent{ev}); err != nil {
		t.Fatal(err)
	}
	return key
}
