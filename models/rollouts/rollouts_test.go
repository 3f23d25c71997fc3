package rollouts_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/secrets"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

func TestModelCatalog(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		m := &models.LLMModel{ModelName: "gpt-x", Name: "GPT X", Provider: "openai", Adapter: models.AdapterOpenAI, APIKeyEnv: "OPENAI_API_KEY"}
		if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
			t.Fatal(err)
		}
		again := &models.LLMModel{ModelName: "gpt-x", Name: "GPT X (renamed)", Provider: "openai", Adapter: models.AdapterOpenAI}
		if err := llms.Of(s).UpsertModel(ctx, again); err != nil {
			t.Fatal(err)
		}
		llms.Of(s).UpsertModel(ctx, &models.LLMModel{ModelName: "secret", Name: "S", Provider: "x", Adapter: models.AdapterOpenAI, TeamID: &a.TeamID})
		llms.Of(s).UpsertModel(ctx, &models.LLMModel{ModelName: "old", Name: "O", Provider: "x", Adapter: models.AdapterOpenAI, Hidden: true})
		list, total, err := llms.Of(s).ListModels(ctx, a, 10, 0)
		if err != nil || total != 2 || list[0].ModelName != "gpt-x" || list[0].Name != "GPT X (renamed)" || list[1].ModelName != "secret" {
			t.Fatalf("models for alpha = %+v (%d), %v", list, total, err)
		}
		if _, total, _ := llms.Of(s).ListModels(ctx, b, 10, 0); total != 1 {
			t.Errorf("beta sees %d models, want the shared one only", total)
		}
		got, err := llms.Of(s).ResolveModel(ctx, b, "gpt-x")
		if err != nil || got.ID != m.ID {
			t.Errorf("resolve by name = %+v, %v (want the first id kept by the upsert)", got, err)
		}
		if _, err := llms.Of(s).ResolveModel(ctx, b, m.ID.String()); err != nil {
			t.Errorf("resolve by id: %v", err)
		}
		if _, err := llms.Of(s).ResolveModel(ctx, b, "secret"); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's model: %v", err)
		}
	})
}

func TestLaunchTransitionsAndJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		var lts []rollouts.LaunchTrace
		for _, v := range versions {
			for g := 0; g < 2; g++ {
				lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: v, ModelID: oracle.ID, GroupID: v.String(), MaxSteps: 10})
			}
		}
		job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Name: "run 1", MaxSteps: 10, GroupSize: 2, MaxConcurrent: 2, Traces: lts})
		if err != nil || len(traces) != 4 || job.Status != models.JobPending {
			t.Fatalf("launch = %+v %d, %v", job, len(traces), err)
		}
		// Idempotent on trace ids: launching the same ids into the same job creates nothing.
		again, traces2, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{JobID: &job.ID, MaxSteps: 10, GroupSize: 2, MaxConcurrent: 2, Traces: lts[:1]})
		if err != nil || again.ID != job.ID || len(traces2) != 1 || traces2[0].ID != lts[0].TraceID {
			t.Fatalf("relaunch = %+v %+v, %v", again, traces2, err)
		}
		if ids, _ := rollouts.Of(s).JobTraceIDsPage(ctx, job.ID, 0, 10); len(ids) != 4 {
			t.Errorf("the job has %d traces after a relaunch, want 4", len(ids))
		}
		// A launch repeated without a job id (a client retrying run or submit with its own trace
		// id) returns the original job instead of an empty new one.
		for range 2 {
			again, traces3, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 10, GroupSize: 1, MaxConcurrent: 1, Traces: lts[1:2]})
			if err != nil || again.ID != job.ID || len(traces3) != 1 || traces3[0].ID != lts[1].TraceID {
				t.Fatalf("repeated launch = %+v %+v, %v; want the original job", again, traces3, err)
			}
		}
		if _, total, _ := rollouts.Of(s).ListJobs(ctx, a, nil, 10, 0); total != 1 {
			t.Errorf("%d jobs after repeated launches, want 1", total)
		}
		_, _, err = rollouts.Of(s).LaunchJob(ctx, b, rollouts.Launch{MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1, Traces: lts[:1]})
		if !errors.Is(err, models.ErrConflict) || strings.Contains(err.Error(), "team") {
			t.Errorf("another team reusing a trace id: %v, want ErrConflict that does not say whose", err)
		}
		_, _, err = rollouts.Of(s).LaunchJob(ctx, b, rollouts.Launch{JobID: &job.ID, MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID}}})
		if !errors.Is(err, models.ErrConflict) || strings.Contains(err.Error(), "team") {
			t.Errorf("another team reusing a job id: %v, want ErrConflict that does not say whose", err)
		}

		if _, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1, Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: uuid.New(), ModelID: oracle.ID}}}); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("an unknown task version: %v, want ErrNotFound", err)
		}

		id := traces[0].ID
		start := time.Now().UTC()
		for _, st := range []string{models.TraceInitializing, models.TraceRunning} {
			if ok, err := rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: st, StartTime: &start, Attempt: 1}); err != nil || !ok {
				t.Fatalf("to %s: %v %v", st, ok, err)
			}
		}
		one := 1.0
		rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceCompleted, StopReason: models.StopDone, Reward: &one, EndTime: &start,
			EvaluationResult: &models.EvaluationResult{Reward: 1, Done: true}})
		if ok, _ := rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceRunning}); ok {
			t.Error("a completed trace moved back to running")
		}
		rollouts.Of(s).TransitionTrace(ctx, traces[1].ID, rollouts.TraceUpdate{Status: models.TraceCancelling})
		if ok, _ := rollouts.Of(s).TransitionTrace(ctx, traces[1].ID, rollouts.TraceUpdate{Status: models.TraceRunning}); ok {
			t.Error("a cancelling trace moved to running")
		}
		if ok, _ := rollouts.Of(s).TransitionTrace(ctx, traces[1].ID, rollouts.TraceUpdate{Status: models.TraceCancelled, StopReason: models.StopCancelled}); !ok {
			t.Error("a cancelling trace did not reach cancelled")
		}
		zero := 0.0
		rollouts.Of(s).TransitionTrace(ctx, traces[2].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &zero})

		sum, err := rollouts.Of(s).SummarizeJob(ctx, a, job.ID)
		if err != nil || sum.TotalTraces != 4 || sum.TotalTasks != 2 || sum.Counts[models.TraceCompleted] != 2 || sum.Counts[models.TraceCancelled] != 1 ||
			sum.Counts[models.TracePending] != 1 || sum.AvgReward == nil || *sum.AvgReward != 0.5 {
			t.Fatalf("summary = %+v, %v", sum, err)
		}
		if n, _ := rollouts.Of(s).SetTracesValidity(ctx, a, []uuid.UUID{traces[2].ID}, false); n != 1 {
			t.Errorf("batch invalidate changed %d", n)
		}
		if sum, _ := rollouts.Of(s).SummarizeJob(ctx, a, job.ID); *sum.AvgReward != 1 {
			t.Errorf("avg over valid traces = %v, want 1", *sum.AvgReward)
		}
		if n, _ := rollouts.Of(s).SetJobValidity(ctx, a, job.ID, false); n != 3 {
			t.Errorf("job invalidate changed %d, want 3", n)
		}
		if n, _ := rollouts.Of(s).SetJobValidity(ctx, a, job.ID, true); n != 4 {
			t.Errorf("job revalidate changed %d, want 4", n)
		}

		// Visibility: another team and anonymous callers see nothing until the job is published.
		if _, err := rollouts.Of(s).GetTrace(ctx, nil, id); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("anonymous before publish: %v", err)
		}
		if err := rollouts.Of(s).PublishJob(ctx, b, job.ID); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team publishing: %v", err)
		}
		if err := rollouts.Of(s).PublishJob(ctx, a, job.ID); err != nil {
			t.Fatal(err)
		}
		if tr, err := rollouts.Of(s).GetTrace(ctx, nil, id); err != nil || tr.CanEdit || *tr.Reward != 1 || tr.EvaluationResult == nil || !tr.EvaluationResult.Done {
			t.Errorf("anonymous after publish = %+v, %v", tr, err)
		}
		if _, err := rollouts.Of(s).UpdateJob(ctx, b, job.ID, nil, nil); !errors.Is(err, models.ErrForbidden) {
			t.Errorf("another team editing a published job: %v, want ErrForbidden", err)
		}
		name := "renamed"
		if j, err := rollouts.Of(s).UpdateJob(ctx, a, job.ID, &name, nil); err != nil || j.Name != "renamed" {
			t.Errorf("rename = %+v, %v", j, err)
		}
		rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Name: "run 2", MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1})
		jobs, total, _ := rollouts.Of(s).ListJobs(ctx, a, nil, 10, 0)
		if total != 2 || jobs[0].Name != "run 2" {
			t.Errorf("jobs newest first = %+v", jobs)
		}
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted)
		if active, _ := rollouts.Of(s).ActiveJobs(ctx, a); len(active) != 1 || active[0].Name != "run 2" {
			t.Errorf("active = %+v", active)
		}
		rows, total, err := rollouts.Of(s).ListJobTraces(ctx, a, job.ID, 2, 2)
		if err != nil || total != 4 || len(rows) != 2 {
			t.Errorf("job traces page = %d of %d, %v", len(rows), total, err)
		}

		// Cancelling a single-run job ends it, whatever its traces were doing.
		single, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).MarkJobCancelling(ctx, single.ID); err != nil {
			t.Fatal(err)
		}
		if j, _ := rollouts.Of(s).GetJob(ctx, a, single.ID); j.Status != models.JobCancelled {
			t.Errorf("a cancelled single-run job reads %s", j.Status)
		}
	})
}

