package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/testenv"
)

func parseFloat(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

type instanceRow struct {
	ID           string     `json:"id"`
	Status       string     `json:"status"`
	TraceID      string     `json:"trace_id"`
	StopReason   string     `json:"stop_reason"`
	TerminatedAt *time.Time `json:"terminated_at"`
	HourlyRate   float64    `json:"hourly_rate"`
	Cost         float64    `json:"actual_cost"`
	CPUm         int        `json:"cpu_millicores"`
	MemoryGB     float64    `json:"memory_gb"`
	VMType       string     `json:"vm_instance_type"`
	MaxRuntime   float64    `json:"max_runtime_seconds"`
	Resources    struct {
		CPU      float64 `json:"cpu"`
		MemoryMB int     `json:"memory_mb"`
	} `json:"resources"`
}

type instanceList struct {
	Instances       []instanceRow `json:"instances"`
	Total           int           `json:"total"`
	RunningCount    int           `json:"running_count"`
	TerminatedCount int           `json:"terminated_count"`
	HasMore         bool          `json:"has_more"`
}

// checkInstances runs on a dev priced at 3.6 $/h per sandbox, 0.5 per CPU, 0.125 per GiB and a
// 5-minute baseline, whose todo environment (registry) has run the attempts done: every attempt
// is an instance priced by its resources; environment usage agrees with its rows; stopping a
// running instance cancels its attempt and ends the instance.
func checkInstances(t *testing.T, c api, dataDir, version, registry string, done []string, addModel func(name, url string) string) {
	t.Helper()
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	sized, _ := c.runToEnd(map[string]any{"task_version_id": version, "model_id": oracle,
		"runtime_config": map[string]any{"resources": map[string]any{"cpu": 1, "memory_mb": 512}}})
	const rate = 3.6 + 0.5 + 0.125/2
	var tu struct {
		HourlyRate   float64 `json:"environment_hourly_rate"`
		BaselineCost float64 `json:"environment_baseline_cost"`
	}
	if c.call("GET", "/v2/trace/"+sized.ID+"/usage", nil, &tu); tu.HourlyRate != rate || math.Abs(tu.BaselineCost-rate*5/60) > 1e-6 {
		t.Errorf("a sized attempt's usage = %+v, want rate %v", tu, rate)
	}
	done = append(done, sized.ID)

	var l instanceList
	if code := c.call("GET", "/v2/instance?registry_id="+registry, nil, &l); code != 200 || l.RunningCount != 0 || len(l.Instances) != 0 ||
		l.TerminatedCount != len(done) || l.Total != 0 || l.HasMore {
		t.Errorf("running instances = %d %+v", code, l)
	}
	if c.call("GET", "/v2/instance?include_terminated=true&limit=2&registry_id="+registry, nil, &l); len(l.Instances) != 2 || l.Total != len(done) || !l.HasMore {
		t.Errorf("every instance, a page of 2 = %+v", l)
	} else if in := l.Instances[0]; in.TraceID != sized.ID || in.Status != "terminated" || in.TerminatedAt == nil || in.Resources.CPU != 1 ||
		in.Resources.MemoryMB != 512 || in.HourlyRate != rate || math.Abs(in.Cost-rate*5/60) > 1e-6 || in.StopReason == "" ||
		in.CPUm != 1000 || in.MemoryGB != 0.5 || in.VMType != "cpu" || in.MaxRuntime <= 0 {
		t.Errorf("the newest instance = %+v", in)
	}
	for q, want := range map[string]int{"": 422, "?registry_id=x": 422, "?registry_id=" + uuid.NewString(): 404, "?registry_id=" + registry + "&limit=0": 422} {
		if code := c.call("GET", "/v2/instance"+q, nil, nil); code != want {
			t.Errorf("GET /v2/instance%s = %d, want %d", q, code, want)
		}
	}

	// Environment usage: its totals and its chart agree with its rows.
	var eu struct {
		Summary struct {
			ActiveCount int     `json:"active_count"`
			TotalCost   float64 `json:"total_cost"`
			TotalCount  int     `json:"total_count"`
			TotalHours  float64 `json:"total_hours"`
		}
		Chart []struct {
			Date  string
			Cost  float64
			Count int
			Hours float64
		}
		Environments []struct {
			ID         string
			Status     string
			Cost       float64
			APIKeyName *string `json:"api_key_name"`
			UserName   *string `json:"user_name"`
			HourlyRate float64 `json:"hourly_rate"`
		}
		OrgType string `json:"org_type"`
	}
	if code := c.call("GET", "/v2/environments/usage?limit=500", nil, &eu); code != 200 || eu.Summary.TotalCount != len(done) ||
		eu.Summary.ActiveCount != 0 || len(eu.Environments) != len(done) || len(eu.Chart) == 0 || eu.OrgType != "team" {
		t.Fatalf("environment usage = %d %+v", code, eu)
	}
	sum := 0.0
	for _, e := range eu.Environments {
		sum += e.Cost
		if e.Status != "terminated" || e.APIKeyName == nil || *e.APIKeyName != "bootstrap" || e.UserName == nil || e.HourlyRate < 3.6 {
			t.Errorf("an environment usage row = %+v", e)
		}
	}
	var days struct {
		count       int
		cost, hours float64
	}
	for _, d := range eu.Chart {
		days.count, days.cost, days.hours = days.count+d.Count, days.cost+d.Cost, days.hours+d.Hours
	}
	if math.Abs(sum-eu.Summary.TotalCost) > 1e-5 || days.count != len(done) || math.Abs(days.cost-sum) > 1e-5 ||
		eu.Chart[len(eu.Chart)-1].Date != time.Now().UTC().Format("2006-01-02") || math.Abs(days.hours-eu.Summary.TotalHours) > 1e-5 {
		t.Errorf("environment usage totals %+v and chart %+v against rows summing to %v", eu.Summary, eu.Chart, sum)
	}
	for _, q := range []string{"?status=gone", "?days=0", "?user_id=x"} {
		if code := c.call("GET", "/v2/environments/usage"+q, nil, nil); code != 422 {
			t.Errorf("environment usage%s = %d, want 422", q, code)
		}
	}

	// A running instance (its model answers in minutes) stops through its attempt's workflow.
	srv, _ := scriptedOpenAI(t, []map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "x"}}}, 10*time.Minute)
	slow := addModel("slow", srv.URL)
	var launched struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": version, "model_id": slow}, &launched); code != 201 {
		t.Fatalf("run = %d", code)
	}
	testenv.Wait(t, "the attempt's sandbox to start", testenv.StallWindow, func() (bool, string) {
		c.call("GET", "/v2/instance?registry_id="+registry, nil, &l)
		var tr traceRow
		c.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr)
		return l.RunningCount > 0, tr.Status
	}, func() string { return c.describeLive(launched.JobID) })
	if l.RunningCount != 1 || len(l.Instances) != 1 || l.Instances[0].TraceID != launched.TraceID || l.Instances[0].TerminatedAt != nil {
		t.Fatalf("the running instance = %+v", l)
	}
	running := l.Instances[0].ID
	if c.call("GET", "/v2/environments/usage?status=running", nil, &eu); eu.Summary.ActiveCount != 1 || len(eu.Environments) != 1 || eu.Environments[0].Cost <= 0 {
		t.Errorf("running environment usage = %+v", eu)
	}
	var stopped struct {
		Stopped int      `json:"stopped"`
		Errors  []string `json:"errors"`
	}
	stranger := uuid.NewString()
	if code := c.call("POST", "/v2/instance/stop", map[string]any{"registry_id": registry, "instance_ids": []string{running, stranger, running}}, &stopped); code != 200 ||
		stopped.Stopped != 1 || len(stopped.Errors) != 1 || !strings.HasPrefix(stopped.Errors[0], stranger) {
		t.Fatalf("stop = %d %+v", code, stopped)
	}
	c.waitJob(launched.JobID, nil)
	var tr traceRow
	if c.call("GET", "/v2/trace/"+launched.TraceID, nil, &tr); tr.Status != "cancelled" {
		t.Errorf("the stopped instance's attempt = %+v", tr)
	}
	// The attempt ended cancelled after its teardown stopped the sandbox: only the processes'
	// exit is left, which the kernel finishes in well under a second even on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for envProcesses(dataDir) != "" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("the stopped instance's environment still runs:\n%s", p)
	}
	// The attempt's model call is abandoned too (its step heartbeats, so the cancel reaches it).
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		// The step heartbeats every 3 s and learns of the cancel at its next heartbeat (within
		// 8 s): 30 s leaves room for a loaded machine, and a step that never learns is the bug.
		t.Errorf("the stopped attempt's model call is still open 30 s after the stop")
	}
	c.call("GET", "/v2/instance?include_terminated=true&limit=1&registry_id="+registry, nil, &l)
	if len(l.Instances) != 1 || l.Instances[0].ID != running || l.Instances[0].Status != "terminated" || l.Instances[0].TerminatedAt == nil || l.RunningCount != 0 {
		t.Errorf("the stopped instance = %+v", l)
	}
	if c.call("POST", "/v2/instance/stop", map[string]any{"registry_id": registry, "instance_ids": []string{running}}, &stopped); stopped.Stopped != 0 ||
		len(stopped.Errors) != 1 || !strings.Contains(stopped.Errors[0], "already terminated") {
		t.Errorf("stop a stopped instance = %+v", stopped)
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"instances", "todo", "--all", "--api-url", c.base, "--api-key", c.key}, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "0 running, "+strconv.Itoa(len(done)+1)+" in all") || !strings.Contains(out.String(), running) {
		t.Errorf("proctor instances todo --all: %v\n%s", err, out.String())
	}
	out.Reset()
	var listed instanceList
	if err := run(t.Context(), []string{"instances", "todo", "--all", "--json", "--api-url", c.base, "--api-key", c.key}, &out, io.Discard); err != nil ||
		json.Unmarshal(out.Bytes(), &listed) != nil || listed.Total != len(done)+1 || listed.RunningCount != 0 {
		t.Errorf("proctor instances todo --all --json: %v; %+v\n%s", err, listed, out.String())
	}
	if err := run(t.Context(), []string{"instances", "no-such-env", "--api-url", c.base, "--api-key", c.key}, io.Discard, io.Discard); err == nil ||
		!strings.Contains(err.Error(), "no environment of your team is named no-such-env") {
		t.Errorf("proctor instances of an unknown environment: %v", err)
	}
	for name, body := range map[string]map[string]any{
		"no ids":           {"registry_id": registry, "instance_ids": []string{}},
		"no registry":      {"instance_ids": []string{running}},
		"a bad id":         {"registry_id": registry, "instance_ids": []string{"x"}},
		"another registry": {"registry_id": uuid.NewString(), "instance_ids": []string{running}},
	} {
		want := 422
		if name == "another registry" {
			want = 404
		}
		if code := c.call("POST", "/v2/instance/stop", body, nil); code != want {
			t.Errorf("stop with %s = %d, want %d", name, code, want)
		}
	}
}
