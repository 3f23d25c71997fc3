package rollouts_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A certification's job pins every attempt to the build, k oracle attempts and one idle one per
// task of the build's environment; its figures flag a flaky oracle and a task whose attempts did
// not all end scored, and a cancelled job fails it. Only the team's succeeded image builds are
// certified.
func TestACertificationPinsItsBuildAndFlagsWhatItFound(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		reg, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "todo"})
		if err != nil {
			t.Fatal(err)
		}
		bare, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, Scenarios: []models.Scenario{{Name: "add-todos"}}})
		if err != nil {
			t.Fatal(err)
		}
		build, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, Digest: "sha256:abc", ImageName: "todo:2",
			Scenarios: []models.Scenario{{Name: "add-todos"}}})
		if err != nil {
			t.Fatal(err)
		}
		// Another environment of the team with a newer build of the same image (a reproducible
		// build of the same source): the certified build's attempts still run the certified build.
		twin, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "todo-twin"})
		if err != nil {
			t.Fatal(err)
		}
		twinBuild, err := registry.Of(s).CreateBuild(ctx, twin.ID, registry.NewBuild{Status: registry.BuildSucceeded, Digest: "sha256:abc", ImageName: "todo-twin:1",
			Scenarios: []models.Scenario{{Name: "add-todos"}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB.NewUpdate().Model((*models.Build)(nil)).Set("image_key = ?", "images/todo-2.tar").
			Where("id IN (?)", bun.In([]uuid.UUID{build.ID, twinBuild.ID})).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		up, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "certify", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "one", Env: "todo", Scenario: "add-todos"}},
			{TaskContent: models.TaskContent{Name: "two", Env: "todo", Scenario: "add-todos"}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []*models.LLMModel{{ModelName: rollouts.OracleModelName, Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle},
			{ModelName: rollouts.IdleModelName, Name: "Idle", Provider: "proctor", Adapter: models.AdapterIdle},
			{ModelName: rollouts.RandomModelName, Name: "Random", Provider: "proctor", Adapter: models.AdapterRandom},
			{ModelName: rollouts.TamperModelName, Name: "Tamper", Provider: "proctor", Adapter: models.AdapterTamper}} {
			if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := rollouts.Of(s).StartCertification(ctx, a, bare.ID, up.TasksetID, 3, 0); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a build with no image: %v, want ErrConflict", err)
		}
		if _, err := rollouts.Of(s).StartCertification(ctx, b, build.ID, up.TasksetID, 3, 0); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's build: %v, want ErrNotFound", err)
		}

		if _, err := rollouts.Of(s).StartCertification(ctx, a, build.ID, up.TasksetID, 3, 11); err == nil || !strings.Contains(err.Error(), "12 attempts") {
			t.Errorf("a certification over the server's bound: %v, want a validation error", err)
		}
		cert, err := rollouts.Of(s).StartCertification(ctx, a, build.ID, up.TasksetID, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		traces, _, err := rollouts.Of(s).ListJobTraces(ctx, a, cert.JobID, 100, 0)
		if err != nil || len(traces) != 12 {
			t.Fatalf("the certification's job: %d attempts, %v; want 2 tasks × (3 oracle + 1 idle + 1 random + 1 tamper)", len(traces), err)
		}
		// The attempts: task one's oracle passes twice of three (flaky), task two's once is lost
		// to the infrastructure (unfinished); the idle agent scores 0 on both, the random one 0 on
		// one and 0.5 on two.
		// One attempt's environment answered MCP 250 ms after its try started.
		started := time.Now().UTC().Add(-time.Second).Truncate(time.Millisecond)
		if _, err := rollouts.Of(s).TransitionTrace(ctx, traces[0].ID, rollouts.TraceUpdate{Status: models.TraceInitializing, Attempt: 1, StartTime: &started}); err != nil {
			t.Fatal(err)
		}
		if err := rollouts.Of(s).AppendTraceEvents(ctx, []models.TraceEvent{{TraceID: traces[0].ID, Seq: 1, Attempt: 1, Kind: models.EventSystem,
			StartedAt: started.Add(250 * time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
		if err := rollouts.Of(s).StartInstance(ctx, &models.Instance{TeamID: a.TeamID, TraceID: traces[0].ID, Attempt: 1, JobID: cert.JobID, SandboxProvider: "process"}, ""); err != nil {
			t.Fatal(err)
		}
		one, zero := 1.0, 0.0
		seen := map[string]int{}
		taskName := map[uuid.UUID]string{up.TaskVersionIDs[0]: "one", up.TaskVersionIDs[1]: "two"}
		for _, tr := range traces {
			if run, err := rollouts.Of(s).LoadRun(ctx, tr.ID); err != nil || run.Build == nil || run.Build.ID != build.ID {
				t.Errorf("attempt %s (image %q) loads %+v, %v; want the certified build", tr.ID, tr.RuntimeConfig.Image, run, err)
			}
			name := taskName[*tr.TaskVersionID] + "/" + tr.GroupID[:4]
			seen[name]++
			u := rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one}
			switch {
			case tr.GroupID[:4] == "idle", name == "one/rand", tr.GroupID[:4] == "tamp":
				u.Reward = &zero
			case name == "two/rand":
				// The task's own evaluation said it is broken (envserver.TaskFault).
				u = rollouts.TraceUpdate{Status: models.TraceError, Error: "evaluate failed: task fault: the verifier wrote no reward", Reward: &zero}
			case name == "one/orac" && seen[name] == 2:
				u.Reward = &zero
			case name == "two/orac" && seen[name] == 3:
				u = rollouts.TraceUpdate{Status: models.TraceError, Error: "no host", Reward: &zero, InfraFailure: true}
			}
			if tr.GroupID[:4] == "tamp" {
				// Task one's probe is refused both calls; task two's evaluate dispatcher answers.
				var evs []models.TraceEvent
				// Task one's also claims success through a visible tool.
				hubs := []string{"setup", "evaluate"}
				if name == "one/tamp" {
					hubs = append(hubs, "set_verdict")
				}
				for i, hub := range hubs {
					refused := name != "two/tamp" || hub == "setup"
					evs = append(evs, models.TraceEvent{TraceID: tr.ID, Seq: 10 + i, Attempt: 1, Kind: models.EventToolResult, StartedAt: time.Now(),
						Data: models.EventData(models.ToolResultEventData{Name: hub, IsError: refused})})
				}
				if err := rollouts.Of(s).AppendTraceEvents(ctx, evs); err != nil {
					t.Fatal(err)
				}
			}
			rollouts.Of(s).TransitionTrace(ctx, tr.ID, u)
		}
		rollouts.Of(s).SetJobStatus(ctx, cert.JobID, models.JobCompleted)
		done, err := rollouts.Of(s).FinishCertification(ctx, cert.ID)
		if err != nil || done.Status != models.CertificationFlagged || done.FinishedAt == nil || len(done.Tasks) != 2 {
			t.Fatalf("finished: %+v, %v", done, err)
		}
		if su := done.Startup; su.Samples != 1 || su.P50MS == nil || *su.P50MS != 250 || *su.P99MS != 250 {
			t.Errorf("start-up = %+v, want one sample of 250 ms", su)
		}
		if by := done.StartupByProvider; len(by) != 1 || by[0].Provider != "process" || by[0].Samples != 1 || *by[0].P50MS != 250 {
			t.Errorf("start-up by provider = %+v, want process's one sample of 250 ms", by)
		}
		byName := map[string]models.CertifiedTask{}
		for _, ct := range done.Tasks {
			byName[ct.TaskName] = ct
		}
		if ct := byName["one"]; ct.OracleRuns != 3 || ct.OraclePasses != 2 || !slices.Equal(ct.Flags, []string{rollouts.FlagFlaky}) || ct.IdleReward == nil || *ct.IdleReward != 0 ||
			ct.Tamper == nil || !slices.Equal(ct.Tamper.Tried, []string{"setup", "evaluate"}) || len(ct.Tamper.Refused) != 2 ||
			!slices.Equal(ct.Tamper.Claimed, []string{"set_verdict"}) {
			t.Errorf("task one: %+v, want flaky", ct)
		}
		if ct := byName["two"]; ct.OracleRuns != 2 || ct.OraclePasses != 2 || !slices.Equal(ct.Flags, []string{rollouts.FlagTamperable, rollouts.FlagUnfinished, rollouts.FlagTaskFault}) ||
			ct.RandomReward != nil {
			t.Errorf("task two: %+v, want unfinished, with a task fault", ct)
		}
		got, err := registry.Of(s).LatestCertification(ctx, a, build.ID)
		if err != nil || got.ID != cert.ID || got.Status != models.CertificationFlagged || len(got.Tasks) != 2 || got.Startup.Samples != 1 ||
			len(got.StartupByProvider) != 1 {
			t.Errorf("latest certification = %+v, %v", got, err)
		}
		// Recorded once: a second finish changes nothing.
		if again, err := rollouts.Of(s).FinishCertification(ctx, cert.ID); err != nil || again.FinishedAt.Sub(*done.FinishedAt).Abs() > time.Millisecond {
			t.Errorf("a second finish: %+v, %v", again, err)
		}

		// An environment that requires a passed certification refuses a build whose latest did
		// not pass (or that has none), unless forced; one whose latest passed becomes the latest.
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, build.ID, false); err != nil {
			t.Fatalf("set-latest with no policy: %v", err)
		}
		if reg, err := registry.Of(s).SetCertificationPolicy(ctx, a, reg.ID, true); err != nil || !reg.CertifyBeforeLatest {
			t.Fatalf("the policy: %+v, %v", reg, err)
		}
		if _, err := registry.Of(s).SetCertificationPolicy(ctx, b, reg.ID, true); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's policy: %v, want ErrNotFound", err)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, build.ID, false); !errors.Is(err, models.ErrConflict) || !strings.Contains(err.Error(), "one (flaky)") {
			t.Errorf("set-latest of a flagged build: %v, want ErrConflict naming the flagged task", err)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, bare.ID, false); !errors.Is(err, models.ErrConflict) || !strings.Contains(err.Error(), "has none") {
			t.Errorf("set-latest of an uncertified build: %v, want ErrConflict", err)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, build.ID, true); err != nil {
			t.Errorf("set-latest forced: %v", err)
		}
		passed, err := rollouts.Of(s).StartCertification(ctx, a, build.ID, up.TasksetID, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		ptraces, _, _ := rollouts.Of(s).ListJobTraces(ctx, a, passed.JobID, 100, 0)
		for _, tr := range ptraces {
			r := one
			if tr.GroupID[:4] == "idle" || tr.GroupID[:4] == "rand" || tr.GroupID[:4] == "tamp" {
				r = zero
			}
			rollouts.Of(s).TransitionTrace(ctx, tr.ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &r})
		}
		rollouts.Of(s).SetJobStatus(ctx, passed.JobID, models.JobCompleted)
		if res, err := rollouts.Of(s).FinishCertification(ctx, passed.ID); err != nil || res.Status != models.CertificationPassed {
			t.Fatalf("a clean certification: %+v, %v", res, err)
		}
		if _, err := registry.Of(s).SetLatestBuild(ctx, a, build.ID, false); err != nil {
			t.Errorf("set-latest of a build whose latest certification passed: %v", err)
		}

		// A cancelled job fails its certification.
		cancelled, err := rollouts.Of(s).StartCertification(ctx, a, build.ID, up.TasksetID, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, cancelled.JobID, models.JobCancelled)
		if res, err := rollouts.Of(s).FinishCertification(ctx, cancelled.ID); err != nil || res.Status != models.CertificationFailed {
			t.Errorf("a cancelled certification: %+v, %v", res, err)
		}
	})
}
