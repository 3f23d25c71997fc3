package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

func TestModelJobAndTraceReads(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{PublicURL: "https://proctor.example.com/"})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"demo","tasks":[{"name":"a","prompt":"p"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)

		page := decode[Page[Model]](t, f.do("GET", "/v2/models", "key", nil))
		if page.Total != 1 || page.Limit != 100 || page.Items[0].ModelName != "oracle" {
			t.Errorf("models = %+v", page)
		}
		if m := decode[Model](t, f.do("GET", "/v2/models/resolve?model=oracle", "key", nil)); m.ID != oracle.ID {
			t.Errorf("resolve = %+v", m)
		}
		wantEnvelope(t, f.do("GET", "/v2/models/resolve?model=gpt-9", "key", nil), 404, "not_found")
		wantValidation(t, f.do("GET", "/v2/models/resolve", "key", nil), "query.model")
		if m := decode[Model](t, f.do("GET", "/v2/models/"+oracle.ID.String(), "key", nil)); m.Adapter != "oracle" {
			t.Errorf("get model = %+v", m)
		}

		traceID := uuid.New()
		job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "first", MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: traceID, TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		one := 1.0
		rollouts.Of(s).TransitionTrace(ctx, traceID, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 1})
		rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{
			{TraceID: traceID, Seq: 0, Kind: models.EventUser, Text: "p", StartedAt: now, Attempt: 1},
			{TraceID: traceID, Seq: 1, Kind: models.EventToolCall, Text: "add_todo", Data: models.EventData(models.ToolCallEventData{Name: "add_todo"}), StartedAt: now, Attempt: 1},
		})
		rollouts.Of(s).AppendTraceLogs(ctx, []models.TraceLog{{TraceID: traceID, Source: rollouts.LogEnv, Seq: 0, Stream: "stderr", Line: "env up", Time: now},
			{TraceID: traceID, Source: rollouts.LogWorker, Seq: 0, Stream: "worker", Line: "sandbox started", Time: now}})

		rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{{TraceID: traceID, Seq: 2, Kind: models.EventToolResult, Text: "no such todo",
			Data: models.EventData(models.ToolResultEventData{IsError: true}), StartedAt: now, Attempt: 1}})
		tid := "/v2/trace/" + traceID.String()
		ev := f.do("GET", tid+"/events", "key", nil)
		if !strings.Contains(string(ev.body), `"latest_seq":2`) || !strings.Contains(string(ev.body), `"status":"running"`) || strings.Count(string(ev.body), `"seq":`) != 3 {
			t.Errorf("events = %s", ev.body)
		}
		if ev := f.do("GET", tid+"/events?since_seq=1", "key", nil); strings.Count(string(ev.body), `"seq":`) != 1 {
			t.Errorf("events since 1 = %s", ev.body)
		}
		wantValidation(t, f.do("GET", tid+"/events?since_seq=-2", "key", nil), "query.since_seq")

		ac := decode[AnalysisContext](t, f.do("GET", tid+"/analysis-context", "key", nil))
		if ac.Prompt != "p" || len(ac.FailedSpans) != 1 || ac.FailedSpans[0].Seq != 2 || len(ac.EnvLogs) != 1 || len(ac.WorkerLogs) != 1 || ac.JobID != job.ID {
			t.Errorf("analysis context = %+v", ac)
		}
		if ac := decode[AnalysisContext](t, f.do("GET", tid+"/analysis-context?include_env_logs=false&include_worker_logs=false&include_spans=false", "key", nil)); len(ac.EnvLogs)+len(ac.WorkerLogs)+len(ac.FailedSpans) != 0 {
			t.Errorf("analysis context without spans and logs = %+v", ac)
		}
		if r := f.do("GET", tid+"/env-logs", "key", nil); !strings.Contains(string(r.body), `"log":"env up"`) || !strings.Contains(string(r.body), `"still_running":true`) {
			t.Errorf("env-logs = %s", r.body)
		}
		if r := f.do("GET", tid+"/logs", "key", nil); !strings.Contains(string(r.body), "sandbox started") {
			t.Errorf("logs = %s", r.body)
		}
		rollouts.Of(s).TransitionTrace(ctx, traceID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one, StopReason: models.StopDone, EvaluationResult: &models.EvaluationResult{Reward: 1, Content: "all there"}})
		info := decode[TraceInfo](t, f.do("GET", tid+"/info", "key", nil))
		if info.Status != "completed" || *info.Reward != 1 || decode[models.EvaluationResult](t, response{body: info.EvaluationResult}).Content != "all there" || !info.CanEdit || info.JobName != "first" {
			t.Errorf("info = %+v", info)
		}
		if r := decode[TraceInfo](t, f.do("PATCH", tid, "key", strings.NewReader(`{"name":"best run"}`))); r.Name != "best run" {
			t.Errorf("patch trace = %+v", r)
		}

		jid := "/v2/jobs/" + job.ID.String()
		sum := decode[JobSummary](t, f.do("GET", jid+"/summary", "key", nil))
		if sum.Completed != 1 || sum.TotalTraces != 1 || sum.TotalTasks != 1 || *sum.AvgReward != 1 {
			t.Errorf("summary = %+v", sum)
		}
		if jobs := decode[Page[Job]](t, f.do("GET", "/v2/jobs?taskset_id="+up.TasksetID.String(), "key", nil)); jobs.Total != 0 {
			t.Errorf("jobs filtered by a taskset they were not launched from = %d", jobs.Total)
		}
		if jobs := decode[Page[Job]](t, f.do("GET", "/v2/jobs", "key", nil)); jobs.Total != 1 || jobs.Items[0].Name != "first" {
			t.Errorf("jobs = %+v", jobs)
		}
		if active := f.do("GET", "/v2/jobs/active", "key", nil); strings.TrimSpace(string(active.body)) == "[]" {
			t.Errorf("a pending job is missing from active: %s", active.body)
		}
		if j := decode[Job](t, f.do("PATCH", jid, "key", strings.NewReader(`{"description":"nightly"}`))); j.Description != "nightly" || j.Name != "first" {
			t.Errorf("patch job = %+v", j)
		}
		traces := decode[Page[Trace]](t, f.do("GET", jid+"/traces", "key", nil))
		if traces.Total != 1 || traces.Items[0].ID != traceID {
			t.Errorf("job traces = %+v", traces)
		}
		if r := f.do("POST", jid+"/invalidate", "key", nil); !strings.Contains(string(r.body), `"updated_count":1`) {
			t.Errorf("invalidate = %s", r.body)
		}
		if r := f.do("POST", "/v2/trace/batch-validate", "key", strings.NewReader(`{"trace_ids":["`+traceID.String()+`"],"is_valid":true}`)); !strings.Contains(string(r.body), `"updated_count":1`) {
			t.Errorf("batch-validate = %s", r.body)
		}

		// Related traces: a second job's attempt at the same task.
		second := uuid.New()
		rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "second", MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: second, TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID}}})
		related := func(query string) []RelatedTrace {
			t.Helper()
			return decode[[]RelatedTrace](t, f.do("GET", tid+"/related?"+query, "key", nil))
		}
		if r := related("kind=job"); len(r) != 1 || r[0].ID != traceID || r[0].JobName != "first" || r[0].Model.ModelName != "oracle" {
			t.Errorf("related job = %+v", r)
		}
		if r := related("kind=task&order=asc"); len(r) != 2 || r[0].ID != traceID || r[1].ID != second {
			t.Errorf("related task asc = %+v", r)
		}
		if r := related("kind=task&scope_to_job=true"); len(r) != 1 {
			t.Errorf("related task scoped to the job = %+v", r)
		}
		if r := related("kind=recent&status=pending"); len(r) != 1 || r[0].ID != second {
			t.Errorf("recent pending = %+v", r)
		}
		if r := related("kind=discover&limit=1"); len(r) != 1 || r[0].ID != second {
			t.Errorf("discover newest = %+v", r)
		}
		wantValidation(t, f.do("GET", tid+"/related", "key", nil), "query.kind")
		wantValidation(t, f.do("GET", tid+"/related?kind=job&status=done", "key", nil), "query.status")
		wantValidation(t, f.do("GET", tid+"/related?kind=everything", "key", nil), "query.kind")

		// Unpublished: invisible without credentials; published: readable, not writable.
		wantEnvelope(t, f.do("GET", jid, "", nil), 404, "not_found")
		wantEnvelope(t, f.do("GET", tid+"/events", "", nil), 404, "not_found")
		pub := decode[Published](t, f.do("POST", jid+"/publish", "key", nil))
		if !pub.Success || pub.PublicURL != "https://proctor.example.com/v2/jobs/"+job.ID.String() {
			t.Errorf("publish = %+v", pub)
		}
		if r := f.do("GET", tid+"/events", "", nil); r.status != 200 {
			t.Errorf("a published trace anonymously = %d", r.status)
		}
		// Another reader of a published trace does not see the worker's host paths; its team does.
		rollouts.Of(s).AppendTraceLogs(ctx, []models.TraceLog{{TraceID: traceID, Source: rollouts.LogWorker, Seq: 1, Stream: "worker",
			Line: "try 1: sandbox started (/srv/proctor/sandboxes/abc123/bin/todo --stdio)", Time: now}})
		if r := f.do("GET", tid+"/logs", "", nil); !strings.Contains(string(r.body), "(…/todo --stdio)") || strings.Contains(string(r.body), "/srv/proctor") {
			t.Errorf("a published trace's worker log, anonymously: %s", r.body)
		}
		if r := f.do("GET", tid+"/logs", "key", nil); !strings.Contains(string(r.body), "/srv/proctor/sandboxes/abc123/bin/todo") {
			t.Errorf("the team's own worker log: %s", r.body)
		}
		if r := decode[[]RelatedTrace](t, f.do("GET", tid+"/related?kind=discover", "", nil)); len(r) != 1 || r[0].ID != traceID {
			t.Errorf("discover anonymously lists only published traces: %+v", r)
		}
		wantEnvelope(t, f.do("GET", tid+"/related?kind=recent", "", nil), 401, "unauthorized")
		wantEnvelope(t, f.do("GET", tid+"/analysis-context", "", nil), 401, "unauthorized")
		if j := decode[Job](t, f.do("GET", jid, "", nil)); !j.Published || j.CanEdit {
			t.Errorf("a published job anonymously = %+v", j)
		}
		_, otherKey := otherTeam(t, s)
		wantEnvelope(t, f.do("PATCH", jid, "Bearer "+otherKey, strings.NewReader(`{"name":"mine"}`)), 403, "forbidden")
		wantEnvelope(t, f.do("GET", "/v2/jobs/"+uuid.NewString()+"/summary", "key", nil), 404, "not_found")
	})
}

