package billing_test

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A job's spend is its attempts' model calls and environment time, as its usage prices them;
// AdmitJob pauses it once the spend reaches its ceiling, every model call of its attempts sees
// that, and only a ceiling above the spend (or none) resumes it, set by its launcher or an owner.
func TestAJobPausesAtItsCeilingAndResumesAboveIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		_, m, err := s.AddMember(ctx, a.TeamID, "", "m@example.com", models.RoleMember)
		if err != nil {
			t.Fatal(err)
		}
		other := &models.Caller{TeamID: a.TeamID, UserID: m.UserID, MembershipID: m.ID, Role: models.RoleMember}
		versions, oracle := storetest.LaunchFixture(t, s, a)
		var lts []rollouts.LaunchTrace
		for range 4 {
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, GroupID: "g"})
		}
		ceiling := 1.0
		job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 4, MaxConcurrent: 2, Kind: models.JobBatch, MaxCostUSD: &ceiling, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobRunning)
		budget := func(trace uuid.UUID) billing.JobBudget {
			t.Helper()
			b, err := billing.Of(s).TraceBudget(ctx, trace)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if b := budget(traces[0].ID); b.Reached() || b.SpentUSD != 0 || b.MaxCostUSD == nil || *b.MaxCostUSD != 1 {
			t.Fatalf("a fresh job's budget = %+v", b)
		}
		call := func(trace uuid.UUID, cost float64) {
			t.Helper()
			if err := billing.Of(s).RecordInference(ctx, &models.InferenceLog{TeamID: a.TeamID, ModelID: oracle.ID, Route: billing.RouteAgent, Status: "ok",
				Cost: cost, TraceID: &trace, UserID: &a.UserID}); err != nil {
				t.Fatal(err)
			}
		}
		call(traces[0].ID, 0.6)
		if b := budget(traces[1].ID); b.Reached() || b.SpentUSD != 0.6 {
			t.Fatalf("after $0.60 of calls: %+v", b)
		}
		if adm, err := billing.Of(s).AdmitJob(ctx, job.ID); err != nil || adm.Reached() {
			t.Fatalf("admission under the ceiling = %+v, %v", adm, err)
		}
		// A running sandbox is priced up to now: at least its baseline, here 60 min at $0.50/h.
		inst := &models.Instance{TeamID: a.TeamID, TraceID: traces[1].ID, Attempt: 1, JobID: job.ID, HourlyRate: 0.5, BaselineMinutes: 60}
		if err := rollouts.Of(s).StartInstance(ctx, inst, ""); err != nil {
			t.Fatal(err)
		}
		if b := budget(traces[0].ID); !b.Reached() || b.SpentUSD != 1.1 {
			t.Fatalf("with a running sandbox: %+v, want $1.10 spent, reached", b)
		}
		adm, err := billing.Of(s).AdmitJob(ctx, job.ID)
		if err != nil || !adm.Reached() || adm.Status != models.JobPaused {
			t.Fatalf("admission at the ceiling = %+v, %v", adm, err)
		}
		if got, _ := rollouts.Of(s).GetJob(ctx, a, job.ID); got.Status != models.JobPaused {
			t.Fatalf("job status %s, want paused", got.Status)
		}
		// Ended, its cost is fixed and summed beside the job: the spend is the same, and it is
		// what the job's usage says.
		if err := rollouts.Of(s).EndInstance(ctx, inst.ID, "done", true); err != nil {
			t.Fatal(err)
		}
		if err := rollouts.Of(s).EndInstance(ctx, inst.ID, "done again", true); err != nil {
			t.Fatal(err)
		}
		usage, err := billing.Of(s).TracesUsage(ctx, a, &job.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		total := 0.0
		for _, u := range usage {
			total += u.InferenceCost + u.EnvironmentCost
		}
		if b := budget(traces[2].ID); b.SpentUSD != 1.1 || math.Abs(total-1.1) > 1e-9 || !b.Reached() {
			t.Fatalf("after the sandbox ended: %+v, usage total %g; want $1.10 both", b, total)
		}

		// Resuming needs a ceiling above the spend, or none, and the launcher or an owner.
		if _, err := billing.Of(s).SetJobCeiling(ctx, other, job.ID, billing.CeilingChange{Resume: true, Lift: true}); !errors.Is(err, models.ErrForbidden) {
			t.Errorf("another member's resume: %v, want ErrForbidden", err)
		}
		var verr models.ValidationError
		if _, err := billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{Resume: true}); !errors.As(err, &verr) {
			t.Errorf("a resume with no ceiling: %v, want a validation error", err)
		}
		low := 1.1
		if _, err := billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{Resume: true, MaxCostUSD: &low}); !errors.As(err, &verr) {
			t.Errorf("a resume at the spend: %v, want a validation error", err)
		}
		two := 2.0
		res, err := billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{Resume: true, MaxCostUSD: &two})
		if err != nil || !res.Resumed || res.Budget.Status != models.JobRunning || *res.Budget.MaxCostUSD != 2 || res.Budget.SpentUSD != 1.1 {
			t.Fatalf("resume at $2 = %+v, %v", res, err)
		}
		if adm, err := billing.Of(s).AdmitJob(ctx, job.ID); err != nil || adm.Reached() || adm.Status != models.JobRunning {
			t.Fatalf("admission after the resume = %+v, %v", adm, err)
		}
		if _, err := billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{Resume: true, Lift: true}); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a resume of a running job: %v, want ErrConflict", err)
		}

		// Calls from many attempts at once all count.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					call(traces[i%4].ID, 0.025)
				}
			}()
		}
		wg.Wait()
		if b := budget(traces[3].ID); math.Abs(b.SpentUSD-2.1) > 1e-9 || !b.Reached() {
			t.Fatalf("after 40 concurrent calls of $0.025: %+v, want $2.10", b)
		}
		if adm, _ := billing.Of(s).AdmitJob(ctx, job.ID); adm.Status != models.JobPaused {
			t.Fatalf("admission past the raised ceiling = %+v", adm)
		}
		res, err = billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{Resume: true, Lift: true})
		if err != nil || !res.Resumed || res.Budget.MaxCostUSD != nil {
			t.Fatalf("resume with the ceiling lifted = %+v, %v", res, err)
		}
		if b := budget(traces[0].ID); b.Reached() {
			t.Fatalf("a job with no ceiling: %+v", b)
		}

		// An attempt the budget stopped is retried by default once the job has ended.
		one := 1.0
		for i, tr := range traces {
			u := rollouts.TraceUpdate{Status: models.TraceCompleted, Reward: &one}
			if i == 3 {
				u = rollouts.TraceUpdate{Status: models.TraceCancelled, StopReason: models.StopBudget}
			}
			rollouts.Of(s).TransitionTrace(ctx, tr.ID, u)
		}
		rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobCompleted)
		if _, err := billing.Of(s).SetJobCeiling(ctx, a, job.ID, billing.CeilingChange{MaxCostUSD: &two}); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a ceiling for a job whose ceiling was lifted: %v, want ErrConflict", err)
		}
		retry, err := rollouts.Of(s).RetryJob(ctx, a, job.ID, rollouts.RetryInfra)
		if err != nil || len(retry.Retried) != 1 || retry.Retried[0].Replaced != traces[3].ID {
			t.Fatalf("retry = %+v, %v; want the attempt the budget stopped", retry, err)
		}

		// An ended job's ceiling is what its retries are held to: it changes, and resumes nothing.
		capped, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1, Kind: models.JobBatch, MaxCostUSD: &ceiling,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, GroupID: "g"}}})
		if err != nil {
			t.Fatal(err)
		}
		rollouts.Of(s).SetJobStatus(ctx, capped.ID, models.JobCompleted)
		if res, err := billing.Of(s).SetJobCeiling(ctx, a, capped.ID, billing.CeilingChange{MaxCostUSD: &two}); err != nil || res.Resumed ||
			res.Budget.Status != models.JobCompleted || *res.Budget.MaxCostUSD != 2 {
			t.Errorf("a new ceiling for an ended job = %+v, %v", res, err)
		}

		// Only a run_list job launched with a ceiling has one.
		single, singleTraces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := billing.Of(s).SetJobCeiling(ctx, a, single.ID, billing.CeilingChange{MaxCostUSD: &two}); !errors.Is(err, models.ErrConflict) {
			t.Errorf("a ceiling for a single-run job: %v, want ErrConflict", err)
		}
		if b := budget(singleTraces[0].ID); b.Reached() || b.MaxCostUSD != nil {
			t.Errorf("a single-run job's budget = %+v", b)
		}
	})
}
