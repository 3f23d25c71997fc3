package models_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

func TestReadyCheckFromGradedTraces(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := member(t, s, "alpha", "a@example.com")
		versions, oracle := launchFixture(t, s, a)
		v, _ := s.GetTaskVersion(ctx, a, versions[0])

		rc, err := s.CheckTaskReady(ctx, a, v.TaskID)
		if err != nil || rc.HasRequirements || !rc.Passed || len(rc.Checks) != 0 {
			t.Fatalf("without requirements = %+v, %v; want the not-configured result", rc, err)
		}

		half, most := 0.5, 0.9
		tasksetID := v.TasksetID
		if err := s.SetTasksetRequirements(ctx, tasksetID, &models.Requirements{MinTraces: 3, MinAccuracy: &half, MaxAccuracy: &most, Models: []string{"oracle", "gpt-x"}}); err != nil {
			t.Fatal(err)
		}
		if err := s.SetTasksetRequirements(ctx, uuid.New(), nil); err == nil {
			t.Error("requirements for an unknown taskset were accepted")
		}
		var lts []models.LaunchTrace
		for i := 0; i < 5; i++ {
			lts = append(lts, models.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID})
		}
		_, traces, err := s.LaunchJob(ctx, a, models.Launch{MaxSteps: 5, GroupSize: 5, MaxConcurrent: 5, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		one, zero := 1.0, 0.0
		for i, r := range []*float64{&one, &one, &zero} {
			s.TransitionTrace(ctx, traces[i].ID, models.TraceUpdate{Status: models.TraceCompleted, Reward: r})
		}
		s.TransitionTrace(ctx, traces[3].ID, models.TraceUpdate{Status: models.TraceError, Error: "env crashed"})
		s.TransitionTrace(ctx, traces[4].ID, models.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		s.SetTracesValidity(ctx, a, []uuid.UUID{traces[4].ID}, false) // invalid traces do not count

		rc, err = s.CheckTaskReady(ctx, a, v.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if !rc.HasRequirements || rc.Passed || rc.K != 3 || rc.CandidateCount != 3 || len(rc.EvaluatedTraceIDs) != 3 || rc.RequirementsVersion != 1 || !rc.CanOverride {
			t.Errorf("ready check = %+v", rc)
		}
		checks := map[string]models.Check{}
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
		s.UploadTasks(ctx, a, models.Upload{TasksetID: &tasksetID, Tasks: []models.TaskUpload{{TaskContent: models.TaskContent{Name: "a", Prompt: "changed"}}}})
		if rc, _ := s.CheckTaskReady(ctx, a, v.TaskID); rc.CandidateCount != 0 || rc.Passed {
			t.Errorf("after a new version = %+v", rc)
		}
	})
}