func TestRulesAcrossFieldsAnswer422(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	model := uuid.NewString()
	for _, tc := range []struct {
		method, path, body, location string
	}{
		{"POST", "/v2/rollouts/run_list", `{"model_ids": ["` + model + `"]}`, "body.task_version_ids"},
		{"POST", "/v2/rollouts/run_list", `{"model_ids": ["` + model + `"], "taskset_id": "` + uuid.NewString() + `", "task_version_ids": ["` + uuid.NewString() + `"]}`, "body.task_version_ids"},
		{"PATCH", "/v2/tasks/status", `{"ids": ["` + uuid.NewString() + `"]}`, "body.status"},
		{"PATCH", "/v2/tasks/status", `{"status": "ready"}`, "body.ids"},
		{"GET", "/v2/trace/" + uuid.NewString() + "/related?status=running,done", "", "query.status"},
		{"POST", "/v2/rollouts/run", `{"task_version_id": "` + uuid.NewString() + `", "model_id": "` + model + `", "trace_id": "` + uuid.Nil.String() + `"}`, "body.trace_id"},
		{"POST", "/v2/rollouts/submit", `{"trace_id": "` + uuid.Nil.String() + `", "task": "t", "agent": {"type": "oracle"}}`, "body.trace_id"},
		{"POST", "/v2/rollouts/submit", `{"trace_id": "` + uuid.NewString() + `", "job_id": "` + uuid.Nil.String() + `", "task": "t", "agent": {"type": "oracle"}}`, "body.job_id"},
	} {
		var body io.Reader
		if tc.body != "" {
			body = strings.NewReader(tc.body)
		}
		wantValidation(t, f.do(tc.method, tc.path, "key", body), tc.location)
	}
}

