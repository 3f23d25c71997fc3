package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"mime/quotedprintable"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/testenv"
)

func TestInferenceGateway(t *testing.T) {
	eachStore(t, testInferenceGateway)
}

// testInferenceGateway drives the gateway's two routes: an attempt's model steps and a completion
// are each recorded with tokens and cost; a provider's 429 stays a 429 with its Retry-After.
func testInferenceGateway(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	box := startMailbox(t)
	devArgs := append([]string{"--smtp-url", "smtp://" + box.addr, "--mail-from", "alerts@proctor.test", "--limit-alert-interval", "300ms",
		"--environment-hourly-rate", "3.6", "--environment-cpu-hourly-rate", "0.5", "--environment-memory-gb-hourly-rate", "0.125",
		"--environment-gpu-hourly-rates", "h100=4,*=2", "--environment-baseline-minutes", "5", "--metrics-token", "scrape-token"}, storeArgs...)
	dev := startDev(t, dataDir, devArgs...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	addModel := func(name, url string, extra ...string) string {
		return addScriptedModel(t, c, dataDir, storeArgs, name, url, extra...)
	}
	const inCost, outCost = 0.000003, 0.000015
	srv, requests := scriptedOpenAI(t, []map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}, 0)
	priced := addModel("priced", srv.URL, "--input-cost-per-token", fmt.Sprint(inCost), "--output-cost-per-token", fmt.Sprint(outCost))
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "gateway", "tasks": []any{map[string]any{
		"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}}}}}, &up)
	tr, _ := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": priced})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
		t.Fatalf("attempt = %+v", tr)
	}

	// An attempt without model calls (the oracle) costs only its environment; a limit with no
	// spend yet reads 0 (SQLite sums no rows to an integer unless told otherwise).
	oracleRun, _ := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": c.resolve("/v2/models/resolve?model=oracle", "id")})
	var zero struct {
		InferenceCost float64 `json:"inference_cost"`
		BaselineCost  float64 `json:"environment_baseline_cost"`
	}
	if code := c.call("GET", "/v2/trace/"+oracleRun.ID+"/usage", nil, &zero); code != 200 || zero.InferenceCost != 0 || math.Abs(zero.BaselineCost-0.3) > 1e-9 {
		t.Errorf("an oracle attempt's usage = %d %+v", code, zero)
	}

	// The attempt's usage: its model calls' cost, and environment time at 3.6 $/h with a 5-minute
	// baseline; its job's usage sums its traces.
	var tu struct {
		AgentActions      int     `json:"agent_actions"`
		BaselineMinutes   float64 `json:"environment_baseline_minutes"`
		BaselineCost      float64 `json:"environment_baseline_cost"`
		AdditionalMinutes float64 `json:"environment_additional_minutes"`
		EnvironmentCost   float64 `json:"environment_cost"`
		HourlyRate        float64 `json:"environment_hourly_rate"`
		InferenceCost     float64 `json:"inference_cost"`
		StillRunning      bool    `json:"environment_still_running"`
		EnvironmentID     *string `json:"environment_id"`
	}
	wantInference := float64(requests.Load()) * (10*inCost + 5*outCost)
	if code := c.call("GET", "/v2/trace/"+tr.ID+"/usage", nil, &tu); code != 200 || tu.AgentActions != 1 || tu.BaselineMinutes != 5 ||
		math.Abs(tu.BaselineCost-0.3) > 1e-9 || tu.AdditionalMinutes > 1 || tu.HourlyRate != 3.6 || tu.StillRunning || tu.EnvironmentID == nil ||
		math.Abs(tu.InferenceCost-wantInference) > 1e-12 || math.Abs(tu.EnvironmentCost-(0.3+3.6*tu.AdditionalMinutes/60)) > 1e-9 {
		t.Errorf("trace usage = %d %+v (want inference %v)", code, tu, wantInference)
	}
	var traceInfo struct {
		JobID string `json:"job_id"`
	}
	c.call("GET", "/v2/trace/"+tr.ID, nil, &traceInfo)
	var ju struct {
		TotalCost                float64 `json:"total_cost"`
		TraceCount               int     `json:"trace_count"`
		EnvironmentsStillRunning int     `json:"environments_still_running"`
		InferenceCost            struct {
			Cost  float64
			Count int
		} `json:"inference_cost"`
		EnvironmentCost struct{ Cost float64 } `json:"environment_cost"`
		Traces          []json.RawMessage
	}
	if code := c.call("GET", "/v2/jobs/"+traceInfo.JobID+"/usage", nil, &ju); code != 200 || ju.TraceCount != 1 || len(ju.Traces) != 1 ||
		ju.InferenceCost.Count != int(requests.Load()) || math.Abs(ju.TotalCost-(tu.EnvironmentCost+tu.InferenceCost)) > 1e-9 || ju.EnvironmentsStillRunning != 0 {
		t.Errorf("job usage = %d %+v", code, ju)
	}
	for path, want := range map[string]int{"/v2/trace/" + uuid.NewString() + "/usage": 404, "/v2/jobs/" + uuid.NewString() + "/usage": 404} {
		if code := c.call("GET", path, nil, nil); code != want {
			t.Errorf("%s = %d, want %d", path, code, want)
		}
	}

	// A completion through the same gateway, billed to the caller's key.
	var done struct{ Content, Model string }
	if code := c.call("POST", "/v2/completions", map[string]any{"model": "priced", "max_tokens": 50,
		"messages": []map[string]string{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}}}, &done); code != 200 {
		t.Fatalf("completion = %d", code)
	}
	// The scripted server answers a first turn with its first tool call: no text, and still a call.
	if done.Model != "scripted" {
		t.Errorf("completion = %+v", done)
	}
	var logs struct {
		Items []struct {
			Route, Status string
			Prompt        int     `json:"prompt_tokens"`
			Completion    int     `json:"completion_tokens"`
			Total         int     `json:"total_tokens"`
			Cost          float64 `json:"cost"`
			TraceID       *string `json:"trace_id"`
			ErrorCode     *string `json:"error_code"`
		}
		Total int
	}
	c.call("GET", "/v2/models/"+priced+"/logs?limit=100", nil, &logs)
	agentCalls, completions := 0, 0
	for _, l := range logs.Items {
		if l.Status != "ok" || l.Prompt != 10 || l.Completion != 5 || l.Total != 15 || math.Abs(l.Cost-(10*inCost+5*outCost)) > 1e-12 || l.ErrorCode != nil {
			t.Errorf("log row = %+v", l)
		}
		switch {
		case l.Route == "agent" && l.TraceID != nil && *l.TraceID == tr.ID:
			agentCalls++
		case l.Route == "completions" && l.TraceID == nil:
			completions++
		default:
			t.Errorf("log row = %+v", l)
		}
	}
	if int64(agentCalls+completions) != requests.Load() || completions != 1 || logs.Total != len(logs.Items) {
		t.Errorf("%d agent rows and %d completion rows (total %d) for %d provider requests", agentCalls, completions, logs.Total, requests.Load())
	}

	var evalOut bytes.Buffer
	if err := run(t.Context(), []string{"eval", "gateway", "--model", "priced", "--api-url", c.base, "--api-key", c.key}, &evalOut, io.Discard); err != nil ||
		!regexp.MustCompile(`cost \$0\.3\d{3}: inference \$0\.\d{4} \(2 model calls\), environments \$0\.3\d{3}`).MatchString(evalOut.String()) {
		t.Errorf("proctor eval's cost line: %v\n%s", err, evalOut.String())
	}
	// The same calls in Prometheus metrics: latency, tokens and cost per model.
	_, metricsBody, _ := get(t, c.base+"/metrics", "scrape-token")
	for _, re := range []string{`proctor_model_step_seconds_count\{model="priced",status="ok"\} [1-9]`, `proctor_inference_tokens_total\{kind="prompt",model="priced"\} [1-9]`,
		`proctor_inference_cost_usd_total\{model="priced"\} 0\.0*[1-9]`} {
		if !regexp.MustCompile(re).MatchString(metricsBody) {
			t.Errorf("metrics lack %s", re)
		}
	}

	// An Anthropic-compatible server through the same gateway: its own token counts are recorded.
	claude := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != "scripted-key" {
			http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"unexpected"}}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-scripted","content":[{"type":"text","text":"hello from claude"}],`+
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":7}}`)
	}))
	defer claude.Close()
	var out bytes.Buffer
	if err := run(context.Background(), append([]string{"admin", "model", "add", "--name", "claude-scripted", "--adapter", "anthropic", "--base-url", claude.URL,
		"--api-key-env", "SCRIPTED_KEY", "--input-cost-per-token", "0.000001", "--output-cost-per-token", "0.000005", "--data-dir", dataDir}, storeArgs...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	claudeID := c.resolve("/v2/models/resolve?model=claude-scripted", "id")
	if code := c.call("POST", "/v2/completions", map[string]any{"model": "claude-scripted", "max_tokens": 100,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}}, &done); code != 200 || done.Content != "hello from claude" || done.Model != "claude-scripted" {
		t.Errorf("an Anthropic completion = %d %+v", code, done)
	}
	c.call("GET", "/v2/models/"+claudeID+"/logs", nil, &logs)
	if len(logs.Items) != 1 || logs.Items[0].Prompt != 12 || logs.Items[0].Completion != 7 || math.Abs(logs.Items[0].Cost-(12*0.000001+7*0.000005)) > 1e-12 {
		t.Errorf("the Anthropic call's row = %+v", logs.Items)
	}

	// A provider that rate-limits: the caller gets 429 with the provider's Retry-After, and the
	// failed call is recorded.
	limited := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "7")
		w.Header().Set("x-should-retry", "false")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit"}}`)
	}))
	defer limited.Close()
	limitedID := addModel("limited", limited.URL)
	req, _ := http.NewRequest("POST", c.base+"/v2/completions", bytes.NewReader([]byte(`{"model":"limited","messages":[{"role":"user","content":"hi"}]}`)))
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 429 || res.Header.Get("Retry-After") != "7" || !bytes.Contains(body, []byte("slow down")) {
		t.Errorf("a rate-limited completion = %d Retry-After %q %s", res.StatusCode, res.Header.Get("Retry-After"), body)
	}
	c.call("GET", "/v2/models/"+limitedID+"/logs", nil, &logs)
	if len(logs.Items) != 1 || logs.Items[0].Status != "error" || logs.Items[0].ErrorCode == nil || *logs.Items[0].ErrorCode != "http_429" {
		t.Errorf("the rate-limited call's row = %+v", logs.Items)
	}
	// The usage log: every call of the team, newest first, filterable; models count their calls.
	var usage struct {
		Logs []struct {
			Model, Type string
			APIKeyName  *string        `json:"api_key_name"`
			Metadata    map[string]any `json:"metadata"`
		}
		TotalCount int    `json:"total_count"`
		OrgType    string `json:"org_type"`
	}
	all := int(requests.Load()) + 2 // the scripted server's calls, the Anthropic one and the rate-limited one
	if c.call("GET", "/v2/inference/usage", nil, &usage); usage.TotalCount != all || usage.OrgType != "team" || usage.Logs[0].Model != "limited" {
		t.Errorf("usage = %d rows (want %d), newest %+v", usage.TotalCount, all, usage.Logs[0])
	}
	c.call("GET", "/v2/inference/usage?request_type=completions", nil, &usage)
	if usage.TotalCount != 3 || usage.Logs[0].APIKeyName == nil || usage.Logs[1].Metadata["status"] != "ok" || usage.Logs[1].Model != "claude-scripted" {
		t.Errorf("completions in the usage log = %+v", usage)
	}
	c.call("GET", "/v2/inference/usage?model_id="+limitedID+"&days=1", nil, &usage)
	if usage.TotalCount != 1 || usage.Logs[0].Metadata["error_code"] != "http_429" {
		t.Errorf("the limited model's usage = %+v", usage)
	}
	for q, want := range map[string]int{"days=0": 422, "days=367": 422, "request_type=other": 422, "model_id=x": 422} {
		if code := c.call("GET", "/v2/inference/usage?"+q, nil, nil); code != want {
			t.Errorf("usage?%s = %d, want %d", q, code, want)
		}
	}
	var model struct {
		InferenceCount int `json:"inference_count"`
	}
	if c.call("GET", "/v2/models/"+priced, nil, &model); model.InferenceCount != int(requests.Load()) {
		t.Errorf("inference_count = %d, want %d", model.InferenceCount, requests.Load())
	}

	// The model's results: the gateway taskset, one task, both attempts (the run and eval's) at
	// 1.0; the seeded demo is suggested.
	var results struct {
		Results []struct {
			TasksetName     string  `json:"taskset_name"`
			TotalTasks      int     `json:"total_tasks"`
			TasksWithTraces int     `json:"tasks_with_traces"`
			AvgScore        float64 `json:"avg_score"`
			Range0_99       int     `json:"tasks_in_range_0_99"`
			MaxTraces       int     `json:"max_traces_per_task"`
			PerTask         []struct {
				TaskName string `json:"task_name"`
			} `json:"per_task_scores"`
		}
		Suggested []struct {
			TasksetName string `json:"taskset_name"`
			Purpose     string
		}
	}
	if code := c.call("GET", "/v2/models/"+priced+"/results", nil, &results); code != 200 || len(results.Results) != 1 ||
		results.Results[0].TasksetName != "gateway" || results.Results[0].TasksWithTraces != 1 || results.Results[0].AvgScore != 1 ||
		results.Results[0].Range0_99 != 0 || results.Results[0].MaxTraces != 2 || len(results.Results[0].PerTask) != 1 ||
		len(results.Suggested) == 0 || results.Suggested[0].TasksetName != "demo" || results.Suggested[0].Purpose != "EVAL" {
		t.Errorf("model results = %d %+v", code, results)
	}
	for q, want := range map[string]int{"?purpose=TRAINING": 200, "?purpose=other": 422, "?checkpoint_ids=x": 422, "?checkpoint_ids=" + uuid.NewString(): 422} {
		if code := c.call("GET", "/v2/models/"+priced+"/results"+q, nil, nil); code != want {
			t.Errorf("results%s = %d, want %d", q, code, want)
		}
	}
	var sug struct {
		Suggested []struct {
			TasksetName string `json:"taskset_name"`
		}
	}
	if c.call("GET", "/v2/models/"+priced+"/suggested-tasksets?search=dem&limit=5", nil, &sug); len(sug.Suggested) != 1 || sug.Suggested[0].TasksetName != "demo" {
		t.Errorf("suggested = %+v", sug)
	}
	if code := c.call("GET", "/v2/models/"+uuid.NewString()+"/suggested-tasksets", nil, nil); code != 404 {
		t.Errorf("suggestions for no model = %d", code)
	}

	// Instances: the attempts so far (these two, and eval's) each ran in one.
	checkInstances(t, c, dataDir, up.TaskVersionIDs[0], *tu.EnvironmentID, []string{tr.ID, oracleRun.ID, "eval"}, func(name, url string) string { return addModel(name, url) })

	// A block limit on the API key, once its month's spend reaches it, refuses new completions and
	// launches; disabled, it does not.
	var keyed struct {
		Logs []struct {
			APIKeyID *string `json:"api_key_id"`
			Cost     float64
		}
	}
	// The key's spend is what it launched and called: every model call (completions and the
	// model steps of its attempts) and the environment time of its attempts.
	c.call("GET", "/v2/inference/usage?request_type=completions", nil, &keyed)
	keyID, spent := *keyed.Logs[0].APIKeyID, 0.0
	c.call("GET", "/v2/inference/usage?limit=500&api_key_id="+keyID, nil, &keyed)
	for _, l := range keyed.Logs {
		spent += l.Cost
	}
	var envUsage struct {
		Summary struct {
			TotalCost float64 `json:"total_cost"`
		}
	}
	c.call("GET", "/v2/environments/usage?api_key_id="+keyID, nil, &envUsage)
	if envUsage.Summary.TotalCost <= 0 {
		t.Errorf("the key's environment usage = %+v", envUsage)
	}
	spent += envUsage.Summary.TotalCost
	var limit struct {
		ID         string
		SpendUSD   string `json:"spend_usd"`
		AmountUSD  string `json:"amount_usd"`
		Threshold  string `json:"threshold_percent"`
		APIKeyName string `json:"api_key_name"`
		Interval   string
		Enabled    bool
	}
	if code := c.call("POST", "/v2/limits", map[string]any{"interval": "month", "action": "block", "amount_usd": spent / 2, "api_key_id": keyID}, &limit); code != 201 ||
		math.Abs(parseFloat(limit.SpendUSD)-spent) > 1e-5 || limit.Threshold != "100" || limit.APIKeyName != "bootstrap" || !limit.Enabled || limit.Interval != "month" {
		t.Fatalf("create a limit = %d %+v (spent %v)", code, limit, spent)
	}
	msg := map[string]any{"model": "priced", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	if code := c.call("POST", "/v2/completions", msg, nil); code != 403 {
		t.Errorf("a completion past a block limit = %d, want 403", code)
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": priced}, nil); code != 403 {
		t.Errorf("a launch past a block limit = %d, want 403", code)
	}
	if code := c.call("PATCH", "/v2/limits/"+limit.ID, map[string]any{"enabled": false}, &limit); code != 200 || limit.Enabled {
		t.Errorf("disable = %d %+v", code, limit)
	}
	if code := c.call("POST", "/v2/completions", msg, nil); code != 200 {
		t.Errorf("a completion with the limit disabled = %d", code)
	}
	var members bytes.Buffer
	run(t.Context(), append([]string{"admin", "member", "list", "--team", regexp.MustCompile(`[0-9a-f-]{36}`).FindString(func() string {
		var b bytes.Buffer
		run(t.Context(), append([]string{"admin", "team", "list", "--data-dir", dataDir}, storeArgs...), &b, io.Discard)
		return b.String()
	}()), "--data-dir", dataDir}, storeArgs...), &members, io.Discard)
	var quiet struct {
		SpendUSD string `json:"spend_usd"`
	}
	if m := regexp.MustCompile(`(?m)^\s*(\d+)\s`).FindStringSubmatch(members.String()); m == nil {
		t.Errorf("no membership in:\n%s", members.String())
	} else if n, _ := strconv.Atoi(m[1]); c.call("POST", "/v2/limits", map[string]any{"interval": "week", "action": "alert", "amount_usd": 100, "membership_id": n}, &quiet) != 201 || quiet.SpendUSD == "" {
		t.Errorf("a member's limit = %+v", quiet)
	}
	var limits struct{ Limits []json.RawMessage }
	c.call("GET", "/v2/limits", nil, &limits)
	if len(limits.Limits) != 2 {
		t.Errorf("limits = %s", limits.Limits)
	}
	for name, body := range map[string]map[string]any{
		"no scope":    {"interval": "month", "action": "block", "amount_usd": 1},
		"two scopes":  {"interval": "month", "action": "block", "amount_usd": 1, "api_key_id": keyID, "membership_id": 1},
		"bad period":  {"interval": "day", "action": "block", "amount_usd": 1, "api_key_id": keyID},
		"another key": {"interval": "week", "action": "alert", "amount_usd": 1, "api_key_id": "0b5e3d3c-8d6e-4a43-9a55-0c6d2a1f9e11"},
	} {
		if code := c.call("POST", "/v2/limits", body, nil); code != 422 {
			t.Errorf("a limit with %s = %d, want 422", name, code)
		}
	}
	if code := c.call("DELETE", "/v2/limits/"+limit.ID, nil, nil); code != 204 {
		t.Errorf("delete a limit = %d", code)
	}

	// An alert limit past its threshold mails the key's member once this period, through the
	// durable alerts workflow, and not again after dev restarts.
	if code := c.call("POST", "/v2/limits", map[string]any{"interval": "week", "action": "alert", "amount_usd": spent, "threshold_percent": 50, "api_key_id": keyID}, &limit); code != 201 {
		t.Fatalf("create an alert limit = %d", code)
	}
	waitMail := func(n int) []mailMessage {
		// The alerts workflow checks every few seconds; on a loaded machine a check can come
		// late, so the wait fails only after a stall window without the mail.
		testenv.Wait(t, fmt.Sprintf("%d alert mails", n), testenv.StallWindow, func() (bool, string) {
			return len(box.messages()) >= n, ""
		}, nil)
		return box.messages()
	}
	if got := waitMail(1); len(got) != 1 || got[0].From != "alerts@proctor.test" || len(got[0].To) != 1 || got[0].To[0] != "dev@localhost" ||
		!strings.Contains(got[0].Data, "Proctor spending alert") || !strings.Contains(got[0].Data, limit.ID) {
		t.Fatalf("alert mails = %+v", got)
	}
	if code := c.call("POST", "/v2/completions", msg, nil); code != 200 {
		t.Errorf("a completion under an alert limit = %d (alerts do not block)", code)
	}
	time.Sleep(time.Second) // three more checks
	dev.stop(t)
	dev = startDev(t, dataDir, devArgs...)
	c.base = dev.info.APIURL
	time.Sleep(time.Second)
	if got := box.messages(); len(got) != 1 {
		t.Errorf("%d alert mails after more checks and a restart, want 1", len(got))
	}

	// A comment that @mentions a member mails them once, through the same mail round, with a link
	// to the task in the app.
	var tasks struct {
		Items []struct{ ID string } `json:"items"`
	}
	tasksetID := c.tasksetID("gateway")
	c.call("GET", "/v2/tasksets/"+tasksetID+"/tasks", nil, &tasks)
	if err := run(context.Background(), append([]string{"admin", "member", "add", "--team", dev.info.TeamID, "--email", "bob@example.com", "--name", "Bob",
		"--data-dir", dataDir}, storeArgs...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	if code := c.call("POST", "/v2/tasks/"+tasks.Items[0].ID+"/comments", map[string]any{"body": "@bob this one costs money"}, nil); code != 200 {
		t.Fatalf("comment = %d", code)
	}
	got := waitMail(2)
	mailBody, _ := io.ReadAll(quotedprintable.NewReader(strings.NewReader(got[1].Data)))
	if !strings.Contains(string(mailBody), "Proctor: Developer mentioned you on task add") || got[1].To[0] != "bob@example.com" ||
		!strings.Contains(string(mailBody), "this one costs money") || !strings.Contains(string(mailBody), "/#/tasksets/"+tasksetID+"/tasks/"+tasks.Items[0].ID) {
		t.Errorf("the mention's mail = %+v", got[1])
	}
	time.Sleep(time.Second) // three more rounds
	if got := box.messages(); len(got) != 2 {
		t.Errorf("%d mails after more rounds, want 2: a mention is mailed once", len(got))
	}

	// Usage over time: every call in today's bucket, grouped by route, in SQL on either store.
	var everything struct {
		TotalCount int `json:"total_count"`
		Logs       []struct{ Cost float64 }
	}
	c.call("GET", "/v2/inference/usage?limit=500", nil, &everything)
	var buckets struct {
		TotalRequests int     `json:"total_requests"`
		TotalCost     float64 `json:"total_cost"`
		BucketWidth   string  `json:"bucket_width"`
		GroupBy       *string `json:"group_by"`
		Buckets       []struct {
			Start  string
			Groups []struct {
				Key      string
				Requests int
			}
		}
	}
	c.call("GET", "/v2/usage/inference?bucket_width=1h&group_by=route", nil, &buckets)
	byRoute := map[string]int{}
	for _, b := range buckets.Buckets {
		for _, g := range b.Groups {
			byRoute[g.Key] += g.Requests
		}
	}
	sum := 0.0
	for _, l := range everything.Logs {
		sum += l.Cost
	}
	if buckets.TotalRequests != everything.TotalCount || math.Abs(buckets.TotalCost-sum) > 1e-9 || buckets.GroupBy == nil || *buckets.GroupBy != "route" ||
		byRoute["agent"] == 0 || byRoute["completions"] == 0 || byRoute["agent"]+byRoute["completions"] != everything.TotalCount || len(buckets.Buckets) > 2 {
		t.Errorf("usage buckets = %+v; log has %d rows costing %v", buckets, everything.TotalCount, sum)
	}
	// Daily buckets come from the daily usage kept beside the calls: the same totals.
	var daily struct {
		TotalRequests int     `json:"total_requests"`
		TotalCost     float64 `json:"total_cost"`
		Buckets       []struct{ Groups []struct{ Key string } }
	}
	c.call("GET", "/v2/usage/inference?bucket_width=1d&group_by=model", nil, &daily)
	if daily.TotalRequests != everything.TotalCount || math.Abs(daily.TotalCost-sum) > 1e-9 || len(daily.Buckets) == 0 {
		t.Errorf("daily buckets = %+v; log has %d rows costing %v", daily, everything.TotalCount, sum)
	}
	for q, want := range map[string]int{"bucket_width=1h&start=2026-01-01T00:00:00Z": 422, "start=2030-01-01T00:00:00Z": 422,
		"group_by=planet": 422, "bucket_width=1w": 422, "group_by=model&bucket_width=1d": 200} {
		if code := c.call("GET", "/v2/usage/inference?"+q, nil, nil); code != want {
			t.Errorf("usage/inference?%s = %d, want %d", q, code, want)
		}
	}

	var usageOut bytes.Buffer
	if err := run(t.Context(), []string{"usage", "--by", "route", "--api-url", c.base, "--api-key", c.key}, &usageOut, io.Discard); err != nil ||
		!strings.Contains(usageOut.String(), fmt.Sprintf("%d calls", everything.TotalCount)) || !strings.Contains(usageOut.String(), "completions") ||
		!regexp.MustCompile(`environments in the last 7 days: 5 sandboxes \(0 running\), [0-9.]+ hours, \$[0-9.]+`).MatchString(usageOut.String()) {
		t.Errorf("proctor usage: %v\n%s", err, usageOut.String())
	}
	usageOut.Reset()
	var usageJSON struct {
		Inference struct {
			TotalRequests int `json:"total_requests"`
		}
		Environments struct {
			Summary struct {
				TotalCount int `json:"total_count"`
			}
		}
	}
	if err := run(t.Context(), []string{"usage", "--json", "--api-url", c.base, "--api-key", c.key}, &usageOut, io.Discard); err != nil ||
		json.Unmarshal(usageOut.Bytes(), &usageJSON) != nil || usageJSON.Inference.TotalRequests != everything.TotalCount || usageJSON.Environments.Summary.TotalCount != 5 {
		t.Errorf("proctor usage --json: %v; %+v\n%s", err, usageJSON, usageOut.String())
	}

	// Fork → checkpoint → head: inference then calls the checkpoint's upstream name, and the
	// checkpoint knows the attempts it answered.
	var mu sync.Mutex
	var asked []string
	trainer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ Model string }
		json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		asked = append(asked, req.Model)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","created":0,"model":"`+req.Model+`","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	defer trainer.Close()
	lastAsked := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(asked) == 0 {
			return ""
		}
		return asked[len(asked)-1]
	}
	base := addModel("base-trainable", trainer.URL, "--trainable")
	var fork struct {
		ID              string
		ForkOfModelID   *string `json:"fork_of_model_id"`
		ForkOfModelName *string `json:"fork_of_model_name"`
		CanEdit         bool    `json:"can_edit"`
		CheckpointCount int     `json:"checkpoint_count"`
	}
	if code := c.call("POST", "/v2/models/fork", map[string]any{"source_model_id": base, "name": "my-fork"}, &fork); code != 200 ||
		fork.ForkOfModelID == nil || *fork.ForkOfModelID != base || fork.ForkOfModelName == nil || *fork.ForkOfModelName != "base-trainable" || !fork.CanEdit {
		t.Fatalf("fork = %d %+v", code, fork)
	}
	if code := c.call("POST", "/v2/models/fork", map[string]any{"source_model_id": priced, "name": "nope"}, nil); code != 422 {
		t.Errorf("a fork of a model that is not trainable = %d, want 422", code)
	}
	if code := c.call("POST", "/v2/models/fork", map[string]any{"source_model_id": base, "name": "my-fork"}, nil); code != 409 {
		t.Errorf("a second fork of the same name = %d, want 409", code)
	}
	// Any name will do (the spec asks only for a string): the model_name is made of it.
	var named struct {
		Name      string `json:"name"`
		ModelName string `json:"model_name"`
	}
	if code := c.call("POST", "/v2/models/fork", map[string]any{"source_model_id": base, "name": "Ada's fork (v2.1)"}, &named); code != 200 ||
		named.Name != "Ada's fork (v2.1)" || named.ModelName != "Ada-s-fork-v2.1" {
		t.Errorf("a fork named with spaces and punctuation = %d %+v, want model_name Ada-s-fork-v2.1", code, named)
	}
	ask := map[string]any{"model": "my-fork", "messages": []map[string]string{{"role": "user", "content": "hi"}}}
	if code := c.call("POST", "/v2/completions", ask, nil); code != 200 || lastAsked() != "base-trainable" {
		t.Errorf("a fork without a checkpoint called %q (%d), want its base", lastAsked(), code)
	}
	var cp struct{ ID string }
	if code := c.call("POST", "/v2/models/"+fork.ID+"/checkpoints", map[string]any{"name": "step-100", "upstream_model": "ft:base:step-100",
		"learning_rate": 0.0001, "loss_fn": "ppo", "metrics": map[string]any{"loss": 0.5}, "num_datums": 10, "num_tokens": 1000}, &cp); code != 201 {
		t.Fatalf("register a checkpoint = %d", code)
	}
	if code := c.call("POST", "/v2/models/"+priced+"/checkpoints", map[string]any{"name": "x", "upstream_model": "y"}, nil); code != 403 {
		t.Errorf("a checkpoint of a shared model = %d, want 403", code)
	}
	if code := c.call("PUT", "/v2/models/"+fork.ID+"/head", map[string]any{"checkpoint_id": cp.ID}, &fork); code != 200 || fork.CheckpointCount != 1 {
		t.Errorf("set head = %d %+v", code, fork)
	}
	if code := c.call("PUT", "/v2/models/"+fork.ID+"/head", map[string]any{"checkpoint_id": limitedID}, nil); code != 422 {
		t.Errorf("a head that is no checkpoint of the model = %d, want 422", code)
	}
	if code := c.call("POST", "/v2/completions", ask, nil); code != 200 || lastAsked() != "ft:base:step-100" {
		t.Errorf("after set-head the gateway called %q (%d), want the checkpoint's upstream name", lastAsked(), code)
	}
	forkRun, _ := c.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": fork.ID})
	var cps []struct {
		ID         string
		IsActive   bool `json:"is_active"`
		Name       string
		Checkpoint string   `json:"checkpoint_name"`
		NumTokens  int      `json:"num_tokens"`
		MeanReward *float64 `json:"mean_reward"`
		Jobs       []struct{ ID string }
	}
	c.call("GET", "/v2/models/"+fork.ID+"/checkpoints", nil, &cps)
	if len(cps) != 1 || !cps[0].IsActive || cps[0].Checkpoint != "ft:base:step-100" || cps[0].NumTokens != 1000 || len(cps[0].Jobs) != 1 || cps[0].MeanReward == nil {
		t.Errorf("checkpoints = %+v", cps)
	}
	var cpTraces []struct {
		TraceID string `json:"trace_id"`
		Status  string
	}
	c.call("GET", "/v2/models/"+fork.ID+"/checkpoints/"+cp.ID+"/traces", nil, &cpTraces)
	if len(cpTraces) != 1 || cpTraces[0].TraceID != forkRun.ID || cpTraces[0].Status != "completed" {
		t.Errorf("checkpoint traces = %+v, want the fork's attempt %s", cpTraces, forkRun.ID)
	}

	// A team's own model can be renamed, hidden and given request defaults; the platform's cannot.
	var teams bytes.Buffer
	if err := run(context.Background(), append([]string{"admin", "team", "list", "--data-dir", dataDir}, storeArgs...), &teams, io.Discard); err != nil {
		t.Fatal(err)
	}
	teamID := regexp.MustCompile(`[0-9a-f-]{36}`).FindString(teams.String())
	own := addModel("own-model", srv.URL, "--team", teamID)
	var patched struct {
		Name            string
		Hidden          bool
		CanEdit         bool           `json:"can_edit"`
		RequestDefaults map[string]any `json:"request_defaults"`
	}
	if code := c.call("PATCH", "/v2/models/"+own, map[string]any{"name": "Our model", "hidden": true, "request_defaults": map[string]any{"temperature": 0}}, &patched); code != 200 ||
		patched.Name != "Our model" || !patched.Hidden || !patched.CanEdit || patched.RequestDefaults["temperature"] != 0.0 {
		t.Errorf("patch a team's model = %d %+v", code, patched)
	}
	var list struct{ Items []struct{ ID string } }
	c.call("GET", "/v2/models?limit=500", nil, &list)
	for _, m := range list.Items {
		if m.ID == own {
			t.Error("a hidden model is listed")
		}
	}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	for path, want := range map[string]int{oracle: 403, own + "?": 200, "00000000-0000-0000-0000-00000000000a": 404} {
		if code := c.call("PATCH", "/v2/models/"+strings.TrimSuffix(path, "?"), map[string]any{"hidden": false}, nil); code != want {
			t.Errorf("patch %s = %d, want %d", path, code, want)
		}
	}
	if code := c.call("PATCH", "/v2/models/"+own, map[string]any{}, nil); code != 422 {
		t.Errorf("an empty patch = %d, want 422", code)
	}

	for body, want := range map[string]int{
		`{"model":"no-such-model","messages":[{"role":"user","content":"hi"}]}`: 404,
		`{"model":"oracle","messages":[{"role":"user","content":"hi"}]}`:        422,
		`{"model":"priced","messages":[{"role":"system","content":"only"}]}`:    422,
		`{"model":"priced","messages":[]}`:                                      422,
	} {
		if code := c.call("POST", "/v2/completions", json.RawMessage(body), nil); code != want {
			t.Errorf("completion %s = %d, want %d", body, code, want)
		}
	}
}
