package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// GET /v2/jobs/{id}/mix says when a job's results mix environment builds or task versions, with
// each one's attempts and mean reward, on both stores.
func TestJobMixShowsBuildsAndVersions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		reg, err := registry.Of(s).CreateRegistry(ctx, f.caller, registry.NewRegistry{Name: "todo"})
		if err != nil {
			t.Fatal(err)
		}
		var builds []*models.Build
		for _, d := range []string{"sha256:aaa", "sha256:bbb"} {
			b, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, Digest: d})
			if err != nil {
				t.Fatal(err)
			}
			builds = append(builds, b)
		}
		v1 := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"mix","tasks":[{"name":"a","prompt":"one"},{"name":"b","prompt":"b"}]}`)))
		v2 := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"mix","tasks":[{"name":"a","prompt":"two"}]}`)))
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)
		type run struct {
			version uuid.UUID
			build   *models.Build
			reward  float64
		}
		runs := []run{{v1.TaskVersionIDs[0], builds[0], 1}, {v1.TaskVersionIDs[1], builds[0], 0}, {v2.TaskVersionIDs[0], builds[1], 0}, {v2.TaskVersionIDs[0], nil, 0}}
		traces := make([]rollouts.LaunchTrace, len(runs))
		for i, r := range runs {
			traces[i] = rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: r.version, ModelID: oracle.ID}
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, f.caller, rollouts.Launch{Name: "mixed", MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1, Traces: traces})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		for i, r := range runs {
			if r.build == nil {
				continue // never started
			}
			id := traces[i].TraceID
			rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 1})
			if err := rollouts.Of(s).StartInstance(ctx, &models.Instance{TeamID: f.caller.TeamID, TraceID: id, Attempt: 1, JobID: job.ID, RegistryID: &reg.ID, BuildID: &r.build.ID}, ""); err != nil {
				t.Fatal(err)
			}
			reward := r.reward
			rollouts.Of(s).TransitionTrace(ctx, id, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &reward, StopReason: models.StopDone})
		}

		m := decode[JobMix](t, f.do("GET", "/v2/jobs/"+job.ID.String()+"/mix", "key", nil))
		if !m.Mixed || len(m.Builds) != 3 {
			t.Fatalf("mix = %+v, want mixed over two builds and the unstarted attempt", m)
		}
		unstarted, first, second := m.Builds[0], m.Builds[1], m.Builds[2]
		if unstarted.Digest != "" || unstarted.Attempts != 1 || unstarted.MeanReward != nil ||
			first.Digest != "sha256:aaa" || first.Environment != "todo" || first.Version != builds[0].Version || first.Attempts != 2 || first.Scored != 2 || *first.MeanReward != 0.5 ||
			second.Digest != "sha256:bbb" || second.Attempts != 1 || *second.MeanReward != 0 {
			t.Errorf("builds = %+v", m.Builds)
		}
		if len(m.MixedVersions) != 1 || m.MixedVersions[0].TaskName != "a" || len(m.MixedVersions[0].Versions) != 2 ||
			m.MixedVersions[0].Versions[0].Version != 1 || *m.MixedVersions[0].Versions[0].MeanReward != 1 ||
			m.MixedVersions[0].Versions[1].Version != 2 || m.MixedVersions[0].Versions[1].Attempts != 2 || m.MixedVersions[0].Versions[1].Scored != 1 {
			t.Errorf("tasks with several versions = %+v", m.MixedVersions)
		}
		wantEnvelope(t, f.do("GET", "/v2/jobs/"+uuid.NewString()+"/mix", "key", nil), 404, "not_found")
	})
}