func TestControlCharactersAre422AtTheEdge(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	wantValidation(t, f.do("GET", "/v2/tasksets?search=milk%00", "key", nil), "query.search")
	wantValidation(t, f.do("GET", "/v2/tasksets/by-name/a%01b", "key", nil), "path")
	wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "x\u0000y", "tasks": [{"name": "a", "prompt": "p"}]}`)), "body")
	wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "x", "tasks": [{"name": "a", "prompt": "p", "args": {"k": "\u001b[31m"}}]}`)), "body")
	// Tabs and newlines are text; an escaped backslash before "u0000" is no control character.
	r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "ok", "tasks": [{"name": "a", "prompt": "line one\nline\ttwo \\u0000"}]}`))
	if r.status != 201 {
		t.Errorf("upload with tabs, newlines and an escaped backslash = %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/v2/tasksets?search=milk", "key", nil); r.status != 200 {
		t.Errorf("a plain query = %d %s", r.status, r.body)
	}
}

func TestErrorsDoNotReflectLargeInput(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	// 50,001 tasks: one error, without the array echoed back.
	var b strings.Builder
	b.WriteString(`{"taskset_name": "big", "tasks": [`)
	for i := range 50001 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"name": "t"}`)
	}
	b.WriteString(`]}`)
	r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(b.String()))
	wantValidation(t, r, "body.tasks")
	if len(r.body) > 4096 {
		t.Errorf("a 422 for 50,001 tasks is %d bytes", len(r.body))
	}
	// A long string over its bound, and a body that is not JSON.
	long := strings.Repeat("x", 900_000)
	r = f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "`+long+`", "tasks": [{"name": "a", "prompt": "p"}]}`))
	if r.status != 422 || len(r.body) > 4096 {
		t.Errorf("an oversized name = %d, %d bytes", r.status, len(r.body))
	}
	r = f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "`+long))
	if r.status != 400 || len(r.body) > 4096 {
		t.Errorf("broken JSON = %d, %d bytes", r.status, len(r.body))
	}
	// Many errors are capped, the last saying how many more there were.
	var many strings.Builder
	many.WriteString(`{"taskset_name": "many", "tasks": [`)
	for i := range 200 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"name": ""}`)
	}
	many.WriteString(`]}`)
	r = f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(many.String()))
	var em struct{ Errors []struct{ Message string } }
	json.Unmarshal(r.body, &em)
	if r.status != 422 || len(em.Errors) != 51 || !strings.Contains(em.Errors[50].Message, "more errors") {
		t.Errorf("200 invalid tasks = %d with %d errors", r.status, len(em.Errors))
	}
	// A long unknown path is not echoed whole.
	if r := f.do("GET", "/v2/"+strings.Repeat("a", 100_000), "key", nil); r.status != 404 || len(r.body) > 1024 {
		t.Errorf("a long unknown path = %d, %d bytes", r.status, len(r.body))
	}
}

func TestUnknownFieldsAreIgnoredAndKnownOnesStillChecked(t *testing.T) {
	f := newFixture(t, storetest.Open(t, models.SQLite), Options{})
	// A client of another version sends keys this server does not name, at the top and nested.
	r := f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "fwd", "from_a_newer_client": {"x": 1},
		"tasks": [{"name": "a", "prompt": "p", "priority": 3, "runtime_config": {"limits": {"run_timeout_s": 60, "burst": true}}}]}`))
	if r.status != 201 {
		t.Fatalf("upload with unknown fields = %d %s", r.status, r.body)
	}
	wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "fwd", "tasks": "a"}`)), "body.tasks")
	wantValidation(t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name": "fwd", "extra": 1,
		"tasks": [{"name": "a", "prompt": "p", "runtime_config": {"limits": {"run_timeout_s": "soon"}}}]}`)), "body.tasks[0].runtime_config.limits.run_timeout_s")
}

