package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proctorhq/proctor/internal/testenv"
)

// proctor jobs retry runs a run_list job's failed attempts again in the job: attempts its model
// failed (scored 0) are left alone by the default (infrastructure failures only) and run again
// with --errors all, each once, the new attempts completing where the old ones failed and
// replacing them in the job's results.
func TestRetryRunsAJobsFailedAttemptsAgain(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	dev := startDev(t, dataDir)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey}
	good, _ := scriptedOpenAI(t, twoTodoCalls, 0)
	target, _ := url.Parse(good.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var calls atomic.Int64
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 { // each attempt's first call of the first run fails: the model's error, scored 0
			http.Error(w, `{"error":{"message":"scripted: refused","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer flaky.Close()
	model := addScriptedModel(t, c, dataDir, nil, "flaky", flaky.URL)
	var launched struct {
		JobID string `json:"job_id"`
	}
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{c.addTwoTodosTask("retry")}, "model_ids": []string{model}, "group_size": 2, "max_concurrent": 1}, &launched)
	c.waitJob(launched.JobID, nil)
	first := c.traces(launched.JobID)
	if len(first) != 2 || first[0].Status != "error" || first[1].Status != "error" || first[0].Reward == nil || *first[0].Reward != 0 {
		t.Fatalf("the first run's attempts: %+v", first)
	}

	// The RunList marks its job completed once its last attempt has ended.
	ended := func() {
		t.Helper()
		testenv.Wait(t, "job "+launched.JobID+" completed", testenv.StallWindow, func() (bool, string) {
			var job struct{ Status string }
			c.call("GET", "/v2/jobs/"+launched.JobID, nil, &job)
			return job.Status == "completed", job.Status
		}, nil)
	}
	ended()
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut strings.Builder
		if err := run(t.Context(), append(append([]string{"jobs", "retry", launched.JobID}, args...), "--api-url", c.base, "--api-key", c.key), &out, &errOut); err != nil {
			t.Fatalf("proctor jobs retry %v: %v\n%s%s", args, err, out.String(), errOut.String())
		}
		return out.String()
	}
	if out := cli(); !strings.Contains(out, "no attempt to retry") {
		t.Errorf("a retry of infrastructure failures where the model failed: %s", out)
	}
	if out := cli("--errors", "all"); !strings.Contains(out, "2 attempts running again") {
		t.Fatalf("proctor jobs retry --errors all: %s", out)
	}
	c.waitJob(launched.JobID, nil)
	ended()
	all := c.traces(launched.JobID)
	var replaced, completed int
	for _, tr := range all {
		switch {
		case tr.Status == "error":
			replaced++
		case tr.Status == "completed" && tr.Reward != nil && *tr.Reward == 1:
			completed++
		}
	}
	var sum summary
	c.call("GET", "/v2/jobs/"+launched.JobID+"/summary", nil, &sum)
	if len(all) != 4 || replaced != 2 || completed != 2 {
		t.Errorf("the job after its retry: %+v (summary %s)", all, sum.String())
	}
	if out := cli("--errors", "all"); !strings.Contains(out, "no attempt to retry") {
		t.Errorf("a second retry: %s", out)
	}
	if code, body := c.raw("POST", "/v2/jobs/"+launched.JobID+"/retry", map[string]any{"errors": "some"}); code != 422 {
		t.Errorf("errors some = %d %s, want 422", code, body)
	}

	// An attempt no host takes (a GPU this worker has not) fails on the infrastructure: the
	// default retry runs it again, with no body at all.
	var gpu struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "retry", "tasks": []any{map[string]any{"name": "gpu", "env": "todo",
		"scenario": "add-todos", "args": map[string]any{"items": []string{"x"}},
		"runtime_config": map[string]any{"limits": map[string]any{"startup_timeout_s": 2}, "resources": map[string]any{"gpu": map[string]any{"count": 1}}}}}}, &gpu)
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": gpu.TaskVersionIDs, "model_ids": []string{model}}, &launched)
	c.waitJob(launched.JobID, nil)
	ended()
	if first := c.traces(launched.JobID); len(first) != 1 || first[0].Status != "error" || !strings.Contains(first[0].Error, "no sandbox host") {
		t.Fatalf("an attempt no host takes: %+v", first)
	}
	req, _ := http.NewRequest("POST", c.base+"/v2/jobs/"+launched.JobID+"/retry", nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("a retry with no body = %d", res.StatusCode)
	}
	c.waitJob(launched.JobID, nil)
	ended()
	if again := c.traces(launched.JobID); len(again) != 2 || again[1].Status != "error" || !strings.Contains(again[1].Error, "no sandbox host") {
		t.Errorf("the infrastructure failure's retry: %+v", again)
	}
}
