package rollouts_test

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// RetryJob runs again, in the job, the attempts that failed as asked, each once, linked to the
// one it replaces, which no longer counts; a scored attempt is never run again, and a job that
// still runs, or that no RunList drives, is refused.
func TestRetryRunsFailedAttemptsAgainInTheirJob(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		var lts []rollouts.LaunchTrace
		for range 4 {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, GroupID: "g"})
		}
		job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 4, MaxConcurrent: 4, Kind: models.JobBatch, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryInfra); !errors.Is(err, models.ErrConflict) {
			t.Errorf("retry of a job that has not ended: %v, want ErrConflict", err)
		}
		one, zero := 1.0, 0.0
		rollouts.Of(s).TransitionTrace(ctx, traces[0].ID, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).TransitionTrace(ctx, traces[1].ID, rollouts.TraceUpdate{Status: models.TraceError, Error: "infrastructure failure on 3 tries", Reward: &zero, InfraFailure: true})
		rollouts.Of(s).TransitionTrace(ctx, traces[2].ID, rollouts.TraceUpdate{Status: models.TraceError, Error: "the agent exited 1", Reward: &zero})
		rollouts.Of(s).TransitionTrace(ctx, traces[3].ID, rollouts.TraceUpdate{Status: models.TraceCancelled})
		if err := rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted); err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).RetryJob(ctx, b, job.ID, rollouts.RetryInfra); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("another team's retry: %v, want ErrNotFound", err)
		}

		infra, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryInfra)
		if err != nil || len(infra.Retried) != 1 || infra.Retried[0].Replaced != traces[1].ID || infra.From != 4 || infra.Job.Status != models.JobRunning {
			t.Fatalf("retry infra = %+v, %v", infra, err)
		}
		by, err := rollouts.Of(s).GetTrace(ctx, a, infra.Retried[0].By)
		if err != nil || by.Status != models.TracePending || by.RetryOf == nil || *by.RetryOf != traces[1].ID || by.GroupID != "g" ||
			by.TaskVersionID == nil || *by.TaskVersionID != versions[0] || !by.IsValid || by.Reward != nil {
			t.Errorf("the retry = %+v, %v", by, err)
		}
		if old, _ := rollouts.Of(s).GetTrace(ctx, a, traces[1].ID); old.IsValid {
			t.Error("the replaced attempt still counts")
		}
		if ids, _ := rollouts.Of(s).JobTraceIDsPage(ctx, job.ID, infra.From, 10); len(ids) != 1 || ids[0] != infra.Retried[0].By {
			t.Errorf("the job's attempts from %d: %v, want the retry", infra.From, ids)
		}

		// Ended again, all errors: only the scored one is left (the first is retried already).
		rollouts.Of(s).TransitionTrace(ctx, infra.Retried[0].By, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted)
		all, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryAll)
		if err != nil || len(all.Retried) != 1 || all.Retried[0].Replaced != traces[2].ID || all.From != 5 {
			t.Fatalf("retry all = %+v, %v", all, err)
		}
		// A retry whose workflow could not start is taken back whole.
		if err := rollouts.Of(s).UndoRetry(ctx, all); err != nil {
			t.Fatal(err)
		}
		if _, err := rollouts.Of(s).GetTrace(ctx, a, all.Retried[0].By); !errors.Is(err, models.ErrNotFound) {
			t.Errorf("an undone retry's attempt: %v, want it gone", err)
		}
		if old, _ := rollouts.Of(s).GetTrace(ctx, a, traces[2].ID); !old.IsValid {
			t.Error("an undone retry's replaced attempt does not count again")
		}
		again, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryAll)
		if err != nil || len(again.Retried) != 1 || again.Retried[0].Replaced != traces[2].ID {
			t.Fatalf("retry all after an undo = %+v, %v", again, err)
		}
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted)
		if _, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryAll); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a retry while an attempt of the job has not ended: %v, want ErrConflict", err)
		}
		rollouts.Of(s).TransitionTrace(ctx, again.Retried[0].By, rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one})
		if none, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryAll); err != nil || len(none.Retried) != 0 || none.Job.Status != models.JobCompleted {
			t.Errorf("a retry with nothing left = %+v, %v", none, err)
		}

		single, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1, Kind: models.JobSingle,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, single.ID, models.JobCompleted)
		if _, err := rollouts.Of(s).RetryJob(ctx, a, single.ID, rollouts.RetryAll); !errors.Is(err, models.ErrConflict) {
			t.Errorf("retry of a rollouts/run job: %v, want ErrConflict", err)
		}
	})
}