func TestRedactHostPaths(t *testing.T) {
	for in, want := range map[string]string{
		"exec /home/ci/.proctor/envs/todo: no such file":   "exec …/todo: no such file",
		"started on host/worker-7/ab12cd34 (/usr/bin/env)": "started on host…/ab12cd34 (…/env)",
		"a/b relative and /single stay":                    "a/b relative and /single stay",
		"dir /var/lib/proctor/sandboxes/ gone":             "dir …/sandboxes gone",
	} {
		if got := redactHostPaths(in); got != want {
			t.Errorf("redactHostPaths(%q) = %q, want %q", in, got, want)
		}
	}
}

// launchRecorder is a rollout engine that starts nothing: the launch routes record their rows and
// answer as they would with one.
type launchRecorder struct{}

func (launchRecorder) StartRollout(context.Context, uuid.UUID) error           { return nil }
func (launchRecorder) StartRunList(context.Context, uuid.UUID, int) error      { return nil }
func (launchRecorder) RetryRunList(context.Context, uuid.UUID, int, int) error { return nil }
func (launchRecorder) CancelTrace(context.Context, uuid.UUID) error            { return nil }
func (launchRecorder) CancelJob(context.Context, uuid.UUID) (int, error)       { return 0, nil }
func (launchRecorder) ResumeJob(context.Context, uuid.UUID) error              { return nil }
func (launchRecorder) StartReplayCheck(context.Context, uuid.UUID, uuid.UUID, int) error {
	return nil
}

