package llms_test

import (
	"errors"
	"math"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

func TestScoreRanges(t *testing.T) {
	for _, tc := range []struct {
		mean float64
		in   [3]bool
	}{
		{0, [3]bool{true, false, false}},
		{0.05, [3]bool{true, true, false}},
		{0.3, [3]bool{true, true, true}},
		{0.5, [3]bool{true, true, false}},
		{0.99, [3]bool{true, false, false}},
		{1, [3]bool{false, false, false}},
	} {
		for i, r := range llms.ScoreRanges {
			if r.In(tc.mean) != tc.in[i] {
				t.Errorf("%v in %v = %v", tc.mean, r, !tc.in[i])
			}
		}
	}
}

// A model's results per taskset come from its completed, valid attempts with a reward (of given
// checkpoints only, when asked); suggestions are the runnable tasksets it has no attempt on.
func TestModelResultsAndSuggestions(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		versions, _ := storetest.LaunchFixture(t, s, a) // taskset demo: tasks a and b
		base := &models.LLMModel{ModelName: "base", Name: "Base", Provider: "openai", Adapter: models.AdapterOpenAI, Trainable: true}
		if err := llms.Of(s).UpsertModel(ctx, base); err != nil {
			t.Fatal(err)
		}
		fork, err := llms.Of(s).ForkModel(ctx, a, base.ID, "mine")
		if err != nil {
			t.Fatal(err)
		}
		cp := &models.Checkpoint{Name: "step-1", UpstreamModel: "mine-step-1"}
		if err := llms.Of(s).AddCheckpoint(ctx, a, fork.ID, cp); err != nil {
			t.Fatal(err)
		}
		// Task a: rewards 1 and 0 (mean 0.5); task b: 0.3, one invalid 1.0, one error.
		runs := []struct {
			version int
			status  string
			reward  float64
			invalid bool
		}{{0, models.TraceCompleted, 1, false}, {0, models.TraceCompleted, 0, false}, {1, models.TraceCompleted, 0.3, false},
			{1, models.TraceCompleted, 1, true}, {1, models.TraceError, 0, false}}
		var lts []rollouts.LaunchTrace
		for _, r := range runs {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[r.version], ModelID: fork.ID, MaxSteps: 1})
		}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Name: "j", MaxSteps: 1, GroupSize: 1, MaxConcurrent: 1, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range runs {
			reward := r.reward
			if _, err := rollouts.Of(s).TransitionTrace(ctx, lts[i].TraceID, rollouts.TraceUpdate{Status: r.status, Reward: &reward}); err != nil {
				t.Fatal(err)
			}
			if r.invalid {
				if _, err := rollouts.Of(s).SetTracesValidity(ctx, a, []uuid.UUID{lts[i].TraceID}, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Only the first attempt was answered by the checkpoint.
		if err := billing.Of(s).RecordInference(ctx, &models.InferenceLog{TeamID: a.TeamID, ModelID: fork.ID, Route: billing.RouteAgent, Status: "ok",
			TraceID: &lts[0].TraceID, CheckpointID: &cp.ID}); err != nil {
			t.Fatal(err)
		}

		rs, err := llms.Of(s).ModelResults(ctx, a, fork.ID, nil, "")
		if err != nil || len(rs) != 1 {
			t.Fatalf("results = %+v, %v", rs, err)
		}
		r := rs[0]
		if r.TasksetName != "demo" || r.TotalTasks != 2 || r.TasksWithTraces != 2 || math.Abs(r.AvgScore-0.4) > 1e-9 || r.InRange != [3]int{2, 2, 1} ||
			r.MinTracesPerTask != 1 || r.MaxTracesPerTask != 2 || len(r.PerTask) != 2 || r.PerTask[0].TaskName != "a" || r.PerTask[0].AvgScore != 0.5 ||
			r.PerTask[0].MinScore != 0 || r.PerTask[0].MaxScore != 1 || r.Purpose != catalog.PurposeEval {
			t.Errorf("result = %+v", r)
		}
		if r.Mixed || r.PerTask[0].Builds != 0 || r.PerTask[0].Versions != 1 {
			t.Errorf("results of attempts that ran no build: %+v", r)
		}
		// Task a's two attempts ran two builds of one environment: its mean pools them, and says so.
		reg, err := registry.Of(s).CreateRegistry(ctx, a, registry.NewRegistry{Name: "env"})
		if err != nil {
			t.Fatal(err)
		}
		for i, digest := range []string{"sha256:1", "sha256:2"} {
			b, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildSucceeded, Digest: digest})
			if err != nil {
				t.Fatal(err)
			}
			if err := rollouts.Of(s).StartInstance(ctx, &models.Instance{TeamID: a.TeamID, TraceID: lts[i].TraceID, Attempt: 1, JobID: job.ID, BuildID: &b.ID}, ""); err != nil {
				t.Fatal(err)
			}
		}
		if rs, err := llms.Of(s).ModelResults(ctx, a, fork.ID, nil, ""); err != nil || len(rs) != 1 || !rs[0].Mixed || rs[0].PerTask[0].Builds != 2 || rs[0].PerTask[1].Mixed() {
			t.Errorf("results over two builds = %+v, %v; want task a mixed", rs, err)
		}
		if rs, _ := llms.Of(s).ModelResults(ctx, a, fork.ID, []uuid.UUID{cp.ID}, ""); len(rs) != 1 || rs[0].TasksWithTraces != 1 || rs[0].AvgScore != 1 {
			t.Errorf("the checkpoint's results = %+v", rs)
		}
		if rs, _ := llms.Of(s).ModelResults(ctx, a, fork.ID, nil, catalog.PurposeTraining); len(rs) != 0 {
			t.Errorf("training results = %+v", rs)
		}
		var verr models.ValidationError
		if _, err := llms.Of(s).ModelResults(ctx, a, fork.ID, []uuid.UUID{uuid.New()}, ""); !errors.As(err, &verr) {
			t.Errorf("another model's checkpoint: %v", err)
		}
		if _, err := llms.Of(s).ModelResults(ctx, a, uuid.New(), nil, ""); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("no such model: %v", err)
		}

		// Suggestions: the tasksets with tasks the model has not run on.
		for _, up := range []catalog.Upload{
			{TasksetName: "fresh", Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "x", Prompt: "p"}}}},
			{TasksetName: "train", Purpose: catalog.PurposeTraining, Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "y", Prompt: "p"}}}},
		} {
			if _, err := catalog.Of(s).UploadTasks(ctx, a, up); err != nil {
				t.Fatal(err)
			}
		}
		names := func(q llms.SuggestQuery) []string {
			q.Limit = max(q.Limit, 10)
			sug, err := llms.Of(s).SuggestTasksets(ctx, a, fork.ID, q)
			if err != nil {
				t.Fatal(err)
			}
			out := []string{}
			for _, g := range sug {
				out = append(out, g.TasksetName+"/"+g.Purpose)
			}
			return out
		}
		if got := names(llms.SuggestQuery{}); len(got) != 2 || got[0] != "train/TRAINING" || got[1] != "fresh/EVAL" {
			t.Errorf("suggested = %v", got)
		}
		if got := names(llms.SuggestQuery{Purpose: catalog.PurposeEval}); len(got) != 1 || got[0] != "fresh/EVAL" {
			t.Errorf("suggested for eval = %v", got)
		}
		if got := names(llms.SuggestQuery{Search: "TRA"}); len(got) != 1 || got[0] != "train/TRAINING" {
			t.Errorf("suggested matching TRA = %v", got)
		}
		sug, _ := llms.Of(s).SuggestTasksets(ctx, a, fork.ID, llms.SuggestQuery{Limit: 10, Purpose: catalog.PurposeTraining})
		if got := names(llms.SuggestQuery{Exclude: []uuid.UUID{sug[0].TasksetID}}); len(got) != 1 || got[0] != "fresh/EVAL" {
			t.Errorf("suggested without train = %v", got)
		}
		// Re-uploading with another purpose changes the taskset's.
		if _, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "demo", Purpose: catalog.PurposeTraining,
			Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "a", Prompt: "p"}}}}); err != nil {
			t.Fatal(err)
		}
		if rs, _ := llms.Of(s).ModelResults(ctx, a, fork.ID, nil, catalog.PurposeTraining); len(rs) != 1 || rs[0].Purpose != catalog.PurposeTraining {
			t.Errorf("results after demo became training data = %+v", rs)
		}
	})
}
