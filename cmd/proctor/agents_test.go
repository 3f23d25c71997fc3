package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/testenv"
)

// scriptedTodoModel is an OpenAI-compatible upstream that plays a model solving an add-todos
// task: asked with no tool result yet, it calls add_todo for each item the prompt lists; once
// it has the results, it answers without tool calls. Asked to write an answer to a file (the
// answer environment's task), it calls the agent's own write_file tool instead. It keeps nothing between requests and
// notes every request it had to refuse (a tool list with the hidden dispatchers, a missing key).
// writeTask is the answer environment's prompt: what to write, and to which file.
var writeTask = regexp.MustCompile(`^Write (\S+) to (\S+) in your working directory\.$`)

// harborHello is the Harbor example hello-world's instruction, which the model answers by
// writing hello.txt in the working directory (the task's WORKDIR, /app) with the agent's own
// write_file.
var harborHello = regexp.MustCompile("^Create a file named `hello.txt` in `/app`")

type scriptedTodoModel struct {
	srv *httptest.Server
	mu  sync.Mutex
	// calls counts the completions answered; problems are the refusals' reasons.
	calls    int
	problems []string
	// delay, when set before the first request, is how long each answer takes.
	delay time.Duration
}

func newScriptedTodoModel(t *testing.T, key string) *scriptedTodoModel {
	m := &scriptedTodoModel{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		body, _ := io.ReadAll(r.Body)
		problem := ""
		switch err := json.Unmarshal(body, &req); {
		case r.URL.Path != "/chat/completions":
			problem = "path " + r.URL.Path
		case r.Header.Get("Authorization") != "Bearer "+key:
			problem = "the provider's key was not sent"
		case err != nil:
			problem = err.Error()
		}
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Function.Name)
		}
		results, prompt := 0, ""
		for _, msg := range req.Messages {
			switch msg.Role {
			case "tool":
				results++
			case "user":
				prompt = fmt.Sprint(msg.Content)
			}
		}
		write := writeTask.FindStringSubmatch(prompt)
		if harborHello.MatchString(prompt) {
			write = []string{prompt, "Hello, world!", "hello.txt"}
		}
		switch {
		case problem != "":
		case len(slices.Compact(slices.Sorted(slices.Values(tools)))) != len(tools):
			problem = fmt.Sprintf("tools %v: a name twice", tools)
		case write != nil && !slices.Contains(tools, "write_file"):
			problem = fmt.Sprintf("tools %v: want the agent's write_file", tools)
		case write == nil && !slices.Contains(tools, "add_todo") || slices.Contains(tools, "evaluate") || slices.Contains(tools, "setup"):
			problem = fmt.Sprintf("tools %v: want the environment's tools without its setup and evaluate dispatchers", tools)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if problem != "" {
			m.problems = append(m.problems, problem)
			http.Error(w, `{"error":{"message":"scripted model: `+problem+`","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		m.calls++
		if m.delay > 0 {
			m.mu.Unlock()
			time.Sleep(m.delay)
			m.mu.Lock()
		}
		message := map[string]any{"role": "assistant", "content": "All the todos are added."}
		switch {
		case results == 0 && write != nil:
			args, _ := json.Marshal(map[string]string{"path": write[2], "content": write[1]})
			message = map[string]any{"role": "assistant", "content": "I will write it.", "tool_calls": []any{map[string]any{"id": "call_0", "type": "function",
				"function": map[string]any{"name": "write_file", "arguments": string(args)}}}}
		case write != nil:
			message["content"] = "The answer is written."
		case results == 0:
			var calls []any
			list, _ := strings.CutPrefix(prompt, "Add these todos to my list: ")
			for i, item := range strings.Split(strings.TrimSuffix(list, "."), "; ") {
				args, _ := json.Marshal(map[string]string{"title": item})
				calls = append(calls, map[string]any{"id": fmt.Sprintf("call_%d", i), "type": "function",
					"function": map[string]any{"name": "add_todo", "arguments": string(args)}})
			}
			message = map[string]any{"role": "assistant", "content": "I will add them.", "tool_calls": calls}
		}
		writeChatCompletion(w, fmt.Sprintf("chatcmpl-%d", m.calls), req.Model, message)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// writeChatCompletion answers a scripted model's chat completion: one choice, message, with the
// usage the scripted models report (100 prompt and 20 completion tokens).
func writeChatCompletion(w http.ResponseWriter, id, model string, message map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "chat.completion", "model": model,
		"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
}

// newScriptedAnthropic is an Anthropic-compatible upstream that solves an add-todos task: asked
// with no tool result yet, it asks for add_todo with each item the prompt lists; then it answers
// in text. It refuses a request without the provider's key.
func newScriptedAnthropic(t *testing.T, key string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != key || json.NewDecoder(r.Body).Decode(&req) != nil || len(req.Messages) == 0 {
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"scripted: unexpected request"}}`)
			return
		}
		content := []any{map[string]any{"type": "text", "text": "All the todos are added."}}
		stop := "end_turn"
		if len(req.Messages) == 1 {
			var prompt string
			json.Unmarshal(req.Messages[0].Content, &prompt)
			list, _ := strings.CutPrefix(prompt, "Add these todos to my list: ")
			content = nil
			for i, item := range strings.Split(strings.TrimSuffix(list, "."), "; ") {
				content = append(content, map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%d", i), "name": "add_todo", "input": map[string]any{"title": item}})
			}
			stop = "tool_use"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "scripted-claude",
			"content": content, "stop_reason": stop, "usage": map[string]any{"input_tokens": 80, "output_tokens": 15}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// agentOutput is what a trace's brought agent wrote, a line "STREAM: LINE" each, from its
// environment logs (the agent's streams are agent:stdout and agent:stderr).
func (a api) agentOutput(traceID string) string {
	a.t.Helper()
	var page struct {
		Logs []struct{ Stream, Log string }
	}
	a.call("GET", "/v2/trace/"+traceID+"/env-logs", nil, &page)
	var out strings.Builder
	for _, l := range page.Logs {
		if strings.HasPrefix(l.Stream, "agent:") {
			fmt.Fprintf(&out, "%s: %s\n", l.Stream, l.Log)
		}
	}
	return out.String()
}

// requests counts the requests that reached the model, answered or refused.
func (m *scriptedTodoModel) requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls + len(m.problems)
}

// agentDev is a dev instance for a brought agent's tests, with the scripted OpenAI-compatible
// model registered as scripted-gpt (priced per token) behind its platform key.
type agentDev struct {
	api
	dataDir string
	model   *scriptedTodoModel
	modelID string
}

// scriptedProviderKey is the scripted models' provider key, $SCRIPTED_AGENT_KEY to the platform.
const scriptedProviderKey = "scripted-provider-key"

func startAgentDev(t *testing.T, storeArgs []string, devArgs ...string) agentDev {
	t.Helper()
	d := agentDev{dataDir: t.TempDir(), model: newScriptedTodoModel(t, scriptedProviderKey)}
	dev := startDev(t, d.dataDir, append(devArgs, storeArgs...)...)
	d.api = api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	d.addModel("scripted-gpt", "openai", d.model.srv.URL, storeArgs, "--input-cost-per-token", "0.000001", "--output-cost-per-token", "0.000002")
	d.modelID = d.resolve("/v2/models/resolve?model=scripted-gpt", "id")
	return d
}

// addModel registers a catalog model name of adapter at url, whose platform key is
// $SCRIPTED_AGENT_KEY, and returns its id.
func (d agentDev) addModel(name, adapter, url string, storeArgs []string, extra ...string) string {
	d.t.Helper()
	args := append([]string{"admin", "model", "add", "--name", name, "--adapter", adapter, "--base-url", url, "--api-key-env", "SCRIPTED_AGENT_KEY", "--data-dir", d.dataDir}, extra...)
	if err := run(context.Background(), append(args, storeArgs...), io.Discard, io.Discard); err != nil {
		d.t.Fatal(err)
	}
	return d.resolve("/v2/models/resolve?model="+name, "id")
}

func TestABroughtAgentSolvesATaskThroughTheGateway(t *testing.T) {
	oneStore(t, "sqlite", testBroughtAgent)
}

// testBroughtAgent deploys the example Go agent (its own module, the official OpenAI and MCP
// SDKs) with `proctor agent deploy`, runs it on an add-todos task against a scripted
// OpenAI-compatible model, and reads the trace: every model call and tool call, in order, with
// usage and cost, and the reward the environment's evaluation gave.
func testBroughtAgent(t *testing.T, storeArgs []string, _ string) {
	d := startAgentDev(t, storeArgs)
	c, model, modelID, dataDir := d.api, d.model, d.modelID, d.dataDir
	agentDir := filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "react")
	deployed, err := c.cli("agent", "deploy", agentDir, "--name", "react")
	if err != nil || !strings.Contains(deployed, "latest: build 1 of react; new runs use it") {
		t.Fatalf("agent deploy: %v\n%s", err, deployed)
	}
	if list, err := c.cli("agent", "list"); err != nil || !regexp.MustCompile(`(?m)^react\s+1\s+sha256:\S+\s+beside\s+1\s`).MatchString(list) {
		t.Errorf("agent list: %v\n%s", err, list)
	}
	// An agent is no environment: it is not listed among them, and its name is its own.
	var envs struct{ Items []struct{ Name string } }
	c.call("GET", "/v2/registry?limit=100", nil, &envs)
	for _, e := range envs.Items {
		if e.Name == "react" {
			t.Errorf("the agent is listed among the environments: %+v", envs.Items)
		}
	}

	task := c.addTask("agents", "todo")
	if code, body := c.raw("POST", "/v2/rollouts/run", map[string]any{"task_version_id": task, "model_id": modelID, "agent": "nobody"}); code != 404 {
		t.Errorf("an unknown agent = %d %s, want 404", code, body)
	}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	if code, body := c.raw("POST", "/v2/rollouts/run", map[string]any{"task_version_id": task, "model_id": oracle, "agent": "react"}); code != 422 ||
		!strings.Contains(body, "oracle answers none") {
		t.Errorf("an agent on the oracle = %d %s, want 422", code, body)
	}
	tr, logs := c.runToEnd(map[string]any{"task_version_id": task, "model_id": modelID, "agent": "react:1"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || tr.StopReason != "done" {
		t.Fatalf("the agent's attempt = %+v (model problems %v)\n%s", tr, model.problems, logs)
	}
	if len(model.problems) > 0 || model.calls != 2 {
		t.Errorf("the scripted model answered %d calls and refused %v, want 2 and none", model.calls, model.problems)
	}
	var evs struct {
		Events []struct {
			Kind string          `json:"kind"`
			Text string          `json:"text"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
	}
	c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &evs)
	var kinds []string
	for _, e := range evs.Events {
		if !strings.HasPrefix(e.Kind, "setup") {
			kinds = append(kinds, e.Kind)
		}
	}
	want := []string{"system_message", "user_message", "assistant_message", "tool_call", "tool_result", "assistant_message", "evaluate"}
	if !slices.Equal(kinds, want) {
		t.Errorf("the trace's events (setup aside) = %v, want %v", kinds, want)
	}
	calls := 0
	for _, e := range evs.Events {
		switch e.Kind {
		case "assistant_message":
			var d struct {
				Usage struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
				Message struct {
					ToolCalls []struct{ ID, Name string } `json:"tool_calls"`
				} `json:"message"`
				Sent *struct {
					Kept     int `json:"kept"`
					Messages []struct {
						Role       string `json:"role"`
						Content    string `json:"content"`
						ToolCallID string `json:"tool_call_id"`
					} `json:"messages"`
					Tools *[]struct{ Name string } `json:"tools"`
				} `json:"sent"`
			}
			json.Unmarshal(e.Data, &d)
			if d.Usage.InputTokens != 100 || d.Usage.OutputTokens != 20 {
				t.Errorf("an assistant event's usage = %+v, want 100/20", d.Usage)
			}
			// What the agent sent: its own system prompt and the task, then (stored against that)
			// the answer it repeated and its tool result, as text.
			switch s := d.Sent; {
			case s == nil:
				t.Errorf("model call %d: its request is not recorded: %s", calls, e.Data)
			case calls == 0 && (s.Kept != 0 || len(s.Messages) != 2 || s.Messages[0].Role != "system" ||
				!strings.Contains(s.Messages[0].Content, "You solve the task with the tools you are given") || s.Messages[1].Role != "user" ||
				s.Tools == nil || !slices.ContainsFunc(*s.Tools, func(t struct{ Name string }) bool { return t.Name == "add_todo" })):
				t.Errorf("the first call sent %+v, want the react agent's system prompt, the task and its tools", s)
			case calls == 1 && (s.Kept != 2 || len(s.Messages) != 2 || s.Messages[0].Role != "assistant" || s.Messages[1].Role != "tool" ||
				s.Messages[1].ToolCallID != "call_0" || s.Tools != nil):
				t.Errorf("the second call sent %+v, want 2 messages kept, then its answer and the tool's result, the same tools", s)
			}
			calls++
		case "tool_call":
			var d struct {
				CallID    string         `json:"call_id"`
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			}
			json.Unmarshal(e.Data, &d)
			if d.CallID != "call_0" || d.Name != "add_todo" || d.Arguments["title"] != "buy milk" {
				t.Errorf("the tool call = %+v, want call_0 add_todo(buy milk), named as the model named it", d)
			}
		}
	}
	if out, err := c.cli("trace", tr.ID); err != nil || !regexp.MustCompile(`(?m)^\s+sent\s+system ".+" · user ".+" · \d+ tool\(s\) offered$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^\s+sent\s+2 kept · assistant ".+" \(1 tool call\(s\)\) · tool call_0 "`).MatchString(out) {
		t.Errorf("proctor trace does not say what the agent sent: %v\n%s", err, out)
	}
	// Its export is the conversation the model had: the agent's last request and its answer.
	var of struct {
		JobID string `json:"job_id"`
	}
	c.call("GET", "/v2/trace/"+tr.ID, nil, &of)
	var exported struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if code, body := c.raw("GET", "/v2/jobs/"+of.JobID+"/export", nil); code != 200 || json.Unmarshal([]byte(body), &exported) != nil {
		t.Errorf("export = %d %s", code, body)
	} else if roles := func() (r []string) {
		for _, m := range exported.Messages {
			r = append(r, m.Role)
		}
		return r
	}(); !slices.Equal(roles, []string{"system", "user", "assistant", "tool", "assistant"}) ||
		!strings.Contains(string(exported.Messages[0].Content), "You solve the task with the tools you are given") {
		t.Errorf("the export's conversation: %s, want the agent's system prompt, the task, its calls and result", body)
	}

	// The calls are metered and priced like any model call of an attempt.
	var usage struct {
		Items []struct {
			Cost  float64 `json:"cost"`
			Route string  `json:"route"`
		} `json:"items"`
	}
	c.call("GET", "/v2/models/"+modelID+"/logs", nil, &usage)
	if len(usage.Items) != 2 || usage.Items[0].Route != "agent" {
		t.Errorf("the model's usage log = %+v, want the agent's 2 calls", usage.Items)
	}
	if !strings.Contains(logs, "agent react:1 started beside the environment") || !strings.Contains(logs, "agent stopped (done) after 2 model calls") {
		t.Errorf("the worker log does not tell the agent's run:\n%s", logs)
	}

	// The trace names the agent's build it ran.
	var info struct {
		Agent *struct {
			Name    string `json:"name"`
			Version int    `json:"build_version"`
			Digest  string `json:"digest"`
		} `json:"agent"`
	}
	c.call("GET", "/v2/trace/"+tr.ID+"/info", nil, &info)
	if info.Agent == nil || info.Agent.Name != "react" || info.Agent.Version != 1 || !strings.HasPrefix(info.Agent.Digest, "sha256:") {
		t.Errorf("the trace's info names agent %+v, want react build 1", info.Agent)
	}

	// A job of the agent on two models (and the built-in loop on one) reports each (agent, model)
	// pair's results apart.
	second := d.addModel("scripted-gpt-2", "openai", model.srv.URL, storeArgs)
	var job struct {
		JobID string `json:"job_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{task}, "model_ids": []string{modelID, second},
		"agent": "react", "group_size": 2}, &job); code != 201 {
		t.Fatalf("run_list with an agent = %d", code)
	}
	c.waitJob(job.JobID, nil)
	var mix struct {
		Entrants []struct {
			Agent *struct {
				Name string `json:"name"`
			} `json:"agent"`
			ModelName  string   `json:"model_name"`
			Attempts   int      `json:"attempts"`
			MeanReward *float64 `json:"mean_reward"`
			Tasks      []struct {
				TaskName string `json:"task_name"`
				Attempts int    `json:"attempts"`
			} `json:"tasks"`
		} `json:"entrants"`
	}
	c.call("GET", "/v2/jobs/"+job.JobID+"/mix", nil, &mix)
	if len(mix.Entrants) != 2 {
		t.Fatalf("the job's entrants = %+v, want react on each model", mix.Entrants)
	}
	for i, want := range []string{"scripted-gpt", "scripted-gpt-2"} {
		e := mix.Entrants[i]
		if e.Agent == nil || e.Agent.Name != "react" || e.ModelName != want || e.Attempts != 2 || e.MeanReward == nil || *e.MeanReward != 1 ||
			len(e.Tasks) != 1 || e.Tasks[0].TaskName != "add" || e.Tasks[0].Attempts != 2 {
			t.Errorf("entrant %d = %+v, want react on %s: 2 attempts of add, mean reward 1", i, e, want)
		}
	}
	if shown, err := c.cli("jobs", "show", job.JobID); err != nil ||
		!regexp.MustCompile(`(?m)^react:1\s+scripted-gpt\s+all\s+2\s+2\s+1\.000`).MatchString(shown) ||
		!regexp.MustCompile(`(?m)^react:1\s+scripted-gpt-2\s+add\s+2\s+2\s+1\.000`).MatchString(shown) {
		t.Errorf("jobs show of an agent on two models: %v\n%s", err, shown)
	}

	// rollouts/submit takes the agent as agent.type, with the model it calls in agent.config.
	submit := func(agentField map[string]any) (int, string) {
		return c.raw("POST", "/v2/rollouts/submit", map[string]any{"trace_id": uuid.NewString(), "task": task, "agent": agentField})
	}
	if code, body := submit(map[string]any{"type": "react"}); code != 422 || !strings.Contains(body, "agent.config.model") {
		t.Errorf("submit of an agent without its model = %d %s, want 422 naming agent.config.model", code, body)
	}
	var submitted struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	code, body := submit(map[string]any{"type": "react:1", "config": map[string]any{"model": "scripted-gpt"}})
	if code != 201 || json.Unmarshal([]byte(body), &submitted) != nil {
		t.Fatalf("submit of an agent = %d %s", code, body)
	}
	c.waitJob(submitted.JobID, nil)
	c.call("GET", "/v2/trace/"+submitted.TraceID+"/info", nil, &info)
	var subTr traceRow
	c.call("GET", "/v2/trace/"+submitted.TraceID, nil, &subTr)
	if subTr.Status != "completed" || subTr.Reward == nil || *subTr.Reward != 1 || info.Agent == nil || info.Agent.Name != "react" {
		t.Errorf("a submitted agent's attempt = %+v (agent %+v)", subTr, info.Agent)
	}

	// The model's own results leave the agent's attempts out: they measure the agent.
	var results struct {
		Results []struct{ TasksetName string } `json:"results"`
	}
	c.call("GET", "/v2/models/"+modelID+"/results", nil, &results)
	if len(results.Results) != 0 {
		t.Errorf("the model's results pool a brought agent's attempts: %+v", results.Results)
	}

	// max_steps bounds the model calls the gateway lets through: the agent's second call is
	// refused, its run ends there, and the attempt is evaluated all the same (the todo it added
	// in its one step earns the reward).
	tr, logs = c.runToEnd(map[string]any{"task_version_id": task, "model_id": modelID, "agent": "react", "max_steps": 1})
	if tr.Status != "completed" || tr.StopReason != "max_steps" || tr.Reward == nil || *tr.Reward != 1 {
		t.Errorf("an agent past max_steps = %+v\n%s", tr, logs)
	}

	// An agent that fails ends the attempt as error, reward 0, with its exit status and its own
	// last words, and is not retried: here the provider refuses the calls (a wrong key).
	var added bytes.Buffer
	if err := run(context.Background(), append([]string{"admin", "model", "add", "--name", "scripted-nokey", "--adapter", "openai", "--base-url", model.srv.URL,
		"--api-key-env", "SCRIPTED_AGENT_NO_KEY", "--data-dir", dataDir}, storeArgs...), &added, io.Discard); err != nil {
		t.Fatal(err)
	}
	tr, logs = c.runToEnd(map[string]any{"task_version_id": task, "model_id": c.resolve("/v2/models/resolve?model=scripted-nokey", "id"), "agent": "react"})
	if tr.Status != "error" || tr.Reward == nil || *tr.Reward != 0 || !strings.Contains(tr.Error, "the agent exited with an error (exit status 1)") ||
		!strings.Contains(tr.Error, "react: turn 0: OpenAI API error: 400") || strings.Count(logs, "agent react:1 started") != 1 {
		t.Errorf("a failing agent = %+v\n%s", tr, logs)
	}
}

// TestABroughtAgentIsHeldToItsEndpoints runs an agent that tries what a brought agent must not
// be able to do, and one that never stops, and checks each ends as the README says: the
// evaluate and setup dispatchers refused through MCP, an address beside its endpoints
// unreachable, its key worthless at the server's gateway, a model-call loop stopped by
// max_steps at the port, and a cancel that stops the agent within seconds and leaves no process.
// The behaviour is the store's no more than the built-in loop's: one store is enough.
func TestABroughtAgentIsHeldToItsEndpoints(t *testing.T) {
	t.Parallel()
	// One sandbox slot: an attempt's environment holds it, and its agent runs beside it all the
	// same (it takes none).
	d := startAgentDev(t, nil, "--max-sandboxes", "1")
	c, model, modelID := d.api, d.model, d.modelID
	if out, err := c.cli("agent", "deploy", filepath.Join("testdata", "agents", "probe"), "--name", "probe"); err != nil {
		t.Fatalf("agent deploy: %v\n%s", err, out)
	}
	// A listener on the host's loopback, which the agent must not reach.
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var reached atomic.Int32
	go func() {
		for {
			c, err := host.Accept()
			if err != nil {
				return
			}
			reached.Add(1)
			c.Close()
		}
	}()
	hostAddr := host.Addr().String()
	probeTask := func(name string, config map[string]any) string {
		var up struct {
			TaskVersionIDs []string `json:"task_version_ids"`
		}
		if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "probes", "tasks": []any{map[string]any{
			"name": name, "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}}, "agent_config": config,
			"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}}}}, &up); code != 201 {
			t.Fatalf("upload the %s probe = %d", name, code)
		}
		return up.TaskVersionIDs[0]
	}

	tr, logs := c.runToEnd(map[string]any{"task_version_id": probeTask("escape", map[string]any{"probe": "escape", "addr": hostAddr}),
		"model_id": modelID, "agent": "probe"})
	if tr.Status != "completed" || tr.StopReason != "done" || tr.Reward == nil || *tr.Reward != 0 {
		t.Errorf("the escaping agent's attempt = %+v, want completed (done), reward 0\n%s", tr, logs)
	}
	logs += c.agentOutput(tr.ID)
	for _, want := range []string{"evaluate: refused", "setup: refused", "reach " + hostAddr + ": failed", "confined to its endpoints"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the trace's logs do not say %q:\n%s", want, logs)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the agent reached the host's listener %d times", n)
	}
	// Its refused calls are in the trace, where a reviewer looks for tampering: each a tool_call
	// and an error tool_result marked refused.
	var escaped struct {
		Events []struct {
			Kind string
			Text string
			Data struct {
				Name    string `json:"name"`
				IsError bool   `json:"is_error"`
				Refused bool   `json:"refused"`
			}
		}
	}
	c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &escaped)
	var refused []string
	for _, e := range escaped.Events {
		if e.Kind == "tool_result" && e.Data.Refused && e.Data.IsError {
			refused = append(refused, e.Data.Name)
		}
	}
	if want := []string{"evaluate", "setup"}; !slices.Equal(refused, want) {
		t.Errorf("the refused calls in the trace = %v, want %v", refused, want)
	}
	if out, err := c.cli("trace", tr.ID); err != nil || !strings.Contains(out, `refused: unknown tool "evaluate"; available tools: `) {
		t.Errorf("proctor trace does not show the refused call: %v\n%s", err, out)
	}
	// Its key was good for its attempt only, and is no key of the server's.
	key := regexp.MustCompile(`key (pa-[0-9a-f]+)`).FindStringSubmatch(logs)
	if key == nil {
		t.Fatalf("the agent did not print its key:\n%s", logs)
	}
	req, _ := http.NewRequest("POST", c.base+"/v2/gateway/openai/chat/completions",
		strings.NewReader(`{"model":"scripted-gpt","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key[1])
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 401 {
		t.Errorf("the agent's key at the server's gateway after its attempt: %v %v, want 401", res, err)
	} else {
		res.Body.Close()
	}

	// An agent on a model served over the Anthropic API calls it at ANTHROPIC_BASE_URL: the calls
	// are relayed as they are, and recorded as the OpenAI ones are.
	claude := d.addModel("scripted-claude", "anthropic", newScriptedAnthropic(t, scriptedProviderKey).URL, nil)
	tr, logs = c.runToEnd(map[string]any{"task_version_id": probeTask("anthropic", map[string]any{"probe": "anthropic"}), "model_id": claude, "agent": "probe"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
		t.Errorf("an agent over the Anthropic API = %+v\n%s%s", tr, logs, c.agentOutput(tr.ID))
	}
	var evs struct {
		Events []struct {
			Kind string `json:"kind"`
			Data struct {
				Usage struct {
					InputTokens  int `json:"input_tokens"`
					OutputTokens int `json:"output_tokens"`
				} `json:"usage"`
				Name string `json:"name"`
			} `json:"data"`
		} `json:"events"`
	}
	c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &evs)
	var got []string
	for _, e := range evs.Events {
		switch e.Kind {
		case "assistant_message":
			got = append(got, fmt.Sprintf("assistant %d/%d", e.Data.Usage.InputTokens, e.Data.Usage.OutputTokens))
		case "tool_call":
			got = append(got, "call "+e.Data.Name)
		}
	}
	if want := []string{"assistant 80/15", "call add_todo", "assistant 80/15"}; !slices.Equal(got, want) {
		t.Errorf("the Anthropic agent's trace = %v, want %v", got, want)
	}

	// An agent that asks the model again and again, whatever it is told, is stopped by max_steps.
	before := model.requests()
	tr, logs = c.runToEnd(map[string]any{"task_version_id": probeTask("loop", map[string]any{"probe": "loop"}), "model_id": modelID, "agent": "probe", "max_steps": 3})
	if tr.Status != "completed" || tr.StopReason != "max_steps" || !strings.Contains(logs, "agent stopped (max_steps) after 3 model calls") {
		t.Errorf("a looping agent = %+v\n%s", tr, logs)
	}
	if n := model.requests() - before; n != 3 {
		t.Errorf("the provider had %d calls of the looping agent, want 3", n)
	}

	// Cancel stops a running agent within seconds, and leaves no process behind.
	var launched struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": probeTask("hang", map[string]any{"probe": "hang"}), "model_id": modelID, "agent": "probe"}, &launched)
	testenv.Wait(t, "the hanging agent to start", testenv.StallWindow, func() (bool, string) {
		out := c.agentOutput(launched.TraceID)
		return strings.Contains(out, "hanging"), out
	}, nil)
	cancelled := time.Now()
	if code := c.call("POST", "/v2/rollouts/cancel_job", map[string]any{"job_id": launched.JobID}, nil); code != 200 {
		t.Fatalf("cancel_job = %d", code)
	}
	c.waitJob(launched.JobID, nil)
	t.Logf("a running agent cancelled in %s", time.Since(cancelled).Round(time.Millisecond))
	c.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr)
	if tr.Status != "cancelled" {
		t.Errorf("the cancelled agent's attempt = %+v", tr)
	}
	// The attempt recorded cancelled once its sandboxes were stopped; only the processes' exit
	// may be left, which takes well under a second even on a loaded machine.
	for deadline := time.Now().Add(10 * time.Second); envProcesses(d.dataDir) != "" && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if p := envProcesses(d.dataDir); p != "" {
		t.Errorf("processes left after the agent's attempt was cancelled:\n%s", p)
	}
}

// TestKilledWorkerRestartsABroughtAgent kill -9s the worker that hosts an attempt's environment
// and agent while the agent waits on a model call: another worker runs the attempt again in
// fresh sandboxes, both of them, and it completes; the first try's events are kept superseded,
// and neither sandbox's processes outlive the killed worker.
func TestKilledWorkerRestartsABroughtAgent(t *testing.T) {
	t.Parallel()
	const providerKey = scriptedProviderKey
	bin := proctorBinary(t)
	model := newScriptedTodoModel(t, providerKey)
	model.delay = time.Second
	dataDir := t.TempDir()
	dbURL := "sqlite:" + filepath.Join(dataDir, "proctor.db")
	info := startSplitDev(t, dataDir, nil)
	first := sandboxWorker(t, bin, dataDir, dbURL, info, "first", io.Discard)
	c := api{t: t, base: info.APIURL, key: info.APIKey, temporal: info.TemporalAddress}
	if err := run(t.Context(), []string{"admin", "model", "add", "--name", "slow-gpt", "--adapter", "openai", "--base-url", model.srv.URL,
		"--api-key-env", "SCRIPTED_AGENT_KEY", "--database-url", dbURL}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out, err := c.cli("agent", "deploy", filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "react"), "--name", "react"); err != nil {
		t.Fatalf("agent deploy: %v\n%s", err, out)
	}
	var launched struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": c.addTask("agents", "todo"),
		"model_id": c.resolve("/v2/models/resolve?model=slow-gpt", "id"), "agent": "react"}, &launched)
	testenv.Wait(t, "the agent's first model call", testenv.StallWindow, func() (bool, string) {
		n := model.requests()
		return n >= 1, fmt.Sprint(n)
	}, func() string { return c.describeLive(launched.JobID) })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	// The kernel ends a killed worker's sandboxes (they die with their parent).
	for gone := time.Now().Add(10 * time.Second); envProcesses(dataDir) != "" && time.Now().Before(gone); {
		time.Sleep(100 * time.Millisecond)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Fatalf("processes of the attempt outlived the killed worker:\n%s", p)
	}
	second := sandboxWorker(t, bin, dataDir, dbURL, info, "second", io.Discard)
	defer func() { second.Process.Signal(syscall.SIGTERM); second.Wait() }()
	c.waitJob(launched.JobID, nil)
	var tr struct {
		traceRow
		Attempt int `json:"attempt"`
	}
	c.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || tr.Attempt != 2 {
		t.Fatalf("the attempt whose worker was killed = %+v, want completed at 1.0 on its second try", tr)
	}
	var live, all struct {
		Events []struct {
			Kind       string
			Attempt    int
			Superseded bool
		}
	}
	c.call("GET", "/v2/trace/"+launched.TraceID+"/events", nil, &live)
	c.call("GET", "/v2/trace/"+launched.TraceID+"/events?include_superseded=true", nil, &all)
	calls := 0
	for _, e := range live.Events {
		if e.Attempt != 2 {
			t.Errorf("a live event of try %d: %+v", e.Attempt, e)
		}
		if e.Kind == "tool_call" {
			calls++
		}
	}
	superseded := 0
	for _, e := range all.Events {
		if e.Superseded {
			superseded++
		}
	}
	if calls != 1 || superseded == 0 {
		t.Errorf("the events: %d tool calls live (want 1), %d of the first try superseded (want some)", calls, superseded)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("processes left after the attempt: %s", p)
	}
}

// TestTheTypeScriptExampleAgentSolvesATask prepares the TypeScript example (npm ci of the
// official OpenAI and MCP SDKs and of Node's own binary, pinned by its package-lock.json),
// deploys it from its Dockerfile (no base image: Node and the libraries it links are copied in),
// and runs it on an add-todos task: reward 1.0, each model call and tool call in the trace.
// Deployed to run inside, it solves a task of a static Go environment's image and a Harbor task
// (in the task's writable root).
func TestTheTypeScriptExampleAgentSolvesATask(t *testing.T) {
	t.Parallel()
	dir := preparedTSAgent(t)
	d := startAgentDev(t, nil, "--shell-server", testenv.StaticProgram(t, "cmd/proctor-shell"))
	c, model := d.api, d.model
	started := time.Now()
	if out, err := c.cli("agent", "deploy", dir, "--name", "react-ts"); err != nil || !strings.Contains(out, "latest: build 1 of react-ts") {
		t.Fatalf("agent deploy: %v\n%s", err, out)
	}
	t.Logf("deploy of the TypeScript agent: %s", time.Since(started).Round(time.Millisecond))
	tr, logs := c.runToEnd(map[string]any{"task_version_id": c.addTask("agents", "todo"), "model_id": c.resolve("/v2/models/resolve?model=scripted-gpt", "id"),
		"agent": "react-ts"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || tr.StopReason != "done" {
		t.Fatalf("the TypeScript agent's attempt = %+v (model problems %v)\n%s%s", tr, model.problems, logs, c.agentOutput(tr.ID))
	}
	var evs struct {
		Events []struct{ Kind string }
	}
	c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &evs)
	var kinds []string
	for _, e := range evs.Events {
		if !strings.HasPrefix(e.Kind, "setup") {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []string{"system_message", "user_message", "assistant_message", "tool_call", "tool_result", "assistant_message", "evaluate"}; !slices.Equal(kinds, want) {
		t.Errorf("the trace's events (setup aside) = %v, want %v", kinds, want)
	}
	if out := c.agentOutput(tr.ID); !strings.Contains(out, "react-ts: 4 tools, model scripted-gpt") {
		t.Errorf("the agent's output:\n%s", out)
	}
	// proctor trace names the agent, and prints what it wrote with --logs.
	if out, err := c.cli("trace", tr.ID); err != nil || !strings.Contains(out, "agent react-ts, build 1 (sha256:") ||
		!regexp.MustCompile(`(?m)^2 model calls · 200 tokens in, 40 out · cost \$\d+\.\d{4} \(models \$0\.0003, environment \$\d+\.\d{4}\)$`).MatchString(out) {
		t.Errorf("proctor trace: %v\n%s", err, out)
	}
	if out, err := c.cli("trace", tr.ID, "--logs"); err != nil || !regexp.MustCompile(`(?m)^agent:stderr\s+react-ts: 4 tools`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^worker\s+.*agent react-ts:1 started beside the environment`).MatchString(out) {
		t.Errorf("proctor trace --logs: %v\n%s", err, out)
	}

	// Deployed to run inside, the same agent runs in the sandbox of an environment built from a
	// static Go program, whose image holds no libc: Node runs from the agent's image, shown at
	// the agent root, by that image's own loader, and writes the file the evaluation reads.
	if out, err := c.cli("env", "deploy", outOfTreeModule(t, []byte(answerEnvironment)), "--name", "answer", "--agents-inside"); err != nil {
		t.Fatalf("env deploy: %v\n%s", err, out)
	}
	if out, err := c.cli("agent", "deploy", dir, "--name", "react-ts-inside", "--inside"); err != nil {
		t.Fatalf("agent deploy --inside: %v\n%s", err, out)
	}
	// The same source built twice (a Dockerfile of COPY steps) is the same image.
	if list, err := c.cli("agent", "list"); err != nil {
		t.Errorf("agent list: %v", err)
	} else if digests := regexp.MustCompile(`(?m)^react-ts(?:-inside)?\s+1\s+(sha256:\S+)`).FindAllStringSubmatch(list, -1); len(digests) != 2 || digests[0][1] != digests[1][1] {
		t.Errorf("the two builds of the TypeScript agent's one source have digests %v, want one digest:\n%s", digests, list)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "inside", "tasks": []any{map[string]any{"name": "answer", "env": "answer",
		"scenario": "answer", "args": map[string]any{"answer": "42"}}}}, &up)
	tr, logs = c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": c.resolve("/v2/models/resolve?model=scripted-gpt", "id"),
		"agent": "react-ts-inside"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(logs, "from the environment's image (its own at /tmp/.proctor/agent)") ||
		!strings.Contains(c.agentOutput(tr.ID), "react-ts: 3 tools") {
		t.Errorf("the TypeScript agent inside a static environment's image = %+v (model problems %v)\n%s%s", tr, model.problems, logs, c.agentOutput(tr.ID))
	}

	// Inside a Harbor task (examples/harbor/hello-world, imported as a user would), the agent runs
	// in the task's own writable root, in its WORKDIR (/app): the file its write_file puts there
	// is the one the task's tests read. Its tools: the shell server's but write_file, which its
	// own replaces, and its read_file and write_file.
	makeHarborBase(t, filepath.Join(d.dataDir, "builds"))
	if out, err := c.cli("tasks", "import", "harbor", filepath.Join(testenv.ModuleRoot(t), "examples", "harbor", "hello-world"), "--taskset", "harbor-inside",
		"--build-arg", "BASE_IMAGE="+harborBase); err != nil {
		t.Fatalf("import hello-world: %v\n%s", err, out)
	}
	var tasks struct {
		Items []struct {
			LatestVersionID string `json:"latest_version_id"`
		} `json:"items"`
	}
	c.call("GET", "/v2/tasksets/"+c.tasksetID("harbor-inside")+"/tasks", nil, &tasks)
	if len(tasks.Items) != 1 {
		t.Fatalf("the imported taskset's tasks: %+v", tasks)
	}
	tr, logs = c.runToEnd(map[string]any{"task_version_id": tasks.Items[0].LatestVersionID, "model_id": c.resolve("/v2/models/resolve?model=scripted-gpt", "id"),
		"agent": "react-ts-inside"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(c.agentOutput(tr.ID), "react-ts: 5 tools") {
		t.Errorf("the TypeScript agent inside a Harbor task = %+v (model problems %v)\n%s%s", tr, model.problems, logs, c.agentOutput(tr.ID))
	}
}

// tsAgent is examples/agents/ts made ready to deploy (its prepare.sh run), once for the tests
// of this process that deploy it, however many run at once.
var tsAgent struct {
	once sync.Once
	err  error
	out  []byte
}

// preparedTSAgent is the TypeScript example's folder, prepared (tsAgent).
func preparedTSAgent(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "ts")
	tsAgent.once.Do(func() {
		started := time.Now()
		tsAgent.out, tsAgent.err = exec.Command(filepath.Join(dir, "prepare.sh")).CombinedOutput()
		t.Logf("prepare.sh: %s", time.Since(started).Round(time.Millisecond))
	})
	if tsAgent.err != nil {
		t.Fatalf("prepare.sh: %v\n%s", tsAgent.err, tsAgent.out)
	}
	return dir
}

// answerEnvironment is an environment whose evaluation reads a file of its working directory:
// the scenario asks for answer.txt to hold the answer.
const answerEnvironment = `package main

import (
	"context"
	"log/slog"
	"os"
	"strings"

	"github.com/proctorhq/proctor/envserver"
)

type args struct {
	Answer string ` + "`json:\"answer\"`" + `
}

type hint struct {
	File string ` + "`json:\"file\"`" + `
}

func main() {
	envserver.Main(func(logger *slog.Logger) (*envserver.Server, error) {
		srv := envserver.New("answer", envserver.WithLogger(logger))
		if _, err := envserver.AddTool(srv, "hint", "Where to write", func(ctx context.Context, _ struct{}) (hint, error) {
			return hint{File: "answer.txt, in the working directory"}, nil
		}); err != nil {
			return nil, err
		}
		evaluate := envserver.NewHub(envserver.EvaluateHub)
		if _, err := envserver.AddTool(evaluate, "answer_file", "1 when answer.txt holds the answer", func(ctx context.Context, in args) (envserver.EvaluationResult, error) {
			b, err := os.ReadFile("answer.txt")
			if err != nil {
				return envserver.EvaluationResult{Reward: 0, Done: true, Content: err.Error()}, nil
			}
			if strings.TrimSpace(string(b)) != in.Answer {
				return envserver.EvaluationResult{Reward: 0, Done: true, Content: "answer.txt holds " + string(b)}, nil
			}
			return envserver.EvaluationResult{Reward: 1, Done: true, Content: "answer.txt holds the answer"}, nil
		}); err != nil {
			return nil, err
		}
		if err := srv.Mount(evaluate); err != nil {
			return nil, err
		}
		return srv, envserver.AddScenario(srv, envserver.Scenario[args]{Name: "answer", Prompt: "Write {{.Answer}} to answer.txt in your working directory.",
			Evaluate: envserver.Call{Tool: envserver.EvaluateHub, Name: "answer_file"}})
	})
}
`

// TestABroughtAgentRunsInsideAnEnvironmentThatTakesIt deploys the Go example agent to run inside
// the environment and an environment that takes agents inside, and runs the agent on a task
// whose evaluation reads a file of the environment's working directory: the model asks for the
// agent's own write_file tool (no MCP), the agent writes the file there, and the attempt earns
// 1.0. A launch on an environment that does not
// take agents inside is refused, saying how to allow it.
func TestABroughtAgentRunsInsideAnEnvironmentThatTakesIt(t *testing.T) {
	t.Parallel()
	d := startAgentDev(t, nil)
	c := d.api
	envDir := outOfTreeModule(t, []byte(answerEnvironment))
	for _, deploy := range [][]string{{"--name", "answer", "--agents-inside"}, {"--name", "answer-closed"}} {
		if out, err := c.cli(append([]string{"env", "deploy", envDir}, deploy...)...); err != nil {
			t.Fatalf("env deploy %v: %v\n%s", deploy, err, out)
		}
	}
	if out, err := c.cli("agent", "deploy", filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "react"), "--name", "react-inside", "--inside"); err != nil {
		t.Fatalf("agent deploy --inside: %v\n%s", err, out)
	}
	if list, err := c.cli("agent", "list"); err != nil || !regexp.MustCompile(`(?m)^react-inside\s+1\s+sha256:\S+\s+inside\s`).MatchString(list) {
		t.Errorf("agent list: %v\n%s", err, list)
	}
	if code, body := c.raw("POST", "/v2/builds/trigger", map[string]any{"build_id": uuid.NewString(), "name": "x", "placement": "inside"}); code != 422 ||
		!strings.Contains(body, "kind agent only") {
		t.Errorf("placement on an environment's build = %d %s, want 422", code, body)
	}
	task := func(env string) string {
		var up struct {
			TaskVersionIDs []string `json:"task_version_ids"`
		}
		if code := c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "inside", "tasks": []any{map[string]any{
			"name": "answer-" + env, "env": env, "scenario": "answer", "args": map[string]any{"answer": "42"}}}}, &up); code != 201 {
			t.Fatalf("upload a task over %s = %d", env, code)
		}
		return up.TaskVersionIDs[0]
	}
	modelID := c.resolve("/v2/models/resolve?model=scripted-gpt", "id")
	tr, logs := c.runToEnd(map[string]any{"task_version_id": task("answer"), "model_id": modelID, "agent": "react-inside"})
	out := c.agentOutput(tr.ID)
	// The environment's hint, and the agent's read_file and write_file.
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(logs, "started inside the environment, in its working directory, from the environment's image") ||
		!strings.Contains(out, "react: 3 tools") {
		t.Errorf("an agent inside the environment = %+v\n%s%s", tr, logs, out)
	}
	if d.model.problems != nil {
		t.Errorf("the scripted model refused %v", d.model.problems)
	}
	// An environment that does not take agents inside is refused at launch, saying how to allow it.
	closed := task("answer-closed")
	if code, body := c.raw("POST", "/v2/rollouts/run", map[string]any{"task_version_id": closed, "model_id": modelID, "agent": "react-inside"}); code != 422 ||
		!strings.Contains(body, `does not take agents inside`) || !strings.Contains(body, "--agents-inside") {
		t.Errorf("an agent inside an environment that does not take it = %d %s, want 422", code, body)
	}
	if code, body := c.raw("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{closed}, "model_ids": []string{modelID}, "agent": "react-inside"}); code != 422 {
		t.Errorf("run_list of an agent inside an environment that does not take it = %d %s, want 422", code, body)
	}
}