func (launchRecorder) StartCertification(context.Context, uuid.UUID, uuid.UUID, int) error {
	return nil
}

// A job launched as the follow-up of another (run_list's parent_job_id) names it in its
// metadata; one launched on its own has a null parent. The parent must be a job the caller sees.
func TestAJobNamesItsParentJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{Workflows: launchRecorder{}})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"demo","tasks":[{"name":"a","prompt":"p"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)
		runList := func(extra string) response {
			return f.do("POST", "/v2/rollouts/run_list", "key", strings.NewReader(`{"task_version_ids":["`+up.TaskVersionIDs[0].String()+
				`"],"model_ids":["`+oracle.ID.String()+`"]`+extra+`}`))
		}
		launched := func(r response) uuid.UUID {
			t.Helper()
			if r.status != 201 {
				t.Fatalf("run_list = %d %s", r.status, r.body)
			}
			var out struct {
				JobID uuid.UUID `json:"job_id"`
			}
			json.Unmarshal(r.body, &out)
			return out.JobID
		}
		first := launched(runList(""))
		job := decode[Job](t, f.do("GET", "/v2/jobs/"+first.String(), "key", nil))
		if job.Metadata.ParentJobID != nil || len(job.Metadata.ResolvedAgents) != 1 || job.Metadata.ResolvedAgents[0].ModelName != "oracle" {
			t.Errorf("a job launched on its own: metadata %+v, want no parent and the oracle resolved", job.Metadata)
		}
		if r := f.do("GET", "/v2/jobs/"+first.String(), "key", nil); !strings.Contains(string(r.body), `"parent_job_id":null`) {
			t.Errorf("a job without a parent: %s, want parent_job_id null", r.body)
		}

		rerun := launched(runList(`,"parent_job_id":"` + first.String() + `"`))
		job = decode[Job](t, f.do("GET", "/v2/jobs/"+rerun.String(), "key", nil))
		if job.Metadata.ParentJobID == nil || *job.Metadata.ParentJobID != first {
			t.Errorf("a re-run: metadata %+v, want parent_job_id %s", job.Metadata, first)
		}
		enriched := decode[struct {
			Jobs []JobCard `json:"jobs"`
		}](t, f.do("GET", "/v2/jobs/enriched?taskset_id="+up.TasksetID.String(), "key", nil))
		for _, card := range enriched.Jobs {
			if card.ID == rerun && (card.Metadata.ParentJobID == nil || *card.Metadata.ParentJobID != first) {
				t.Errorf("the re-run's job card: metadata %+v", card.Metadata)
			}
		}

		// agent_config (a Proctor extension) is merged over each task's, key by key, for every
		// attempt; a malformed pattern is a 422 that points at it.
		configured := launched(runList(`,"agent_config":{"system_prompt":"Be brief.","temperature":0.2}`))
		rows, _, err := rollouts.Of(s).ListJobTraces(ctx, f.caller, configured, 10, 0)
		if err != nil || len(rows) != 1 || rows[0].AgentConfig == nil || rows[0].AgentConfig.SystemPrompt != "Be brief." ||
			rows[0].AgentConfig.Extra["temperature"] != 0.2 {
			t.Errorf("the attempts of a launch with agent_config: %+v, %v", rows, err)
		}
		wantValidation(t, runList(`,"agent_config":{"allowed_tools":["["]}`), "body.agent_config.allowed_tools[0]")

		// Another team's unpublished job, or none at all, is no parent; the nil UUID is no id.
		other, _ := otherTeam(t, s)
		theirs, _, err := rollouts.Of(s).LaunchJob(ctx, other, rollouts.Launch{Name: "theirs"})
		if err != nil {
			t.Fatal(err)
		}
		wantEnvelope(t, runList(`,"parent_job_id":"`+theirs.ID.String()+`"`), 404, "not_found")
		wantEnvelope(t, runList(`,"parent_job_id":"`+uuid.NewString()+`"`), 404, "not_found")
		wantValidation(t, runList(`,"parent_job_id":"`+uuid.Nil.String()+`"`), "body.parent_job_id")
		wantValidation(t, runList(`,"parent_job_id":"nope"`), "body.parent_job_id")
		if page := decode[Page[Job]](t, f.do("GET", "/v2/jobs", "key", nil)); page.Total != 3 {
			t.Errorf("refused launches left jobs behind: %d jobs, want 3", page.Total)
		}
	})
}

