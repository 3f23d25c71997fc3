package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"

	"github.com/proctorhq/proctor/internal/testenv"
)

// api is a tiny JSON client for the tests.
type api struct {
	t    testing.TB
	base string
	key  string
	// answers, when set, receives every response body (tests scan them for secrets).
	answers *testenv.Buffer
	// header, when set, is sent with every request besides the key (a traceparent, say).
	header http.Header
	// temporal and namespace, when set, are the deployment's Temporal: a wait that stalls
	// describes the unfinished attempts' workflows there (see describeLive).
	temporal, namespace string
}

func (a api) call(method, path string, body any, out any) int {
	a.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range a.header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if a.answers != nil {
		fmt.Fprintf(a.answers, "%s %s %d %s\n", method, path, res.StatusCode, b)
	}
	if out != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			a.t.Fatalf("%s %s: decode: %v: %s", method, path, err, b)
		}
	}
	if res.StatusCode >= 300 {
		a.t.Logf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
	return res.StatusCode
}

// cli runs a proctor client command against the api's server with its key, and returns what it
// printed (stdout, then stderr).
func (a api) cli(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	err := run(a.t.Context(), append(args, "--api-url", a.base, "--api-key", a.key), &out, &errOut)
	return out.String() + errOut.String(), err
}

// runCLI is run, for tests with a local of that name.
var runCLI = run

// raw sends a request and returns the status and the body, whatever the status.
func (a api) raw(method, path string, body any) (int, string) {
	a.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, a.base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+a.key)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

type summary struct {
	AvgReward                                                               *float64 `json:"avg_reward"`
	Pending, Initializing, Running, Completed, Error, Cancelling, Cancelled int
	TotalTraces                                                             int `json:"total_traces"`
	TotalTasks                                                              int `json:"total_tasks"`
}

func (s summary) live() int { return s.Pending + s.Initializing + s.Running + s.Cancelling }

// String is the summary's counts and mean reward: the progress fingerprint of a wait on a job
// (with %v a struct would print the reward pointer's address, new at every poll, and the wait
// would never see a stall).
func (s summary) String() string {
	reward := "none"
	if s.AvgReward != nil {
		reward = fmt.Sprint(*s.AvgReward)
	}
	return fmt.Sprintf("{pending:%d initializing:%d running:%d completed:%d error:%d cancelling:%d cancelled:%d total:%d tasks:%d avg_reward:%s}",
		s.Pending, s.Initializing, s.Running, s.Completed, s.Error, s.Cancelling, s.Cancelled, s.TotalTraces, s.TotalTasks, reward)
}

// waitJob polls a job's summary until no trace is live, calling each with every summary seen. It
// fails only when the summary stops changing for testenv.StallWindow (never on total time: CI
// machines are busy), and then says what every unfinished attempt is doing.
func (a api) waitJob(jobID string, each func(summary)) summary {
	a.t.Helper()
	var s summary
	testenv.Wait(a.t, "job "+jobID, testenv.StallWindow, func() (bool, string) {
		s = summary{}
		a.call("GET", "/v2/jobs/"+jobID+"/summary", nil, &s)
		if each != nil {
			each(s)
		}
		done := s.TotalTraces > 0 && s.live() == 0
		if done {
			return true, s.String()
		}
		return false, s.String() + " " + a.jobWork(jobID)
	}, func() string { return a.describeLive(jobID) })
	return s
}

// jobWork is what a job's live attempts have done so far: its model calls and sandboxes. A wait
// on a job counts a new call or sandbox as progress, so a long attempt, whose status does not
// change for minutes, is not taken for a stall while it works.
func (a api) jobWork(jobID string) string {
	var u struct {
		EnvironmentCost struct{ Count int } `json:"environment_cost"`
		InferenceCost   struct{ Count int } `json:"inference_cost"`
	}
	a.call("GET", "/v2/jobs/"+jobID+"/usage", nil, &u)
	return fmt.Sprintf("calls:%d sandboxes:%d", u.InferenceCost.Count, u.EnvironmentCost.Count)
}

