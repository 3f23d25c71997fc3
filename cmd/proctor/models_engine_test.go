package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/api/workflowservice/v1"

	ptemporal "github.com/proctorhq/proctor/temporal"
)

// scriptedOpenAI is an OpenAI-compatible chat completions server that answers with the next tool
// call of a script (chosen by how many tool results the request carries), then a final answer.
func scriptedOpenAI(t testing.TB, calls []map[string]any, delay time.Duration) (*httptest.Server, *atomic.Int64) {
	return scriptedOpenAIKeys(t, calls, delay, nil)
}

// addScriptedModel registers, with proctor admin, an OpenAI-compatible model served at url whose
// platform key is $SCRIPTED_KEY, and returns its id.
func addScriptedModel(t testing.TB, c api, dataDir string, storeArgs []string, name, url string, extra ...string) string {
	t.Helper()
	args := append([]string{"admin", "model", "add", "--name", name, "--adapter", "openai", "--base-url", url + "/v1/",
		"--api-key-env", "SCRIPTED_KEY", "--data-dir", dataDir}, extra...)
	if err := run(context.Background(), append(args, storeArgs...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	return c.resolve("/v2/models/resolve?model="+name, "id")
}

// keyLog records the API keys requests came with.
type keyLog struct {
	mu   sync.Mutex
	keys []string
}

func (k *keyLog) add(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, key)
}

// distinct are the keys seen, each once, in order.
func (k *keyLog) distinct() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for _, key := range k.keys {
		if !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

// scriptedOpenAIKeys is scriptedOpenAI that, given keys, takes any key and records it (else
// only the key "scripted-key" is accepted).
func scriptedOpenAIKeys(t testing.TB, calls []map[string]any, delay time.Duration, keys *keyLog) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if keys != nil && strings.HasPrefix(auth, "Bearer ") {
			keys.add(strings.TrimPrefix(auth, "Bearer "))
		} else if auth != "Bearer scripted-key" {
			http.Error(w, `{"error":{"message":"unexpected key"}}`, http.StatusUnauthorized)
			return
		}
		if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
			http.Error(w, `{"error":{"message":"unexpected request"}}`, http.StatusBadRequest)
			return
		}
		requests.Add(1)
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
			Tools []any `json:"tools"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		// Every scripted attempt (a request that offers tools) drives the todo example: the model
		// must be told what the environment says of itself in its initialize result, first in the
		// system prompt.
		if len(req.Tools) > 0 && (len(req.Messages) == 0 || req.Messages[0].Role != "system" || !strings.HasPrefix(fmt.Sprint(req.Messages[0].Content), "A todo list.")) {
			http.Error(w, `{"error":{"message":"the system prompt does not open with the environment's instructions"}}`, http.StatusBadRequest)
			return
		}
		done := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				done++
			}
		}
		select { // a caller that gives up (a cancelled attempt) frees the handler
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		msg := map[string]any{"role": "assistant", "content": "All todos are added."}
		finish := "stop"
		if done < len(calls) {
			args, _ := json.Marshal(calls[done]["arguments"])
			msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
				"id": fmt.Sprintf("call_%d", done), "type": "function",
				"function": map[string]any{"name": calls[done]["name"], "arguments": string(args)}}}}
			finish = "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

func TestRolloutEngineModelsAndLimits(t *testing.T) {
	eachStore(t, testModelsAndLimits)
}

func testModelsAndLimits(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, storeArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	addModel := func(name, url string) string { return addScriptedModel(t, c, dataDir, storeArgs, name, url) }
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "models", "tasks": []any{
		map[string]any{"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk", "walk the dog"}}},
		map[string]any{"name": "gpu", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"x"}},
			"runtime_config": map[string]any{"limits": map[string]any{"startup_timeout_s": 2}, "resources": map[string]any{"gpu": map[string]any{"count": 1, "type": "h100"}}}},
	}}, &up)

	// The OpenAI-compatible adapter drives a whole attempt: tool calls, then a final answer.
	srv, requests := scriptedOpenAI(t, twoTodoCalls, 0)
	scripted := addModel("scripted", srv.URL)
	var run struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": scripted}, &run)
	c.waitJob(run.JobID, nil)
	var tr traceRow
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.StopReason != "done" || tr.Reward == nil || *tr.Reward != 1 {
		t.Fatalf("scripted model attempt = %+v", tr)
	}
	var ev struct {
		Events []struct {
			Kind string
			Text string
			Data map[string]any
		}
	}
	c.call("GET", "/v2/trace/"+run.TraceID+"/events", nil, &ev)
	var seen []string
	for _, e := range ev.Events {
		switch e.Kind {
		case "tool_call":
			seen = append(seen, fmt.Sprintf("call %s %v", e.Text, e.Data["arguments"]))
		case "tool_result":
			seen = append(seen, "result "+e.Text)
		case "assistant_message":
			if e.Text != "" {
				seen = append(seen, "answer "+e.Text)
			}
		}
	}
	want := []string{"call add_todo map[title:buy milk]", "result", "call add_todo map[title:walk the dog]", "result", "answer All todos are added."}
	if len(seen) != len(want) {
		t.Fatalf("events = %q, want %q", seen, want)
	}
	for i := range want {
		if !strings.HasPrefix(seen[i], want[i]) {
			t.Errorf("event %d = %q, want %q", i, seen[i], want[i])
		}
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("the model server saw %d requests, want 3 (one per step)", n)
	}

	// run_timeout_s is honoured: a slow model stops at the deadline, and evaluate still runs.
	slow, _ := scriptedOpenAI(t, twoTodoCalls, 1500*time.Millisecond)
	slowID := addModel("slow", slow.URL)
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": slowID,
		"runtime_config": map[string]any{"limits": map[string]any{"run_timeout_s": 2}}}, &run)
	c.waitJob(run.JobID, nil)
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.StopReason != "timeout" || tr.Reward == nil || *tr.Reward >= 1 {
		t.Errorf("run_timeout_s 2 with a slow model = %+v, want completed by timeout below 1.0", tr)
	}

	// A model registered where nothing listens fails the attempt after a few quick tries, saying
	// where it looked: a model error, not a lost sandbox retried for the run's whole timeout.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL
	gone.Close()
	// proctor admin model add registers it, and warns.
	var warned bytes.Buffer
	if err := runCLI(context.Background(), append([]string{"admin", "model", "add", "--name", "gone", "--adapter", "openai", "--base-url", goneURL + "/v1/",
		"--data-dir", dataDir}, storeArgs...), io.Discard, &warned); err != nil {
		t.Fatal(err)
	}
	if want := "warning: nothing answers at " + goneURL + "/v1/ (connect: connection refused): attempts on model gone end in error until a server does\n"; warned.String() != want {
		t.Errorf("admin model add of a model nothing serves warned %q, want %q", warned.String(), want)
	}
	goneID := c.resolve("/v2/models/resolve?model=gone", "id")
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": goneID}, &run)
	c.waitJob(run.JobID, nil)
	var ended struct {
		traceRow
		Attempt   int        `json:"attempt"`
		CreatedAt time.Time  `json:"created_at"`
		EndTime   *time.Time `json:"end_time"`
	}
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &ended)
	if want := "model gone unreachable at " + goneURL + "/v1/: connection refused (4 tries)"; ended.Status != "error" || ended.Error != want ||
		ended.Attempt != 1 || ended.EndTime == nil {
		t.Errorf("an attempt on a model nothing serves = %+v, want error %q on its first try", ended, want)
	} else {
		t.Logf("an attempt on a model nothing serves ended %s after it was launched", ended.EndTime.Sub(ended.CreatedAt).Round(time.Millisecond))
	}
	// proctor jobs show says why its attempts failed, each message once.
	if out, err := c.cli("jobs", "show", run.JobID); err != nil || !strings.Contains(out, "errors, by message:\n  1 × model gone unreachable at "+goneURL+"/v1/: connection refused (4 tries)\n      e.g. proctor trace "+run.TraceID) {
		t.Errorf("proctor jobs show of the job: %v\n%s", err, out)
	}

	// A GPU request with no GPU worker waits startup_timeout_s, then ends with a clear error.
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	started := time.Now()
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[1], "model_id": oracle}, &run)
	c.waitJob(run.JobID, nil)
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &tr)
	if tr.Status != "error" || !strings.Contains(tr.Error, "sandboxes-gpu-h100") || time.Since(started) < 2*time.Second {
		t.Errorf("GPU request without a GPU worker = %+v after %s", tr, time.Since(started))
	}

	// A task whose args its scenario cannot take is refused at upload, naming the task and the
	// value, rather than found by a job of errored attempts.
	var refused struct {
		Errors []struct{ Location, Message string }
	}
	code, refusedBody := c.raw("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "models", "tasks": []any{
		map[string]any{"name": "ok", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"x"}}},
		map[string]any{"name": "bad-args", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": "not a list"}}}})
	json.Unmarshal([]byte(refusedBody), &refused)
	if code != 422 || len(refused.Errors) != 1 || refused.Errors[0].Location != "body.tasks[1].args.items" ||
		!strings.Contains(refused.Errors[0].Message, `args_schema of scenario "add-todos"`) {
		t.Errorf("the upload of bad args = %d %s, want 422 with one error at body.tasks[1].args.items naming the scenario's args_schema", code, refusedBody)
	}

	// An error of the environment (it rejects the scenario's arguments, given at launch) ends the
	// attempt as error with reward 0, recorded and not retried.
	if code := c.call("POST", "/v2/rollouts/submit", map[string]any{"trace_id": uuid.NewString(), "task": up.TaskVersionIDs[0],
		"agent": map[string]any{"type": "oracle"}, "args": map[string]any{"items": "not a list"}}, &run); code != 201 {
		t.Fatalf("submit with bad args = %d", code)
	}
	c.waitJob(run.JobID, nil)
	var info struct {
		traceRow
		Attempt int `json:"attempt"`
	}
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &info)
	if info.Status != "error" || info.Reward == nil || *info.Reward != 0 || info.Attempt != 1 || !strings.Contains(info.Error, "scenario add-todos") {
		t.Errorf("environment error = %+v, want error at reward 0 after one try", info)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("environment processes left: %s", p)
	}
}

// TestALongAttemptContinuesAsNewWithItsSandbox runs an attempt past one workflow run's share of
// steps (--steps-per-run, 40 here: DefaultStepsPerRun's own count is the workflow tests'): the
// Rollout continues as new with its live sandbox, and the trajectory reads as one attempt of
// every step.
func TestALongAttemptContinuesAsNewWithItsSandbox(t *testing.T) {
	t.Parallel()
	const perRun = 40
	const steps = perRun + 20
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, "--steps-per-run", fmt.Sprint(perRun))
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	var calls []map[string]any
	for range steps {
		calls = append(calls, map[string]any{"name": "list_todos", "arguments": map[string]any{}})
	}
	srv, requests := scriptedOpenAI(t, calls, 0)
	if err := run(context.Background(), []string{"admin", "model", "add", "--name", "busy", "--adapter", "openai", "--base-url", srv.URL + "/v1/",
		"--api-key-env", "SCRIPTED_KEY", "--data-dir", dataDir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "long", "tasks": []any{
		map[string]any{"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}}}}}, &up)
	var launched struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	// Through run_list: the job's RunList hands the worker's steps per run to its attempts.
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("long"), "model_ids": []string{c.resolve("/v2/models/resolve?model=busy", "id")},
		"max_steps": steps}, &launched)
	c.waitJob(launched.JobID, nil)
	launched.TraceID = c.traces(launched.JobID)[0].ID
	var tr traceRow
	c.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.StopReason != "max_steps" {
		t.Fatalf("trace = %+v, want completed at max_steps", tr)
	}
	var ev struct {
		Events []struct {
			Kind    string
			Attempt int
		}
	}
	c.call("GET", "/v2/trace/"+launched.TraceID+"/events", nil, &ev)
	kinds := map[string]int{}
	for _, e := range ev.Events {
		kinds[e.Kind]++
		if e.Attempt != 1 {
			t.Fatalf("an event of try %d: the sandbox was not carried over", e.Attempt)
		}
	}
	if kinds["assistant_message"] != steps || kinds["tool_result"] != steps || kinds["evaluate"] != 1 || requests.Load() != steps {
		t.Errorf("events by kind %v, %d model requests; want %d steps and one evaluation", kinds, requests.Load(), steps)
	}

	tc, err := ptemporal.Dial(context.Background(), dev.info.TemporalAddress, "default", slog.New(slog.DiscardHandler), devKeys(t, dataDir))
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	res, err := tc.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
		Namespace: "default", Query: "WorkflowId = 'rollout/" + launched.TraceID + "'"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Executions) != 2 {
		t.Errorf("%d runs of the attempt's workflow, want 2 (one continue-as-new)", len(res.Executions))
	}
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("environment processes left: %s", p)
	}
}