// A single-run job whose attempts end together completes: each attempt ends its trace and then
// settles the job, as FinishTrace does, all at once. A count made before another attempt's end
// but written after that attempt's settle would leave the job running for ever.
func TestAttemptsEndingTogetherCompleteTheirJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		const rounds, attempts = 20, 6
		for round := range rounds {
			lts := make([]rollouts.LaunchTrace, attempts)
			for i := range lts {
				lts[i] = rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[i%len(versions)], ModelID: oracle.ID, MaxSteps: 1}
			}
			job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 1, GroupSize: 1, MaxConcurrent: attempts, Traces: lts})
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			for _, tr := range traces {
				wg.Go(func() {
					end := time.Now().UTC()
					if _, err := rollouts.Of(s).TransitionTrace(ctx, tr.ID, rollouts.TraceUpdate{Status: models.TraceError, StopReason: models.StopError, EndTime: &end}); err != nil {
						t.Error(err)
					}
					if _, err := rollouts.Of(s).SettleSingleRunJob(ctx, tr.ID); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			got, err := rollouts.Of(s).GetJob(ctx, a, job.ID)
			if err != nil || got.Status != models.JobCompleted {
				t.Fatalf("round %d: the job's status after all %d attempts ended = %q (%v), want completed", round, attempts, got.Status, err)
			}
		}
	})
}

