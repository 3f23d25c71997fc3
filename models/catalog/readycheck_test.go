package catalog_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

func TestReadyCheckFromGradedTraces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		v, _ := catalog.Of(s).GetTaskVersion(ctx, a, versions[0])

		rc, err := catalog.Of(s).CheckTaskReady(ctx, a, v.TaskID)
		if err != nil || rc.HasRequirements || !rc.Passed || len(rc.Checks) != 0 {
			t.Fatalf("without requirements = %+v, %v; want the not-configured result", rc, err)
		}

		half, most := 0.5, 0.9
		tasksetID := v.TasksetID
		if err := catalog.Of(s).SetTasksetRequirements(ctx, tasksetID, &models.Requirements{MinTraces: 3, MinAccuracy: &half, MaxAccuracy: &most, Models: []string{"oracle", "gpt-x"}}); err != nil {
			t.Fatal(err)
		}
		if err := catalog.Of(s).SetTasksetRequirements(ctx, uuid.New(), nil); err == nil {
			t.Error("requirements for an unknown taskset were accepted")
		}
		var lts []rollouts.LaunchTrace
		for i := 0; i < 5; i++ {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID})
		}
		_, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 5, MaxConcurrent: 5, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		one, zero := 1.0, 0.0
		for i, r := range []*float64{&one, &one, &zero} {
			rollouts.Of(s).TransitionTrace(ctx, traces[i].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: r})
		}
		rollouts.Of(s).TransitionTrace(ctx, traces[3].ID, rollouts.TraceUpdate{Status: models.TraceError, Error: "env crashed"})
		rollouts.Of(s).TransitionTrace(ctx, traces[4].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).SetTracesValidity(ctx, a, []uuid.UUID{traces[4].ID}, false) // invalid traces do not count

		rc, err = catalog.Of(s).CheckTaskReady(ctx, a, v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if !rc.HasRequirements || rc.Passed || rc.K != 3 || rc.CandidateCount != 3 || len(rc.EvaluatedTraceIDs) != 3 || rc.RequirementsVersion != 1 || !rc.CanOverride {
			t.Errorf("ready check = %+v", rc)
		}
		checks := map[string]catalog.Check{}
		for _, c := range rc.Checks {
			checks[c.Key] = c
		}
		for key, want := range map[string]bool{"graded_traces": true, "min_accuracy": true, "max_accuracy": true, "models": false, "errors": false} {
			if checks[key].Passed != want {
				t.Errorf("check %s passed=%v, want %v: %+v", key, checks[key].Passed, want, checks[key])
			}
		}
		if c := checks["min_accuracy"]; c.Current != "0.67" || len(c.OffendingTraceIDs) != 1 || c.OffendingTraceIDs[0] != traces[2].ID {
			t.Errorf("min_accuracy = %+v", c)
		}
		if c := checks["models"]; c.Current != "missing: gpt-x" || c.HowToFix == "" {
			t.Errorf("models = %+v", c)
		}
		if c := checks["errors"]; c.Severity != "warning" || len(c.OffendingTraceIDs) != 1 || c.OffendingTraceIDs[0] != traces[3].ID {
			t.Errorf("errors = %+v", c)
		}

		// A new version starts from no graded traces.
		catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetID: &tasksetID, Tasks: []catalog.TaskUpload{{TaskContent: models.TaskContent{Name: "a", Prompt: "changed"}}}})
		if rc, _ := catalog.Of(s).CheckTaskReady(ctx, a, v.TaskID); rc.CandidateCount != 0 || rc.Passed {
			t.Errorf("after a new version = %+v", rc)
		}
	})
}

