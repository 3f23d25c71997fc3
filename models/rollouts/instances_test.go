package rollouts_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/rollouts"
)

func TestRateCard(t *testing.T) {
	g, err := rollouts.ParseGPURates(" h100=4.5, A10G=1.25 ,*=2")
	if err != nil {
		t.Fatal(err)
	}
	r := rollouts.RateCard{Base: 0.1, PerCPU: 0.05, PerMemoryGB: 0.01, PerGPU: g}
	for _, tc := range []struct {
		cpu   float64
		mem   int
		gpus  int
		gtype string
		want  float64
	}{
		{0, 0, 0, "", 0.1},
		{2, 4096, 0, "", 0.1 + 0.1 + 0.04},
		{1, 0, 2, "H100", 0.1 + 0.05 + 9},
		{0, 0, 1, "a10g", 0.1 + 1.25},
		{0, 0, 1, "l4", 0.1 + 2},
		{0, 0, 1, "", 0.1 + 2},
	} {
		if got := r.HourlyRate(tc.cpu, tc.mem, tc.gpus, tc.gtype); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("rate(%v cpu, %d MiB, %d %q) = %v, want %v", tc.cpu, tc.mem, tc.gpus, tc.gtype, got, tc.want)
		}
	}
	for _, bad := range []string{"h100", "h100=x", "=1", "h100=-1", "h100=NaN"} {
		if _, err := rollouts.ParseGPURates(bad); err == nil {
			t.Errorf("ParseGPURates(%q) accepted", bad)
		}
	}
	if g, err := rollouts.ParseGPURates(""); err != nil || len(g) != 0 || g.Rate("h100") != 0 {
		t.Errorf("no GPU rates = %v, %v", g, err)
	}
}

func TestInstanceUsage(t *testing.T) {
	start := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	in := models.Instance{Status: models.InstanceRunning, CreatedAt: start, HourlyRate: 6, BaselineMinutes: 5}
	if m, c := in.Usage(start.Add(2 * time.Minute)); m != 2 || c != 0.5 {
		t.Errorf("2 minutes in = %v min, $%v; want the 5-minute baseline, $0.5", m, c)
	}
	if m, c := in.Usage(start.Add(30 * time.Minute)); m != 30 || c != 3 {
		t.Errorf("30 minutes in = %v min, $%v", m, c)
	}
	ended := models.Instance{Status: models.InstanceTerminated, DurationSeconds: 90, Cost: 0.42, HourlyRate: 6}
	if m, c := ended.Usage(start.Add(time.Hour)); m != 1.5 || c != 0.42 {
		t.Errorf("an ended instance = %v min, $%v; want its fixed numbers", m, c)
	}
}

