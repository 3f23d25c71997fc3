package storetest

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// The fixtures below are the rows the store tests of several domains start from.

// Member creates a team with one member, an owner, and returns that member as a caller.
func Member(t testing.TB, s *models.Store, team, email string) *models.Caller {
	t.Helper()
	ctx := context.Background()
	tm, err := s.CreateTeam(ctx, team)
	if err != nil {
		t.Fatal(err)
	}
	u, m, err := s.AddMember(ctx, tm.ID, "", email, models.RoleOwner)
	if err != nil {
		t.Fatal(err)
	}
	return &models.Caller{TeamID: tm.ID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
}

// LaunchFixture uploads two tasks (a and b, of the taskset demo) and seeds the oracle model.
func LaunchFixture(t testing.TB, s *models.Store, c *models.Caller) (versions []uuid.UUID, oracle *models.LLMModel) {
	t.Helper()
	ctx := context.Background()
	res, err := catalog.Of(s).UploadTasks(ctx, c, catalog.Upload{TasksetName: "demo", Tasks: []catalog.TaskUpload{
		{TaskContent: models.TaskContent{Name: "a", Prompt: "p"}}, {TaskContent: models.TaskContent{Name: "b", Prompt: "p"}}}})
	if err != nil {
		t.Fatal(err)
	}
	oracle = &models.LLMModel{ModelName: "oracle", Name: "Oracle", Provider: "proctor", Adapter: models.AdapterOracle}
	if err := llms.Of(s).UpsertModel(ctx, oracle); err != nil {
		t.Fatal(err)
	}
	return res.TaskVersionIDs, oracle
}

// LaunchOne launches one attempt of a member's fixture task, as a job of its own, and returns
// the member and the attempt's trace id.
func LaunchOne(t testing.TB, s *models.Store) (*models.Caller, uuid.UUID) {
	t.Helper()
	a := Member(t, s, "alpha", "a@example.com")
	versions, oracle := LaunchFixture(t, s, a)
	_, traces, err := rollouts.Of(s).LaunchJob(context.Background(), a, rollouts.Launch{MaxSteps: 5, GroupSize: 1, MaxConcurrent: 1,
		Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	return a, traces[0].ID
}

// MedianUnder runs f nine times, reports its median as the metric name-ms, and fails b when the
// median is over goal: a store benchmark's bound on one query.
func MedianUnder(b *testing.B, goal time.Duration, name string, f func() error) {
	b.Helper()
	var d []time.Duration
	for range 9 {
		t0 := time.Now()
		if err := f(); err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		d = append(d, time.Since(t0))
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, name+"-ms")
	b.Logf("%s: median %s of 9", name, d[len(d)/2].Round(100*time.Microsecond))
	if d[len(d)/2] > goal {
		b.Errorf("%s: median %s, over %s", name, d[len(d)/2], goal)
	}
}
