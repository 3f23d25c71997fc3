package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// checkJobAnalytics reads a finished demo job of 9 attempts (3 tasks × 3, all at reward 1.0)
// through the analytics routes.
func checkJobAnalytics(t *testing.T, c api, jobID, demo string) {
	t.Helper()
	var cov struct {
		TasksetID       string `json:"taskset_id"`
		TotalTasks      int    `json:"total_tasks"`
		TasksWithTraces int    `json:"tasks_with_traces"`
		Tasks           []struct {
			TaskName   string   `json:"task_name"`
			AvgReward  *float64 `json:"avg_reward"`
			TraceCount int      `json:"trace_count"`
			Statuses   []string `json:"statuses"`
		}
	}
	if code := c.call("GET", "/v2/jobs/"+jobID+"/taskset-coverage", nil, &cov); code != 200 || cov.TasksetID != demo || cov.TotalTasks != 3 ||
		cov.TasksWithTraces != 3 || len(cov.Tasks) != 3 {
		t.Fatalf("coverage = %d %+v", code, cov)
	}
	for _, task := range cov.Tasks {
		if task.TraceCount != 3 || task.AvgReward == nil || *task.AvgReward != 1 || len(task.Statuses) != 1 || task.Statuses[0] != "completed" {
			t.Errorf("covered task = %+v", task)
		}
	}
	var chart struct {
		DataPoints []struct{ ID, Status string } `json:"data_points"`
		Total      int
	}
	if c.call("GET", "/v2/jobs/"+jobID+"/chart-data?limit=4", nil, &chart); chart.Total != 9 || len(chart.DataPoints) != 4 {
		t.Errorf("chart data = %+v", chart)
	}
	var th struct {
		Thumbnails []struct {
			TraceID  string `json:"id"`
			Category string
		}
		CategoryCounts map[string]int `json:"category_counts"`
		HasMore        bool           `json:"has_more"`
		NextOffset     *int           `json:"next_offset"`
	}
	if c.call("GET", "/v2/jobs/"+jobID+"/thumbnails?limit=4", nil, &th); len(th.Thumbnails) != 4 || !th.HasMore || th.NextOffset == nil || *th.NextOffset != 4 ||
		th.CategoryCounts["all"] != 9 || th.CategoryCounts["successful"] != 9 || th.CategoryCounts["failed"] != 0 || th.Thumbnails[0].Category != "successful" {
		t.Errorf("thumbnails = %+v", th)
	}
	var info struct {
		InstanceID    *string `json:"instance_id"`
		ExecutionMode string  `json:"execution_mode"`
		Environment   *struct {
			ID           string
			Name         string
			BuildID      *string `json:"build_id"`
			BuildVersion *int    `json:"build_version"`
			BuildDigest  *string `json:"build_digest"`
			CanView      bool    `json:"can_view_source"`
		}
	}
	if c.call("GET", "/v2/trace/"+th.Thumbnails[0].TraceID+"/info", nil, &info); info.InstanceID == nil || info.ExecutionMode != "hosted" ||
		info.Environment == nil || info.Environment.Name == "" || info.Environment.BuildID == nil || info.Environment.BuildVersion == nil ||
		*info.Environment.BuildVersion < 1 || info.Environment.BuildDigest == nil || !info.Environment.CanView {
		t.Errorf("trace info = %+v %+v", info, info.Environment)
	}
	if c.call("GET", "/v2/jobs/"+jobID+"/thumbnails?category=failed", nil, &th); len(th.Thumbnails) != 0 || th.HasMore || th.NextOffset != nil {
		t.Errorf("failed thumbnails = %+v", th)
	}
	var links struct {
		Links []struct {
			Model, Registry, Taskset struct {
				ID   *string
				Name *string
			}
		}
	}
	if c.call("GET", "/v2/jobs/"+jobID+"/entity-links", nil, &links); len(links.Links) == 0 {
		t.Errorf("entity links = %+v", links)
	}
	for _, l := range links.Links {
		if l.Model.Name == nil || !strings.HasPrefix(*l.Model.Name, "Oracle") || l.Registry.Name == nil || l.Taskset.Name == nil || *l.Taskset.Name != "demo" {
			t.Errorf("entity link = %+v", l)
		}
	}
	type card struct {
		ID              string   `json:"id"`
		JobType         string   `json:"job_type"`
		AverageAccuracy *float64 `json:"average_accuracy"`
		CompletedTasks  int      `json:"completed_tasks"`
		ChartData       []struct {
			TaskID     string `json:"task_id"`
			TraceCount int    `json:"trace_count"`
		} `json:"chart_data"`
		Models []struct{ Name string }
	}
	var enriched struct {
		Jobs         []card                      `json:"jobs"`
		TotalCount   int                         `json:"total_count"`
		TasksetTasks []struct{ ID, Name string } `json:"taskset_tasks"`
	}
	if c.call("GET", "/v2/jobs/enriched?taskset_id="+demo, nil, &enriched); enriched.TotalCount != 1 || len(enriched.Jobs) != 1 || len(enriched.TasksetTasks) != 3 {
		t.Fatalf("enriched = %+v", enriched)
	}
	if j := enriched.Jobs[0]; j.ID != jobID || j.JobType != "batch" || j.AverageAccuracy == nil || *j.AverageAccuracy != 1 || j.CompletedTasks != 9 ||
		len(j.ChartData) != 3 || j.ChartData[0].TraceCount != 3 || len(j.Models) != 1 || !strings.HasPrefix(j.Models[0].Name, "Oracle") {
		t.Errorf("job card = %+v", j)
	}
	var enrich struct {
		Enrichments map[string]card `json:"enrichments"`
	}
	if code := c.call("POST", "/v2/jobs/enrich", []string{jobID, uuid.NewString()}, &enrich); code != 200 || len(enrich.Enrichments) != 1 ||
		enrich.Enrichments[jobID].CompletedTasks != 9 {
		t.Errorf("enrich = %d %+v", code, enrich)
	}
	for path, want := range map[string]int{
		"/v2/jobs/enriched": 422,
		"/v2/jobs/enriched?taskset_id=" + uuid.NewString():   404,
		"/v2/jobs/" + jobID + "/chart-data?limit=0":          422,
		"/v2/jobs/" + jobID + "/thumbnails?category=x":       422,
		"/v2/jobs/" + jobID + "/thumbnails?limit=501":        422,
		"/v2/jobs/" + uuid.NewString() + "/taskset-coverage": 404,
		"/v2/jobs/" + uuid.NewString() + "/entity-links":     404,
	} {
		if code := c.call("GET", path, nil, nil); code != want {
			t.Errorf("GET %s = %d, want %d", path, code, want)
		}
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"jobs", "show", jobID, "--api-url", c.base, "--api-key", c.key}, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "9/9 attempts done (9 completed, 0 error, 0 cancelled), mean reward 1.000") ||
		!strings.Contains(out.String(), "taskset demo: 3 of 3 tasks run") || len(regexp.MustCompile(`(?m)\s3\s+0\s+completed\s+1\.000$`).FindAllString(out.String(), -1)) != 3 {
		t.Errorf("proctor jobs show: %v\n%s", err, out.String())
	}
	// The CLI's ways to a trace id.
	cli := c.cli
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"traces", "--job", jobID, "--status", "completed", "--limit", "4"}, []string{"4 shown of 9 attempts; see one with: proctor trace TRACE_ID", "completed"}},
		{[]string{"traces"}, []string{"(your newest)", "9 shown of 9 attempts"}},
		{[]string{"models"}, []string{"oracle", "run one with: proctor eval TASKSET --model MODEL"}},
		{[]string{"tasksets", "show", "demo"}, []string{"taskset demo " + demo + ": 3 tasks (eval)", "todo-add", "run it with: proctor eval demo --model MODEL"}},
		{[]string{"jobs", "watch", jobID}, []string{"9/9 done", "per-task results and the attempts to look at: proctor jobs show " + jobID}},
		{[]string{"jobs"}, []string{"ATTEMPTS  ERRORS  MEAN REWARD", jobID}},
		{[]string{"env", "list"}, []string{"NAME", "SCENARIOS", "LATEST BUILD", "game2048", "todo"}},
		// Its attempts as JSON Lines, each with its conversation and its environment build.
		{[]string{"export", jobID, "--valid-only"}, []string{"9 attempts exported", `"messages":[{"role":"system"`, `"environment_digest":"sha256:`, `"reward":1`}},
		// A job against itself: every task paired at its version and environment build, nothing apart.
		{[]string{"compare", jobID[:8], jobID}, []string{"3 paired tasks: mean reward 1.000 → 1.000, difference +0.000 (95% CI +0.000 … +0.000",
			"b better on 0, a better on 0, 3 tied: p = 1.0000", "pass@1 1.000 → 1.000", "todo-add", "1.000 (3)"}},
	} {
		out, err := cli(tc.args...)
		for _, w := range tc.want {
			if err != nil || !strings.Contains(out, w) {
				t.Errorf("proctor %v: %v; want %q in:\n%s", tc.args, err, w, out)
				break
			}
		}
	}
	// Every list and show command prints JSON with --json, the API's field names, for scripts.
	jsonOf := func(into any, args ...string) {
		t.Helper()
		var out, errOut bytes.Buffer
		err := run(t.Context(), append(args, "--json", "--api-url", c.base, "--api-key", c.key), &out, &errOut)
		if err != nil {
			t.Fatalf("proctor %v --json: %v\n%s", args, err, errOut.String())
		}
		if err := json.Unmarshal(out.Bytes(), into); err != nil {
			t.Fatalf("proctor %v --json printed what is not JSON: %v\n%s", args, err, out.String())
		}
	}
	type jobJSON struct {
		ID      string
		Summary struct {
			TotalTraces int `json:"total_traces"`
			Completed   int
		}
	}
	var jobsJSON struct{ Items []jobJSON }
	jsonOf(&jobsJSON, "jobs")
	if i := slices.IndexFunc(jobsJSON.Items, func(j jobJSON) bool { return j.ID == jobID }); i < 0 ||
		jobsJSON.Items[i].Summary.TotalTraces != 9 || jobsJSON.Items[i].Summary.Completed != 9 {
		t.Errorf("jobs --json = %+v, want job %s with 9 of 9 completed", jobsJSON, jobID)
	}
	var shown struct {
		Job      struct{ ID string }
		Summary  struct{ Completed int }
		Coverage struct {
			Tasks []struct{ Name string }
		}
	}
	jsonOf(&shown, "jobs", "show", jobID[:8]) // an id's start will do
	if shown.Job.ID != jobID || shown.Summary.Completed != 9 || len(shown.Coverage.Tasks) != 3 {
		t.Errorf("jobs show --json = %+v", shown)
	}
	var traces struct {
		JobID string `json:"job_id"`
		Total int
		Items []traceRow
	}
	jsonOf(&traces, "traces", "--job", jobID)
	if traces.JobID != jobID || traces.Total != 9 || len(traces.Items) != 9 || traces.Items[0].Status != "completed" {
		t.Fatalf("traces --json = %+v", traces)
	}
	var trace struct {
		Trace  traceRow
		Events struct {
			Events []struct {
				Seq  int
				Kind string
			}
			Status string
		}
	}
	jsonOf(&trace, "trace", traces.Items[0].ID[:13])
	if _, err := c.cli("trace", "ffffffff-ffff"); err == nil || !strings.Contains(err.Error(), `no trace id among the attempts of your team's 50 newest jobs starts with "ffffffff-ffff"`) {
		t.Errorf("trace of a prefix nothing has: %v", err)
	}
	if trace.Trace.ID != traces.Items[0].ID || trace.Events.Status != "completed" || len(trace.Events.Events) < 3 || trace.Events.Events[0].Kind != "system_message" {
		t.Errorf("trace --json = %+v", trace)
	}
	// proctor open prints a one-time sign-in link to a page of the web app; its page names the
	// account (the browser test follows one through).
	if out, err := c.cli("open", "traces/"+traces.Items[0].ID, "--print"); err != nil || !strings.HasPrefix(out, c.base+"/auth/link?page=traces%2F"+traces.Items[0].ID+"&token=pl-") {
		t.Errorf("proctor open: %v\n%s", err, out)
	} else if res, err := http.Get(strings.SplitN(out, "\n", 2)[0]); err != nil || res.StatusCode != 200 {
		t.Errorf("the link's page: %v %v", res, err)
	} else {
		res.Body.Close()
	}
	type modelJSON struct {
		ModelName string `json:"model_name"`
	}
	var modelsJSON []modelJSON
	jsonOf(&modelsJSON, "models")
	if !slices.ContainsFunc(modelsJSON, func(m modelJSON) bool { return m.ModelName == "oracle" }) {
		t.Errorf("models --json = %+v, want oracle", modelsJSON)
	}
	var workersJSON struct{ Queues []struct{ Queue string } }
	jsonOf(&workersJSON, "workers")
	if len(workersJSON.Queues) == 0 {
		t.Errorf("workers --json = %+v", workersJSON)
	}
	var tasksetsJSON struct{ Items []struct{ Name string } }
	jsonOf(&tasksetsJSON, "tasksets", "list")
	var demoJSON struct {
		Taskset struct{ Name string }
		Tasks   []struct{ Name string }
	}
	jsonOf(&demoJSON, "tasksets", "show", "demo")
	if len(tasksetsJSON.Items) == 0 || demoJSON.Taskset.Name != "demo" || len(demoJSON.Tasks) != 3 {
		t.Errorf("tasksets --json: list %+v, show %+v", tasksetsJSON, demoJSON)
	}
	var envsJSON struct{ Items []struct{ Name string } }
	jsonOf(&envsJSON, "env", "list")
	if len(envsJSON.Items) < 2 {
		t.Errorf("env list --json = %+v, want the examples", envsJSON)
	}
	if out, err := cli("eval", "demo", "--model", "gpt-99"); err == nil || !strings.Contains(err.Error(), `no model "gpt-99"; you can run: idle, oracle`) {
		t.Errorf("eval with an unknown model: %v\n%s", err, out)
	}
	if _, err := cli("jbos"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `unknown command "jbos" for proctor; did you mean jobs?`) {
		t.Errorf("an unknown command: %v", err)
	}
	// One line that names the flag and where the flags are listed, with no flag list around it.
	if out, err := cli("traces", "--bogus"); !errors.Is(err, errFlags) || err.Error() != "unknown flag: --bogus (see proctor traces --help)" || out != "" {
		t.Errorf("a flag typo: %v\n%s", err, out)
	}
	if code := c.call("POST", "/v2/jobs/enrich", map[string]any{"ids": []string{jobID}}, nil); code != 422 {
		t.Errorf("enrich with an object = %d, want 422", code)
	}
}
