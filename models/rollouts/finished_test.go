package rollouts_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// A job's ended attempts are numbered once, in the order they were seen to end, whoever asks
// and however many ask at once; the last of each group to end says its group is complete, and
// an attempt of no group is a group of its own.
func TestFinishedAttemptsAreNumberedOnceAndSayWhenAGroupIsComplete(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		a := storetest.Member(t, s, "alpha", "a@example.com")
		versions, oracle := storetest.LaunchFixture(t, s, a)
		var lts []rollouts.LaunchTrace
		for i := range 5 {
			group := "g1"
			if i >= 3 {
				group = "g2"
			}
			lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID, GroupID: group})
		}
		lts = append(lts, rollouts.LaunchTrace{TraceID: uuid.New(), TaskVersionID: versions[0], ModelID: oracle.ID})
		job, traces, err := rollouts.Of(s).LaunchJob(ctx, a, rollouts.Launch{MaxSteps: 5, GroupSize: 3, MaxConcurrent: 6, Traces: lts})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := rollouts.Of(s).FinishedAttempts(ctx, job.ID, 0, 100); err != nil || len(got) != 0 {
			t.Fatalf("before any attempt ended: %+v, %v", got, err)
		}
		one := 1.0
		at := time.Now()
		end := func(i int, status string) {
			t.Helper()
			at = at.Add(time.Second) // numbered together, they are numbered in the order they ended
			if ok, err := rollouts.Of(s).TransitionTrace(ctx, traces[i].ID, rollouts.TraceUpdate{Status: status, Reward: &one, StopReason: models.StopDone, EndTime: &at}); !ok || err != nil {
				t.Fatalf("end trace %d: %v %v", i, ok, err)
			}
		}
		end(0, models.TraceCompleted)
		end(3, models.TraceError)
		// Many readers at once: each attempt gets one number.
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := rollouts.Of(s).FinishedAttempts(ctx, job.ID, 0, 100); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		end(1, models.TraceCompleted)
		end(4, models.TraceCompleted)
		end(5, models.TraceCompleted)
		end(2, models.TraceCancelled)
		all, err := rollouts.Of(s).FinishedAttempts(ctx, job.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		type seen struct {
			trace    uuid.UUID
			complete bool
			size     int
		}
		var got []seen
		for i, f := range all {
			if f.Seq != int64(i+1) {
				t.Errorf("attempt %d numbered %d", i, f.Seq)
			}
			got = append(got, seen{f.TraceID, f.GroupComplete, f.GroupSize})
		}
		// 0 and 3 in either order (they ended in one reading), then the rest as they ended.
		if len(got) != 6 || got[0].trace != traces[0].ID && got[0].trace != traces[3].ID ||
			got[2] != (seen{traces[1].ID, false, 3}) || got[3] != (seen{traces[4].ID, true, 2}) || got[4] != (seen{traces[5].ID, true, 1}) ||
			got[5] != (seen{traces[2].ID, true, 3}) {
			t.Errorf("finished attempts = %+v", got)
		}
		if got[0].complete || got[1].complete {
			t.Errorf("a group complete before its last attempt ended: %+v", got[:2])
		}
		// Later reads from any number answer the same numbers.
		rest, err := rollouts.Of(s).FinishedAttempts(ctx, job.ID, 4, 1)
		if err != nil || len(rest) != 1 || rest[0].Seq != 5 || rest[0].TraceID != traces[5].ID {
			t.Errorf("after 4, one: %+v, %v", rest, err)
		}
		st, err := rollouts.Of(s).JobFinishState(ctx, job.ID)
		if err != nil || st.Attempts != 6 || st.Numbered != 6 {
			t.Errorf("finish state = %+v, %v", st, err)
		}
		if _, err := rollouts.Of(s).JobFinishState(ctx, uuid.New()); err == nil {
			t.Error("the finish state of no job was read")
		}
	})
}