// An instance runs until its sandbox stops, its attempt's next try starts, or its attempt ends;
// its cost is fixed then; usage and instance lists agree on both stores.
func TestInstancesLifecycle(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		b := storetest.Member(t, s, "beta", "b@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		registry := uuid.New() // instances name their environment; no row is needed
		lts := []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, MaxSteps: 1},
			{TraceID: uuid.New(), TaskVersionID: versions[1], ModelID: oracle.ID, MaxSteps: 1}}
		job, _, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{Name: "j", MaxSteps: 1, GroupSize: 1, MaxConcurrent: 2, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		start := func(trace uuid.UUID, attempt int, rate float64) *models.Instance {
			in := &models.Instance{TeamID: a.TeamID, TraceID: trace, Attempt: attempt, JobID: job.ID, RegistryID: &registry,
				UserID: &a.UserID, HostQueue: "host-1", SandboxID: "sb", CPU: 1, MemoryMB: 512, HourlyRate: rate, BaselineMinutes: 5}
			if err := rollouts.Of(s).StartInstance(ctx, in, ""); err != nil {
				t.Fatal(err)
			}
			return in
		}
		first := start(lts[0].TraceID, 1, 6)
		second := start(lts[0].TraceID, 2, 6) // the first try's worker died: its instance ends here
		failed := start(lts[1].TraceID, 1, 12)
		if err := rollouts.Of(s).EndInstance(ctx, failed.ID, "the sandbox did not start", false); err != nil {
			t.Fatal(err)
		}
		other := start(lts[1].TraceID, 2, 12)
		// A start of the same try retried elsewhere: the first of the two ends.
		retried := start(lts[1].TraceID, 2, 12)
		if got, _ := rollouts.Of(s).TeamInstances(ctx, a, registry, []uuid.UUID{other.ID}); len(got) != 1 || got[0].Status != models.InstanceTerminated {
			t.Errorf("the instance of a retried start = %+v", got)
		}
		// The rest of the test counts one instance per try: the stale one goes.
		if _, err := s.DB.NewDelete().Model((*models.Instance)(nil)).Where("id = ?", other.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		other = retried

		if tr, err := rollouts.Of(s).GetTrace(ctx, a, lts[1].TraceID); err != nil || tr.InstanceID == nil || *tr.InstanceID != other.ID {
			t.Errorf("the trace's instance_id = %v, %v; want its current try's %s", tr.InstanceID, err, other.ID)
		}
		l, err := rollouts.Of(s).ListInstances(ctx, a, registry, true, 10, 0)
		if err != nil || l.Total != 4 || l.Running != 2 || l.Terminated != 2 || len(l.Instances) != 4 || l.Instances[0].ID != other.ID {
			t.Fatalf("instances = %+v, %v", l, err)
		}
		byID := map[uuid.UUID]models.Instance{}
		for _, in := range l.Instances {
			byID[in.ID] = in
		}
		if f := byID[first.ID]; f.Status != models.InstanceTerminated || f.TerminatedAt == nil || f.StopReason != "try 2 started" || f.Cost != 0.5 {
			t.Errorf("a superseded try's instance = %+v; want terminated at the 5-minute baseline, $0.5", f)
		}
		if f := byID[failed.ID]; f.Status != models.InstanceTerminated || f.BaselineMinutes != 0 || f.Cost > 0.01 {
			t.Errorf("a sandbox that never started = %+v; want no baseline", f)
		}
		if l, _ := rollouts.Of(s).ListInstances(ctx, a, registry, false, 1, 0); l.Total != 2 || len(l.Instances) != 1 || l.Instances[0].Status != models.InstanceRunning {
			t.Errorf("running instances, a page of 1 = %+v", l)
		}
		if l, _ := rollouts.Of(s).ListInstances(ctx, b, registry, true, 10, 0); l.Total != 0 || len(l.Instances) != 0 {
			t.Errorf("another team sees %+v", l)
		}
		if got, _ := rollouts.Of(s).TeamInstances(ctx, b, registry, []uuid.UUID{first.ID}); len(got) != 0 {
			t.Errorf("another team resolves %+v", got)
		}

		// The attempt's end ends its running instance; a second end changes nothing.
		if _, err := rollouts.Of(s).TransitionTrace(ctx, lts[0].TraceID, rollouts.TraceUpdate{Status: models.TraceError, StopReason: models.StopError}); err != nil {
			t.Fatal(err)
		}
		if err := rollouts.Of(s).EndInstance(ctx, second.ID, "the sandbox stopped", true); err != nil {
			t.Fatal(err)
		}
		got, _ := rollouts.Of(s).TeamInstances(ctx, a, registry, []uuid.UUID{second.ID})
		if len(got) != 1 || got[0].Status != models.InstanceTerminated || got[0].StopReason != "the attempt ended error" || got[0].Cost != 0.5 {
			t.Errorf("the instance of an ended attempt = %+v", got)
		}

		// Usage: one instance still runs (priced up to now, at least its baseline, $1).
		u, err := rollouts.Of(s).EnvironmentUsage(ctx, a, rollouts.EnvironmentUsageFilter{Since: time.Now().Add(-time.Hour)}, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := 0.5 + 0.5 + 1 + byID[failed.ID].Cost
		if u.ActiveCount != 1 || u.TotalCount != 4 || math.Abs(u.TotalCost-want) > 1e-6 || len(u.Rows) != 4 || len(u.Chart) == 0 {
			t.Errorf("environment usage = %+v, want $%v", u, want)
		}
		if u, _ := rollouts.Of(s).EnvironmentUsage(ctx, a, rollouts.EnvironmentUsageFilter{Since: time.Now().Add(-time.Hour), Status: models.InstanceRunning}, 10, 0); len(u.Rows) != 1 ||
			u.Rows[0].ID != other.ID || u.Rows[0].UserName == nil {
			t.Errorf("running usage rows = %+v", u.Rows)
		}
		if u, _ := rollouts.Of(s).EnvironmentUsage(ctx, a, rollouts.EnvironmentUsageFilter{Since: time.Now().Add(time.Hour)}, 10, 0); u.TotalCount != 0 || len(u.Rows) != 0 {
			t.Errorf("usage of the future = %+v", u)
		}
		tus, err := billing.Of(s).TracesUsage(ctx, a, &job.ID, nil)
		if err != nil || len(tus) != 2 {
			t.Fatalf("traces usage = %+v, %v", tus, err)
		}
		for _, tu := range tus {
			switch tu.TraceID {
			case lts[0].TraceID:
				if tu.Instances != 2 || tu.StillRunning || tu.EnvironmentCost != 1 || tu.BaselineMinutes != 10 || tu.BaselineCost != 1 || tu.EnvironmentRateUSD != 6 {
					t.Errorf("two tries' usage = %+v", tu)
				}
			case lts[1].TraceID:
				if tu.Instances != 2 || !tu.StillRunning || tu.EnvironmentCost < 1 || tu.BaselineMinutes != 5 {
					t.Errorf("a running attempt's usage = %+v", tu)
				}
			}
		}
	})
}