// describeLive says what each unfinished attempt of a job is doing: its trace's status and, when
// the api knows the deployment's Temporal, its Rollout's pending activities (type, the task queue
// it waits on, state, try, last heartbeat, last failure, the worker that last took it) and the
// job's RunList. A stalled
// wait prints it, so that a failure names the stuck piece.
func (a api) describeLive(jobID string) string {
	var out strings.Builder
	var live []traceRow
	total := 0
	for offset := 0; ; offset += 500 {
		var page struct{ Items []traceRow }
		a.call("GET", fmt.Sprintf("/v2/jobs/%s/traces?limit=500&offset=%d", jobID, offset), nil, &page)
		for _, tr := range page.Items {
			switch tr.Status {
			case "pending", "initializing", "running", "cancelling":
				live = append(live, tr)
			}
		}
		total += len(page.Items)
		if len(page.Items) < 500 {
			break
		}
	}
	fmt.Fprintf(&out, "%d of %d attempts unfinished:\n", len(live), total)
	var tc client.Client
	if a.temporal != "" {
		ns := cmp.Or(a.namespace, "default")
		var err error
		if tc, err = client.Dial(client.Options{HostPort: a.temporal, Namespace: ns, Logger: sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))}); err != nil {
			fmt.Fprintf(&out, "  (Temporal at %s: %v)\n", a.temporal, err)
		} else {
			defer tc.Close()
		}
	}
	describe := func(workflowID string) {
		if tc == nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d, err := tc.DescribeWorkflowExecution(ctx, workflowID, "")
		if err != nil {
			fmt.Fprintf(&out, "    workflow %s: %v\n", workflowID, err)
			return
		}
		info := d.GetWorkflowExecutionInfo()
		fmt.Fprintf(&out, "    workflow %s: %s, %d history events, on %s\n", workflowID, info.GetStatus(), info.GetHistoryLength(), info.GetTaskQueue())
		if wt := d.GetPendingWorkflowTask(); wt != nil {
			fmt.Fprintf(&out, "      workflow task %s, try %d, scheduled %s\n", wt.GetState(), wt.GetAttempt(), ago(wt.GetScheduledTime().AsTime()))
		}
		for _, pa := range d.GetPendingActivities() {
			fmt.Fprintf(&out, "      activity %s on %s: %s, try %d, scheduled %s, started %s, last heartbeat %s, worker %q",
				pa.GetActivityType().GetName(), pa.GetActivityOptions().GetTaskQueue().GetName(), pa.GetState(), pa.GetAttempt(),
				ago(pa.GetScheduledTime().AsTime()), ago(pa.GetLastStartedTime().AsTime()), ago(pa.GetLastHeartbeatTime().AsTime()), pa.GetLastWorkerIdentity())
			if f := pa.GetLastFailure(); f != nil {
				fmt.Fprintf(&out, ", last failure: %s", f.GetMessage())
			}
			out.WriteString("\n")
		}
		if n := len(d.GetPendingChildren()); n > 0 {
			fmt.Fprintf(&out, "      %d children pending\n", n)
		}
	}
	for i, tr := range live {
		if i == 20 {
			fmt.Fprintf(&out, "  … and %d more\n", len(live)-i)
			break
		}
		fmt.Fprintf(&out, "  attempt %s (%s): %s %s\n", tr.ID, tr.Name, tr.Status, tr.Error)
		describe("rollout/" + tr.ID)
	}
	out.WriteString("  the job's run:\n")
	describe("runlist/" + jobID)
	return out.String()
}

// ago is how long before now t was, or "never" for a zero time.
func ago(t time.Time) string {
	if t.IsZero() || t.Unix() <= 0 {
		return "never"
	}
	return time.Since(t).Round(100*time.Millisecond).String() + " ago"
}