func TestEventsAndLogsAreIdempotent(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		_, id := storetest.LaunchOne(t, s)
		if seq, _ := rollouts.Of(s).LatestSeq(ctx, id); seq != -1 {
			t.Errorf("latest seq of a new trace = %d, want -1", seq)
		}
		ev := func(seq, attempt int, kind string) models.TraceEvent {
			return models.TraceEvent{TraceID: id, Seq: seq, Attempt: attempt, Kind: kind, Text: fmt.Sprint(seq), StartedAt: time.Now().UTC()}
		}
		batch := []models.TraceEvent{ev(0, 1, models.EventUser), ev(1, 1, models.EventToolCall)}
		for i := 0; i < 2; i++ { // a retried writer
			if err := rollouts.Of(s).AppendTraceEvents(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		if tr, err := rollouts.Of(s).SupersedeAttempt(ctx, id, 1); tr != nil || err != nil {
			t.Fatalf("supersede a try of an open attempt: %v, %v", tr, err)
		}
		rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{ev(2, 2, models.EventUser), ev(3, 2, models.EventAssistant)})
		all, _ := rollouts.Of(s).TraceEvents(ctx, id, -1, true)
		live, _ := rollouts.Of(s).TraceEvents(ctx, id, -1, false)
		newer, _ := rollouts.Of(s).TraceEvents(ctx, id, 2, false)
		if len(all) != 4 || len(live) != 2 || live[0].Seq != 2 || len(newer) != 1 || newer[0].Seq != 3 {
			t.Errorf("events: all %d, live %+v, after 2 %+v", len(all), live, newer)
		}
		if seq, _ := rollouts.Of(s).LatestSeq(ctx, id); seq != 3 {
			t.Errorf("latest seq = %d", seq)
		}

		// Every column reads back as written, quotes, braces, NULLs and all.
		started, ended := time.Date(2026, 11, 22, 10, 0, 0, 123456000, time.UTC), time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC)
		full := []models.TraceEvent{
			{TraceID: id, Seq: 4, ID: "e-4", Attempt: 2, Kind: models.EventToolResult, Text: `a "quoted", {braced} \ line`, ParentID: "e-3",
				Data: json.RawMessage(`{"call_id": "c1", "nested": {"list": [1.0, "two", null]}}`), StartedAt: started, EndedAt: &ended},
			{TraceID: id, Seq: 5, Attempt: 2, Kind: models.EventAssistant, StartedAt: started},
		}
		if err := rollouts.Of(s).AppendTraceEvents(ctx, full); err != nil {
			t.Fatal(err)
		}
		back, _ := rollouts.Of(s).TraceEvents(ctx, id, 3, false)
		if len(back) != 2 {
			t.Fatalf("read back %d events, want 2", len(back))
		}
		got, want := back[0], full[0]
		if got.ID != want.ID || got.Text != want.Text || got.ParentID != want.ParentID || got.Kind != want.Kind || got.Attempt != 2 ||
			!got.StartedAt.Equal(started) || got.EndedAt == nil || !got.EndedAt.Equal(ended) || !sameJSON(got.Data, want.Data) {
			t.Errorf("read back %+v (ended %v), want %+v", got, got.EndedAt, want)
		}
		if back[1].EndedAt != nil || back[1].ID == "" || !sameJSON(back[1].Data, json.RawMessage(`{}`)) {
			t.Errorf("an event without end, id or data read back as %+v", back[1])
		}

		// A try that recorded the outcome before its host was lost keeps its events.
		one := 1.0
		if ok, err := rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceCompleted, StopReason: models.StopDone, Reward: &one}); !ok || err != nil {
			t.Fatal(ok, err)
		}
		tr, err := rollouts.Of(s).SupersedeAttempt(ctx, id, 2)
		if err != nil || tr == nil || tr.Status != models.TraceCompleted || tr.Reward == nil || *tr.Reward != 1 {
			t.Fatalf("supersede a try of a finished attempt: %+v, %v; want the finished trace", tr, err)
		}
		if live, _ := rollouts.Of(s).TraceEvents(ctx, id, -1, false); len(live) != 4 {
			t.Errorf("a finished attempt's try was superseded: %d live events, want 4", len(live))
		}

		var logs []models.TraceLog
		for i := 0; i < 5; i++ {
			logs = append(logs, models.TraceLog{TraceID: id, Source: rollouts.LogEnv, Seq: i, Stream: "stderr", Line: fmt.Sprint("line ", i), Time: time.Now().UTC()})
		}
		rollouts.Of(s).AppendTraceLogs(ctx, logs)
		rollouts.Of(s).AppendTraceLogs(ctx, logs[3:])
		page, more, _ := rollouts.Of(s).TraceLogs(ctx, id, rollouts.LogEnv, -1, 3)
		rest, more2, _ := rollouts.Of(s).TraceLogs(ctx, id, rollouts.LogEnv, page[len(page)-1].Seq, 3)
		if len(page) != 3 || !more || len(rest) != 2 || more2 || rest[1].Line != "line 4" {
			t.Errorf("log pages: %d more=%v, %d more=%v", len(page), more, len(rest), more2)
		}

		// Worker log lines appended one statement each, by writers racing for the next seq: each
		// line once, at its own seq, none lost.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				if err := rollouts.Of(s).AppendLogLine(ctx, id, rollouts.LogWorker, "worker", fmt.Sprint("worker line ", i), time.Now().UTC()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		lines, _, _ := rollouts.Of(s).TraceLogs(ctx, id, rollouts.LogWorker, -1, 100)
		seen := map[string]bool{}
		for i, l := range lines {
			if l.Seq != i {
				t.Errorf("worker line %q at seq %d, want %d", l.Line, l.Seq, i)
			}
			seen[l.Line] = true
		}
		if len(lines) != 8 || len(seen) != 8 {
			t.Errorf("%d worker lines (%d distinct), want 8", len(lines), len(seen))
		}
	})
}