// A client that knows only the spec's fields reads a trace's env-logs to the end: it passes each
// page's last_timestamp back (after_timestamp) until has_more is false, and reads every line once
// though lines share milliseconds.
func TestEnvLogsAreReadToTheEndByTheirLastTimestamp(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"demo","tasks":[{"name":"a","prompt":"p"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)
		traceID := uuid.New()
		if _, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "logs", MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: traceID, TaskVersionID: up.TaskVersionIDs[0], ModelID: oracle.ID}}}); err != nil {
			t.Fatal(err)
		}
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		// Milliseconds 0, 1 and 2 hold 2, 3 and 2 lines.
		var logs []models.TraceLog
		var want []string
		for i, ms := range []int{0, 0, 1, 1, 1, 2, 2} {
			line := fmt.Sprintf("line %d", i)
			logs = append(logs, models.TraceLog{TraceID: traceID, Source: rollouts.LogEnv, Seq: i, Stream: "stderr", Line: line,
				Time: base.Add(time.Duration(ms)*time.Millisecond + time.Duration(i)*time.Microsecond)})
			want = append(want, line)
		}
		rollouts.Of(s).AppendTraceLogs(ctx, logs)
		one := 1.0
		rollouts.Of(s).TransitionTrace(ctx, traceID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one, StopReason: models.StopDone})

		type page struct {
			Logs []struct {
				Log  string    `json:"log"`
				Time time.Time `json:"time"`
			} `json:"logs"`
			Count         int   `json:"count"`
			HasMore       bool  `json:"has_more"`
			LastTimestamp int64 `json:"last_timestamp"`
			StillRunning  bool  `json:"still_running"`
		}
		envLogs := "/v2/trace/" + traceID.String() + "/env-logs"
		var got []string
		var sizes []int
		query := "?limit=4"
		for range 10 {
			p := decode[page](t, f.do("GET", envLogs+query, "key", nil))
			sizes = append(sizes, p.Count)
			for _, l := range p.Logs {
				got = append(got, l.Log)
			}
			if n := len(p.Logs); n == 0 || p.LastTimestamp != p.Logs[n-1].Time.UnixMilli() || p.StillRunning {
				t.Fatalf("page %s = %+v", query, p)
			}
			if !p.HasMore {
				break
			}
			query = fmt.Sprintf("?limit=4&after_timestamp=%d", p.LastTimestamp)
		}
		if !slices.Equal(got, want) || !slices.Equal(sizes, []int{2, 3, 2}) {
			t.Errorf("read %q in pages of %v; want %q once each, in pages of [2 3 2] (none ends inside a millisecond)", got, sizes, want)
		}
		// An empty page keeps the cursor it was asked with.
		last := base.Add(2 * time.Millisecond).UnixMilli()
		if p := decode[page](t, f.do("GET", fmt.Sprintf("%s?after_timestamp=%d", envLogs, last), "key", nil)); p.Count != 0 || p.HasMore || p.LastTimestamp != last {
			t.Errorf("the page after the last line = %+v; want none, last_timestamp %d", p, last)
		}
		wantValidation(t, f.do("GET", envLogs+"?after_seq=1&after_timestamp=5", "key", nil), "query.after_timestamp")
		wantValidation(t, f.do("GET", envLogs+"?after_timestamp=-2", "key", nil), "query.after_timestamp")
		wantValidation(t, f.do("GET", envLogs+"?after_timestamp=soon", "key", nil), "query.after_timestamp")
	})
}