// jobStatus waits until a job leaves pending and running, and returns its status. Its RunList
// sets it once its last attempt ended, at worst after a reconcile (a minute); the wait fails only
// after testenv.StallWindow without a change.
func (a api) jobStatus(jobID string) string {
	a.t.Helper()
	var job struct{ Status string }
	testenv.Wait(a.t, "the status of job "+jobID, testenv.StallWindow, func() (bool, string) {
		job.Status = ""
		a.call("GET", "/v2/jobs/"+jobID, nil, &job)
		return job.Status != "running" && job.Status != "pending", job.Status
	}, func() string { return a.describeLive(jobID) })
	return job.Status
}

type traceRow struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Status     string   `json:"status"`
	StopReason string   `json:"stop_reason"`
	Reward     *float64 `json:"reward"`
	Error      string   `json:"error"`
	GroupID    string   `json:"group_id"`
}

func (a api) traces(jobID string) []traceRow {
	var page struct{ Items []traceRow }
	a.call("GET", "/v2/jobs/"+jobID+"/traces?limit=500", nil, &page)
	return page.Items
}

func (a api) resolve(path string, field string) string {
	var m map[string]any
	a.call("GET", path, nil, &m)
	s, _ := m[field].(string)
	if s == "" {
		a.t.Fatalf("GET %s: no %s in %v", path, field, m)
	}
	return s
}

func (a api) tasksetID(name string) string {
	var page struct{ Items []struct{ ID, Name string } }
	a.call("GET", "/v2/tasksets?search="+name+"&limit=500", nil, &page)
	for _, it := range page.Items {
		if it.Name == name {
			return it.ID
		}
	}
	a.t.Fatalf("no taskset %s", name)
	return ""
}

// envProcesses lists the example environment processes running from a data dir.
// envProcesses lists the live environment processes of a dev instance: those run from (or,
// under bubblewrap, with a root of) an image unpacked under its build dir.
func envProcesses(dataDir string) string { return imageProcesses(dataDir + "/builds") }

// imageProcesses lists the processes that run from an image unpacked under buildDir.
func imageProcesses(buildDir string) string {
	out, _ := exec.Command("pgrep", "-fa", buildDir+"/images/").Output()
	return strings.TrimSpace(string(out))
}

func TestRolloutEngineRunsTheDemoOnDev(t *testing.T) { eachStore(t, testDemoOnDev) }