// sameJSON says whether a and b are the same JSON value (Postgres's jsonb keeps neither key order
// nor spacing).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestBeginTry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a, id := storetest.LaunchOne(t, s)
		first := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
		if try, err := rollouts.Of(s).BeginTry(ctx, id, 1, first, nil); err != nil || !try.Began || try.EnvLogSeq != 0 || try.Env != nil {
			t.Fatalf("begin the first try of a new trace = %+v, %v", try, err)
		}
		// A second try goes on after the first's events and environment log, and keeps its start.
		var evs []models.TraceEvent
		var logs []models.TraceLog
		for i := range 3 {
			evs = append(evs, models.TraceEvent{TraceID: id, Seq: i, Attempt: 1, Kind: models.EventUser, StartedAt: first})
		}
		for i := range 5 {
			logs = append(logs, models.TraceLog{TraceID: id, Source: rollouts.LogEnv, Seq: i, Stream: "stderr", Line: "x", Time: first})
		}
		logs = append(logs, models.TraceLog{TraceID: id, Source: rollouts.LogWorker, Seq: 7, Stream: "worker", Line: "w", Time: first})
		if err := rollouts.Of(s).AppendTraceEvents(ctx, evs); err != nil {
			t.Fatal(err)
		}
		if err := rollouts.Of(s).AppendTraceLogs(ctx, logs); err != nil {
			t.Fatal(err)
		}
		try, err := rollouts.Of(s).BeginTry(ctx, id, 2, first.Add(time.Hour), nil)
		if err != nil || !try.Began || try.EnvLogSeq != 5 {
			t.Fatalf("begin the second try = %+v, %v; want the environment log at 5", try, err)
		}
		tr, err := rollouts.Of(s).GetTrace(ctx, a, id)
		if err != nil || tr.Status != models.TraceInitializing || tr.Attempt != 2 || tr.StartTime == nil || !tr.StartTime.Equal(first) {
			t.Fatalf("after the second try began: %+v, %v", tr, err)
		}
		// The environment the try launches with is read in the same transaction: one that does
		// not open (a variable sealed under another key) leaves the trace as it was.
		keys, err := secrets.Create(filepath.Join(t.TempDir(), "k.json"))
		if err != nil {
			t.Fatal(err)
		}
		other, _ := secrets.Create(filepath.Join(t.TempDir(), "other.json"))
		reg, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "env"})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := credentials.Of(s).ReplaceEnvVars(ctx, a, keys, reg.ID, []credentials.NameValue{{Name: "A", Value: "a1"}}); err != nil {
			t.Fatal(err)
		}
		var envErr *models.LaunchEnvError
		if try, err = rollouts.Of(s).BeginTry(ctx, id, 3, first, &credentials.LaunchFor{Sealer: other, RegistryID: &reg.ID, TeamID: a.TeamID}); !errors.As(err, &envErr) || !errors.Is(err, secrets.ErrDecrypt) {
			t.Fatalf("begin a try whose environment does not open = %+v, %v; want a LaunchEnvError", try, err)
		}
		if tr, err := rollouts.Of(s).GetTrace(ctx, a, id); err != nil || tr.Attempt != 2 {
			t.Fatalf("a try whose environment did not open changed the trace: %+v, %v", tr, err)
		}
		if try, err = rollouts.Of(s).BeginTry(ctx, id, 3, first, &credentials.LaunchFor{Sealer: keys, RegistryID: &reg.ID, TeamID: a.TeamID}); err != nil || !try.Began || try.Env["A"] != "a1" {
			t.Fatalf("begin a try with its environment = %+v, %v; want A=a1", try, err)
		}
		// A trace closed first runs no try, and reads no environment.
		if _, err := rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceCancelled, StopReason: models.StopCancelled}); err != nil {
			t.Fatal(err)
		}
		if try, err := rollouts.Of(s).BeginTry(ctx, id, 4, first, &credentials.LaunchFor{Sealer: keys, RegistryID: &reg.ID, TeamID: a.TeamID}); err != nil || try.Began || try.Env != nil {
			t.Fatalf("begin a try of a cancelled trace = %+v, %v; want none", try, err)
		}
	})
}

