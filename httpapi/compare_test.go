package httpapi

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// finishedJob launches a job of one attempt per reward on each task version given and ends
// them: completed with that reward, except a NaN, which ends the attempt in error.
func finishedJob(t *testing.T, f *fixture, name string, model uuid.UUID, rewards map[uuid.UUID][]float64) uuid.UUID {
	t.Helper()
	var traces []rollouts.LaunchTrace
	var ends []float64
	for version, rs := range rewards {
		for _, r := range rs {
			traces = append(traces, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: version, ModelID: model})
			ends = append(ends, r)
		}
	}
	job, _, err := rollouts.Of(f.store).LaunchJob(ctx, f.caller, rollouts.Launch{Name: name, MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1, Traces: traces})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i, tr := range traces {
		rollouts.Of(f.store).TransitionTrace(ctx, tr.TraceID, rollouts.TraceUpdate{Status: models.TraceRunning, StartTime: &now, Attempt: 1})
		if math.IsNaN(ends[i]) {
			rollouts.Of(f.store).TransitionTrace(ctx, tr.TraceID, rollouts.TraceUpdate{Status: models.TraceError, Error: "boom"})
			continue
		}
		r := ends[i]
		rollouts.Of(f.store).TransitionTrace(ctx, tr.TraceID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &r, StopReason: models.StopDone})
	}
	return job.ID
}

// GET /v2/jobs/compare pairs two jobs' scored attempts by task and version, on both stores.
func TestCompareJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		up := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(
			`{"taskset_name":"cmp","tasks":[{"name":"alpha","prompt":"a"},{"name":"beta","prompt":"b"},{"name":"gamma","prompt":"c"},{"name":"delta","prompt":"d"}]}`)))
		alpha, beta, gamma, delta := up.TaskVersionIDs[0], up.TaskVersionIDs[1], up.TaskVersionIDs[2], up.TaskVersionIDs[3]
		// delta changes: B runs its new version.
		up2 := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(
			`{"taskset_name":"cmp","tasks":[{"name":"delta","prompt":"d, changed"}]}`)))
		delta2 := up2.TaskVersionIDs[0]
		oracle := &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
		llms.Of(s).UpsertModel(ctx, oracle)

		a := finishedJob(t, f, "baseline", oracle.ID, map[uuid.UUID][]float64{alpha: {0, 0}, beta: {1, 1}, gamma: {0.5, math.NaN()}, delta: {1}})
		b := finishedJob(t, f, "candidate", oracle.ID, map[uuid.UUID][]float64{alpha: {1, 1}, beta: {1, 0}, gamma: {1, 1}, delta2: {1}})
		c := decode[JobComparison](t, f.do("GET", fmt.Sprintf("/v2/jobs/compare?a=%s&b=%s", a, b), "key", nil))

		if c.A.Name != "baseline" || c.A.Scored != 6 || c.A.Unscored != 1 || c.B.Scored != 7 || c.PairedTasks != 3 {
			t.Fatalf("comparison = %+v", c)
		}
		if c.Tasks[0].TaskName != "alpha" || c.Tasks[0].Delta != 1 || c.Tasks[0].Flip != "gained" || len(c.Tasks[0].A.TraceIDs) != 2 ||
			c.Tasks[1].TaskName != "gamma" || c.Tasks[1].A.Attempts != 1 || c.Tasks[1].Delta != 0.5 || c.Tasks[1].Flip != "gained" ||
			c.Tasks[2].TaskName != "beta" || c.Tasks[2].Delta != -0.5 || c.Tasks[2].Flip != "" || c.Flipped != 2 {
			t.Errorf("tasks = %+v", c.Tasks)
		}
		// Means over the paired tasks: a (0 + 0.5 + 1)/3, b (1 + 1 + 0.5)/3.
		if math.Abs(c.A.Mean-0.5) > 1e-9 || math.Abs(c.B.Mean-2.5/3) > 1e-9 || math.Abs(c.MeanDifference-1.0/3) > 1e-9 {
			t.Errorf("means a %v b %v difference %v", c.A.Mean, c.B.Mean, c.MeanDifference)
		}
		// Two tasks better in b, one worse: p = 2 × P(X ≤ 1 | n = 3) = 2 × 4/8 = 1.
		if c.SignTest.WinsB != 2 || c.SignTest.WinsA != 1 || c.SignTest.PValue != 1 || c.CI95.Resamples != 10_000 || c.CI95.Seed != 1 ||
			c.CI95.Low > c.MeanDifference || c.CI95.High < c.MeanDifference {
			t.Errorf("sign test %+v, interval %+v", c.SignTest, c.CI95)
		}
		if len(c.PassAtK) != 1 || math.Abs(c.PassAtK[0].A-(0+1+0)/3.0) > 1e-9 || math.Abs(c.PassAtK[0].B-(1+0.5+1)/3.0) > 1e-9 {
			t.Errorf("pass@k = %+v", c.PassAtK)
		}
		if len(c.Unpaired) != 2 || c.Unpaired[0].TaskName != "delta" || c.Unpaired[0].Reason != "other_version" || c.Unpaired[1].Job != "b" {
			t.Errorf("unpaired = %+v", c.Unpaired)
		}
		// The same seed, the same interval; another seed may move it.
		again := decode[JobComparison](t, f.do("GET", fmt.Sprintf("/v2/jobs/compare?a=%s&b=%s", a, b), "key", nil))
		if again.CI95 != c.CI95 {
			t.Errorf("the same seed gave %+v, then %+v", c.CI95, again.CI95)
		}

		// Refused: no shared task, an unknown job, no job named.
		other := decode[UploadResult](t, f.do("POST", "/v2/tasks/upload", "key", strings.NewReader(`{"taskset_name":"other","tasks":[{"name":"x","prompt":"x"}]}`)))
		d := finishedJob(t, f, "elsewhere", oracle.ID, map[uuid.UUID][]float64{other.TaskVersionIDs[0]: {1}})
		wantValidation(t, f.do("GET", fmt.Sprintf("/v2/jobs/compare?a=%s&b=%s", a, d), "key", nil), "query.b")
		wantEnvelope(t, f.do("GET", fmt.Sprintf("/v2/jobs/compare?a=%s&b=%s", a, uuid.New()), "key", nil), 404, "not_found")
		wantValidation(t, f.do("GET", "/v2/jobs/compare?a="+a.String(), "key", nil), "query.b")
		wantEnvelope(t, f.do("GET", fmt.Sprintf("/v2/jobs/compare?a=%s&b=%s", a, b), "", nil), 401, "unauthorized")
	})
}