func testDemoOnDev(t *testing.T, storeArgs []string, _ string) {
	dataDir := t.TempDir()
	dev := startDev(t, dataDir, append([]string{"--max-job-attempts", "2100"}, storeArgs...)...)
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
	demo := c.tasksetID("demo")

	// The demo with group_size 3: every attempt completes with reward 1.0, at most 2 live at once.
	var launched struct {
		JobID    string `json:"job_id"`
		Accepted int
		Results  []struct {
			TraceIDs []string `json:"trace_ids"`
		}
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": demo, "model_ids": []string{oracle}, "group_size": 3, "max_concurrent": 2, "name": "demo x3"}, &launched); code != 201 {
		t.Fatalf("run_list = %d", code)
	}
	maxLive := 0
	sum := c.waitJob(launched.JobID, func(s summary) { maxLive = max(maxLive, s.Initializing+s.Running) })
	if sum.Completed != 9 || sum.TotalTraces != 9 || sum.TotalTasks != 3 || sum.AvgReward == nil || *sum.AvgReward != 1 {
		t.Fatalf("demo summary = %+v, want 9 completed at reward 1.0", sum)
	}
	if maxLive > 2 {
		t.Errorf("max_concurrent 2, but %d attempts were live at once", maxLive)
	}
	groups := map[string]int{}
	for _, tr := range c.traces(launched.JobID) {
		groups[tr.GroupID]++
		if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || tr.StopReason != "done" {
			t.Errorf("trace %s (%s) = %s/%s reward %v %s", tr.ID, tr.Name, tr.Status, tr.StopReason, tr.Reward, tr.Error)
		}
		var ev struct {
			LatestSeq int `json:"latest_seq"`
			Events    []struct {
				Seq  int
				Kind string
			}
		}
		c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &ev)
		kinds := []string{}
		for i, e := range ev.Events {
			if e.Seq != i {
				t.Fatalf("trace %s: events out of order or missing: seq %d at %d", tr.ID, e.Seq, i)
			}
			kinds = append(kinds, e.Kind)
		}
		if len(kinds) == 0 || kinds[0] != "system_message" || kinds[len(kinds)-1] != "evaluate" || ev.LatestSeq != len(kinds)-1 ||
			strings.Count(strings.Join(kinds, ","), "tool_call") != strings.Count(strings.Join(kinds, ","), "tool_result") {
			t.Errorf("trace %s (%s) events: %v", tr.ID, tr.Name, kinds)
		}
	}
	for g, n := range groups {
		if n != 3 {
			t.Errorf("group %s has %d attempts, want 3", g, n)
		}
	}
	checkJobAnalytics(t, c, launched.JobID, demo)
	if st := c.jobStatus(launched.JobID); st != "completed" {
		t.Errorf("job status = %s, want completed", st)
	}

	// A task whose validation is wrong (one of two todos) earns less than 1.0.
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "wrong", "tasks": []any{map[string]any{
		"name": "half", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk", "walk the dog"}},
		"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}}}}, &up)
	var run struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": oracle}, &run); code != 201 {
		t.Fatalf("run = %d", code)
	}
	c.waitJob(run.JobID, nil)
	var tr traceRow
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward >= 1 {
		t.Errorf("wrong validation = %+v, want completed below 1.0", tr)
	}
	if st := c.jobStatus(run.JobID); st != "completed" {
		t.Errorf("single-run job status = %s, want completed", st)
	}

	// max_steps is honoured: the 2048 task needs 6 moves; with 2 steps it stops and still evaluates.
	var tasks struct {
		Items []struct {
			Name            string
			LatestVersionID string `json:"latest_version_id"`
		}
	}
	c.call("GET", "/v2/tasksets/"+demo+"/tasks", nil, &tasks)
	game := ""
	for _, it := range tasks.Items {
		if it.Name == "2048-reach-16" {
			game = it.LatestVersionID
		}
	}
	c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": game, "model_id": oracle, "max_steps": 2}, &run)
	c.waitJob(run.JobID, nil)
	c.call("GET", "/v2/trace/"+run.TraceID, nil, &tr)
	if tr.Status != "completed" || tr.StopReason != "max_steps" || tr.Reward == nil || *tr.Reward >= 1 {
		t.Errorf("max_steps 2 = %+v, want completed, stop_reason max_steps, reward below 1", tr)
	}

	// cancel_job during a run of 50 attempts: every attempt ends cancelled (or had already
	// finished before the cancel arrived), and no environment process is left.
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{game}, "model_ids": []string{oracle}, "group_size": 50, "max_concurrent": 2}, &launched)
	time.Sleep(300 * time.Millisecond)
	var cancelled struct{ Cancelled int }
	if code := c.call("POST", "/v2/rollouts/cancel_job", map[string]any{"job_id": launched.JobID}, &cancelled); code != 200 {
		t.Fatalf("cancel_job = %d", code)
	}
	sum = c.waitJob(launched.JobID, nil)
	if sum.Cancelled+sum.Completed != 50 || sum.Cancelled < 40 || sum.Error != 0 {
		t.Errorf("after cancel_job: %+v; want every attempt cancelled but those done before the cancel", sum)
	}
	if st := c.jobStatus(launched.JobID); st != "cancelled" {
		t.Errorf("cancelled job status = %s", st)
	}
	// Each cancelled attempt tore its sandbox down before it recorded cancelled: only the
	// processes' exit is left, which takes well under a second even on a loaded machine.
	deadline := time.Now().Add(10 * time.Second)
	for envProcesses(dataDir) != "" && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p := envProcesses(dataDir); p != "" {
		t.Errorf("environment processes left after cancel_job:\n%s", p)
	}
	// The same from the command line: proctor jobs cancel.
	c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{game}, "model_ids": []string{oracle}, "group_size": 20, "max_concurrent": 2}, &launched)
	var out bytes.Buffer
	if err := runCLI(t.Context(), []string{"jobs", "cancel", launched.JobID, "--api-url", c.base, "--api-key", c.key}, &out, io.Discard); err != nil ||
		!strings.Contains(out.String(), "job "+launched.JobID+": cancelling") || !strings.Contains(out.String(), "proctor jobs watch "+launched.JobID) {
		t.Errorf("proctor jobs cancel: %v\n%s", err, out.String())
	}
	if sum = c.waitJob(launched.JobID, nil); sum.Cancelled == 0 || sum.Cancelled+sum.Completed != 20 {
		t.Errorf("after proctor jobs cancel: %+v", sum)
	}
	if st := c.jobStatus(launched.JobID); st != "cancelled" {
		t.Errorf("the job cancelled from the command line = %s", st)
	}
	// The running provider's own directory holds its lock and no work dir.
	left, _ := filepath.Glob(filepath.Join(dataDir, "sandboxes", "owner-*", "*"))
	if left = slices.DeleteFunc(left, func(p string) bool { return filepath.Base(p) == ".lock" }); len(left) != 0 {
		t.Errorf("sandbox work dirs left: %v", left)
	}

	// submit honours its whole body: the task by name within env, the scenario's arguments
	// (merged over the task's: one of two todos is not what the oracle adds, so reward 0.5), the
	// agent config's max_steps, group_id, slug and runtime_config; an unknown field is ignored.
	traceID := uuid.NewString()
	var sub struct {
		JobID   string `json:"job_id"`
		TraceID string `json:"trace_id"`
	}
	if code := c.call("POST", "/v2/rollouts/submit", map[string]any{"trace_id": traceID, "env": "todo", "task": "todo-add",
		"agent": map[string]any{"type": "oracle", "config": map[string]any{"max_steps": 5, "temperature": 0.2}},
		"args":  map[string]any{"items": []string{"buy milk", "feed the cat"}}, "group_id": "sdk-group", "slug": "sdk-run",
		"runtime_config": map[string]any{"limits": map[string]any{"run_timeout_s": 300}}, "sent_by_a_newer_sdk": true}, &sub); code != 201 || sub.TraceID != traceID {
		t.Fatalf("submit by name within env = %d %+v", code, sub)
	}
	c.waitJob(sub.JobID, nil)
	var subJob struct {
		IsRemote bool `json:"is_remote"`
		Metadata struct {
			ResolvedAgents []struct {
				ModelName string `json:"model_name"`
			} `json:"resolved_agents"`
			SDKAgentParams struct {
				Type   string
				Config map[string]any
			} `json:"sdk_agent_params"`
		}
	}
	var subCard struct {
		Enrichments map[string]struct {
			JobType string `json:"job_type"`
		}
	}
	c.call("POST", "/v2/jobs/enrich", []string{sub.JobID}, &subCard)
	if c.call("GET", "/v2/jobs/"+sub.JobID, nil, &subJob); !subJob.IsRemote || subCard.Enrichments[sub.JobID].JobType != "remote" ||
		len(subJob.Metadata.ResolvedAgents) != 1 || subJob.Metadata.ResolvedAgents[0].ModelName != "oracle" || subJob.Metadata.SDKAgentParams.Type != "oracle" ||
		subJob.Metadata.SDKAgentParams.Config["temperature"] != 0.2 {
		t.Errorf("a submitted job: %+v, job_type %+v", subJob, subCard)
	}
	c.call("GET", "/v2/trace/"+traceID, nil, &tr)
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 0.5 || tr.Name != "sdk-run" || tr.GroupID != "sdk-group" {
		t.Errorf("submitted trace = %+v; want completed at 0.5 (its own args), named sdk-run in group sdk-group", tr)
	}
	var actx struct {
		ScenarioArgs map[string]any `json:"scenario_args"`
	}
	c.call("GET", "/v2/trace/"+traceID+"/analysis-context", nil, &actx)
	if items, _ := actx.ScenarioArgs["items"].([]any); len(items) != 2 || items[1] != "feed the cat" {
		t.Errorf("analysis-context scenario_args = %v, want the submitted ones", actx.ScenarioArgs)
	}
	// max_steps 1 from the agent config stops the 2048 task after one move.
	if code := c.call("POST", "/v2/rollouts/submit", map[string]any{"trace_id": uuid.NewString(), "task": "2048-reach-16",
		"agent": map[string]any{"type": "oracle", "config": map[string]any{"max_steps": 1}}}, &sub); code != 201 {
		t.Fatalf("submit by name = %d", code)
	}
	c.waitJob(sub.JobID, nil)
	c.call("GET", "/v2/trace/"+sub.TraceID, nil, &tr)
	if tr.StopReason != "max_steps" {
		t.Errorf("submit with max_steps 1 = %+v, want stop_reason max_steps", tr)
	}
	for _, bad := range []struct {
		body map[string]any
		code int
	}{
		{map[string]any{"trace_id": uuid.NewString(), "env": "game2048", "task": "todo-add", "agent": map[string]any{"type": "oracle"}}, 404},
		{map[string]any{"trace_id": uuid.NewString(), "task": "no-such-task", "agent": map[string]any{"type": "oracle"}}, 404},
		{map[string]any{"trace_id": uuid.NewString(), "task": "todo-add", "agent": map[string]any{"type": "oracle", "config": map[string]any{"max_steps": "many"}}}, 422},
		{map[string]any{"trace_id": uuid.NewString(), "task": "todo-add", "agent": map[string]any{"type": "oracle"}, "args": "not an object"}, 422},
		{map[string]any{"trace_id": uuid.NewString(), "task": "todo-add", "agent": map[string]any{"type": "oracle", "config": map[string]any{"allowed_tools": "add_*"}}}, 422},
	} {
		if code := c.call("POST", "/v2/rollouts/submit", bad.body, nil); code != bad.code {
			t.Errorf("submit %v = %d, want %d", bad.body, code, bad.code)
		}
	}

	// A launch over the server's bound (--max-job-attempts 2100) is refused before any work; a
	// launch past 1,000 attempts answers counts and only the rejected pairs, not every trace id.
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{game, game, game, game, game}, "model_ids": []string{oracle}, "group_size": 500}, nil); code != 422 {
		t.Errorf("a launch of 2,500 attempts on a server bounded at 2,100 = %d, want 422", code)
	}
	var big struct {
		JobID            string `json:"job_id"`
		Total, Accepted  int
		Results          []json.RawMessage
		ResultsTruncated bool `json:"results_truncated"`
	}
	missing := uuid.NewString()
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": []string{game, game, missing}, "model_ids": []string{oracle}, "group_size": 501, "max_concurrent": 1}, &big); code != 201 {
		t.Fatalf("a launch of 1,002 attempts = %d", code)
	}
	if !big.ResultsTruncated || big.Total != 3 || big.Accepted != 2 || len(big.Results) != 1 || !strings.Contains(string(big.Results[0]), missing) {
		t.Errorf("a launch past 1,000 attempts answered %+v; want truncated results listing only the rejected pair", big)
	}
	c.call("POST", "/v2/rollouts/cancel_job", map[string]any{"job_id": big.JobID}, nil)
	if sum := c.waitJob(big.JobID, nil); sum.TotalTraces != 1002 || sum.Cancelled < 990 {
		t.Errorf("the large job after cancel_job: %+v; want 1,002 traces, nearly all cancelled", sum)
	}
}