// A try's opening events are numbered on from the trace's last event, and the trace turns
// running with them only when asked.
func TestOpenTry(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a, id := storetest.LaunchOne(t, s)
		at := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
		if _, err := rollouts.Of(s).BeginTry(ctx, id, 1, at, nil); err != nil {
			t.Fatal(err)
		}
		opening := func(texts ...string) []models.TraceEvent {
			var evs []models.TraceEvent
			for _, text := range texts {
				evs = append(evs, models.TraceEvent{TraceID: id, Attempt: 1, Kind: models.EventSetup, Text: text, StartedAt: at})
			}
			return evs
		}
		// A failed setup records what ran, and the trace stays initializing.
		if err := rollouts.Of(s).OpenTry(ctx, id, opening("a", "b"), false); err != nil {
			t.Fatal(err)
		}
		if tr, err := rollouts.Of(s).GetTrace(ctx, a, id); err != nil || tr.Status != models.TraceInitializing {
			t.Fatalf("after opening events without running: %+v, %v", tr, err)
		}
		if err := rollouts.Of(s).OpenTry(ctx, id, opening("c", "d", "e"), true); err != nil {
			t.Fatal(err)
		}
		evs, err := rollouts.Of(s).TraceEvents(ctx, id, -1, true)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, fmt.Sprintf("%d:%s:%s", e.Seq, e.Text, e.ID))
		}
		want := []string{"0:a:" + id.String() + "-0", "1:b:" + id.String() + "-1", "2:c:" + id.String() + "-2", "3:d:" + id.String() + "-3", "4:e:" + id.String() + "-4"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("events = %v, want %v", got, want)
		}
		if tr, err := rollouts.Of(s).GetTrace(ctx, a, id); err != nil || tr.Status != models.TraceRunning {
			t.Fatalf("after opening events with running: %+v, %v", tr, err)
		}
	})
}

// A job's traces page in launch order, however fast the launch makes them.
func TestJobTracesPageInLaunchOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		var launch []rollouts.LaunchTrace
		for range 300 {
			launch = append(launch, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID})
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 1, GroupSize: 300, MaxConcurrent: 1, Traces: launch})
		if err != nil {
			t.Fatal(err)
		}
		ids, err := rollouts.Of(s).JobTraceIDsPage(ctx, job.ID, 0, 1000)
		if err != nil || len(ids) != len(launch) {
			t.Fatalf("page = %d ids, %v", len(ids), err)
		}
		for i, id := range ids {
			if id != launch[i].TraceID {
				t.Fatalf("trace %d of the page is %s, launched as %s", i, id, launch[i].TraceID)
			}
		}
	})
}