// TestReadyCheckQAChecks checks the spec's QA checks: the reference solution (the validation
// calls, replayed by the oracle) earns full reward, and the task has been through a review stage.
func TestReadyCheckQAChecks(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		_, oracle := storetest.LaunchFixture(t, s, a)
		up, err := catalog.Of(s).UploadTasks(ctx, a, catalog.Upload{TasksetName: "qa", Tasks: []catalog.TaskUpload{
			{TaskContent: models.TaskContent{Name: "solved", Prompt: "p", Validation: []models.ValidationCall{{Name: "add_todo", Arguments: map[string]any{"title": "x"}}}}},
			{TaskContent: models.TaskContent{Name: "bare", Prompt: "p"}}}})
		if err != nil {
			t.Fatal(err)
		}
		solved, _ := catalog.Of(s).GetTaskVersion(ctx, a, up.TaskVersionIDs[0])
		bare, _ := catalog.Of(s).GetTaskVersion(ctx, a, up.TaskVersionIDs[1])
		if err := catalog.Of(s).SetTasksetStages(ctx, a, up.TasksetID, []string{"write", "qa", "polish"}); err != nil {
			t.Fatal(err)
		}

		// Requirements no task could meet, or naming what the taskset lacks, are refused with
		// the field at fault.
		half, low, tooHigh := 0.5, 0.2, 1.5
		for _, tc := range []struct {
			req  models.Requirements
			locs []string
		}{
			{models.Requirements{QAChecks: []models.QACheck{{Kind: "peer_review"}}}, []string{"qa_checks[0].kind"}},
			{models.Requirements{QAChecks: []models.QACheck{{Kind: models.QAReferenceSolves}, {Kind: models.QAReferenceSolves}}}, []string{"qa_checks[1].kind"}},
			{models.Requirements{QAChecks: []models.QACheck{{Kind: models.QAStagePassed, Stage: "review"}}}, []string{"qa_checks[0].stage"}},
			{models.Requirements{QAChecks: []models.QACheck{{Kind: models.QAStagePassed}}}, []string{"qa_checks[0].stage"}},
			{models.Requirements{QAChecks: []models.QACheck{{Kind: models.QAReferenceSolves, Stage: "qa"}}}, []string{"qa_checks[0].stage"}},
			{models.Requirements{MinTraces: -1, MinAccuracy: &half, MaxAccuracy: &low}, []string{"min_traces", "max_accuracy"}},
			{models.Requirements{MaxAccuracy: &tooHigh}, []string{"max_accuracy"}},
		} {
			err := catalog.Of(s).SetTasksetRequirements(ctx, up.TasksetID, &tc.req)
			var verr models.ValidationError
			if !errors.As(err, &verr) || len(verr) != len(tc.locs) {
				t.Errorf("requirements %+v: %v, want a validation error at %v", tc.req, err, tc.locs)
				continue
			}
			for i, loc := range tc.locs {
				if verr[i].Location != loc && !slices.ContainsFunc(verr, func(e models.FieldError) bool { return e.Location == loc }) {
					t.Errorf("requirements %+v: %v, want an error at %s", tc.req, err, loc)
				}
			}
		}
		if err := catalog.Of(s).SetTasksetRequirements(ctx, up.TasksetID, &models.Requirements{
			QAChecks: []models.QACheck{{Kind: models.QAReferenceSolves}, {Kind: models.QAStagePassed, Stage: "qa"}}}); err != nil {
			t.Fatal(err)
		}
		qa := func(taskID uuid.UUID) (map[string]catalog.Check, bool) {
			t.Helper()
			rc, err := catalog.Of(s).CheckTaskReady(ctx, a, taskID)
			if err != nil {
				t.Fatal(err)
			}
			checks := map[string]catalog.Check{}
			for _, c := range rc.Checks {
				checks[c.Key] = c
			}
			if _, ok := checks["qa_reference_solves"]; !ok || rc.RequirementsVersion != 1 {
				t.Fatalf("ready check = %+v, want the QA checks of the first requirements", rc)
			}
			return checks, rc.Passed
		}
		checks, passed := qa(solved.TaskID)
		if c := checks["qa_reference_solves"]; c.Passed || c.Current != "no graded oracle attempt" || !strings.Contains(c.HowToFix, "proctor eval qa --model oracle") || passed {
			t.Errorf("before any attempt: %+v", c)
		}
		if c := checks["qa_stage_passed"]; c.Passed || c.Current != "at write" || c.Severity != "error" {
			t.Errorf("a task at its first stage: %+v", c)
		}
		if c, _ := qa(bare.TaskID); c["qa_reference_solves"].Passed || !strings.Contains(c["qa_reference_solves"].Current, "no validation calls") {
			t.Errorf("a task without validation calls: %+v", c["qa_reference_solves"])
		}

		// Oracle attempts: one solves, one does not; another model's failure is no concern of
		// this check.
		claude := &models.LLMModel{ModelName: "claude-x", Name: "Claude", Provider: "anthropic", Adapter: models.AdapterAnthropic}
		llms.Of(s).UpsertModel(ctx, claude)
		ids := []uuid.UUID{uuid.New(), uuid.New(), uuid.New(), uuid.New()}
		lts := []rollouts.LaunchTrace{{TraceID: ids[0], TaskVersionID: solved.ID, ModelID: oracle.ID}, {TraceID: ids[1], TaskVersionID: solved.ID, ModelID: oracle.ID},
			{TraceID: ids[2], TaskVersionID: solved.ID, ModelID: claude.ID}, {TraceID: ids[3], TaskVersionID: solved.ID, ModelID: oracle.ID}}
		if _, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 1, MaxConcurrent: 4, Traces: lts}); err != nil {
			t.Fatal(err)
		}
		one, most, zero := 1.0, 0.8, 0.0
		rollouts.Of(s).TransitionTrace(ctx, ids[0], rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, ids[1], rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &most})
		rollouts.Of(s).TransitionTrace(ctx, ids[2], rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &zero})
		checks, _ = qa(solved.TaskID)
		if c := checks["qa_reference_solves"]; c.Passed || !slices.Equal(c.OffendingTraceIDs, []uuid.UUID{ids[1]}) || c.Current != "1 of 2 graded oracle attempts earned 1.00; 0 ended in error" {
			t.Errorf("a reference solution short of full reward: %+v", c)
		}
		// The failing attempt found wrong and invalidated, the solution stands; an oracle attempt
		// that ends in error fails it again.
		rollouts.Of(s).SetTracesValidity(ctx, a, []uuid.UUID{ids[1]}, false)
		if checks, _ = qa(solved.TaskID); !checks["qa_reference_solves"].Passed {
			t.Errorf("every valid oracle attempt solved it: %+v", checks["qa_reference_solves"])
		}
		rollouts.Of(s).TransitionTrace(ctx, ids[3], rollouts.TraceUpdate{Status: models.TraceError, Error: "setup failed"})
		checks, _ = qa(solved.TaskID)
		if c := checks["qa_reference_solves"]; c.Passed || !slices.Equal(c.OffendingTraceIDs, []uuid.UUID{ids[3]}) {
			t.Errorf("an oracle attempt in error: %+v", c)
		}

		// Through the qa stage: advanced past it, or out of pending.
		for _, stage := range []string{"qa", "polish"} {
			catalog.Of(s).MoveTaskStage(ctx, a, []string{solved.TaskID.String()}, stage)
		}
		if checks, _ = qa(solved.TaskID); !checks["qa_stage_passed"].Passed || checks["qa_stage_passed"].Current != "at polish" {
			t.Errorf("a task advanced past qa: %+v", checks["qa_stage_passed"])
		}
		catalog.Of(s).MoveTaskStage(ctx, a, []string{solved.TaskID.String()}, "qa")
		if checks, _ = qa(solved.TaskID); checks["qa_stage_passed"].Passed || checks["qa_stage_passed"].Current != "at qa" {
			t.Errorf("a task sent back to qa: %+v", checks["qa_stage_passed"])
		}
		catalog.Of(s).MoveTaskStage(ctx, a, []string{solved.TaskID.String()}, "polish")
		catalog.Of(s).SetTaskStatus(ctx, a, []string{solved.TaskID.String()}, nil, catalog.TaskReady, false)
		if checks, _ = qa(solved.TaskID); !checks["qa_stage_passed"].Passed || checks["qa_stage_passed"].Current != catalog.TaskReady {
			t.Errorf("a task marked ready: %+v", checks["qa_stage_passed"])
		}
		// A reviewer's decision on a task that never went through the stage passes nothing.
		catalog.Of(s).SetTaskStatus(ctx, a, []string{bare.TaskID.String()}, nil, catalog.TaskRevision, false)
		if checks, _ = qa(bare.TaskID); checks["qa_stage_passed"].Passed || checks["qa_stage_passed"].Current != "revision, at write" {
			t.Errorf("a task sent to revision from the write stage: %+v", checks["qa_stage_passed"])
		}
		// A stage the taskset no longer has cannot be passed.
		catalog.Of(s).SetTasksetStages(ctx, a, up.TasksetID, []string{"write", "polish"})
		if checks, _ = qa(bare.TaskID); checks["qa_stage_passed"].Passed || !strings.Contains(checks["qa_stage_passed"].Current, "no longer include") {
			t.Errorf("a stage the taskset dropped: %+v", checks["qa_stage_passed"])
		}
	})
}
