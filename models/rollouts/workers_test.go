package rollouts_test

import (
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// Live workers' queues are summed per queue; a stopped worker retires its rows, and a crashed
// one (not seen for a minute) stops counting.
func TestWorkerQueuesSumLiveWorkers(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := t.Context()
		a := []models.WorkerQueue{
			{Worker: "a", Queue: "proctor-workflows", Hostname: "h1"},
			{Worker: "a", Queue: "sandboxes-cpu", Hostname: "h1", SandboxCapacity: 8},
		}
		b := []models.WorkerQueue{{Worker: "b", Queue: "sandboxes-cpu", Hostname: "h2", SandboxCapacity: 4}}
		gpu := []models.WorkerQueue{{Worker: "g", Queue: "sandboxes-gpu-h100", Hostname: "h3", SandboxCapacity: 2, GPUs: 2, GPUType: "h100"}}
		for _, rows := range [][]models.WorkerQueue{a, b, gpu} {
			if err := rollouts.Of(s).AnnounceWorker(ctx, rows); err != nil {
				t.Fatal(err)
			}
		}
		// Announcing again refreshes, and does not add rows.
		if err := rollouts.Of(s).AnnounceWorker(ctx, b); err != nil {
			t.Fatal(err)
		}
		got, err := rollouts.Of(s).QueueCapacities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []rollouts.QueueCapacity{{Queue: "proctor-workflows", Workers: 1}, {Queue: "sandboxes-cpu", Workers: 2, SandboxCapacity: 12},
			{Queue: "sandboxes-gpu-h100", Workers: 1, SandboxCapacity: 2, GPUs: 2}}
		if len(got) != len(want) {
			t.Fatalf("capacities = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("capacity %d = %+v, want %+v", i, got[i], want[i])
			}
		}

		// b stops; g crashed two minutes ago.
		if err := rollouts.Of(s).RetireWorker(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.DB.NewUpdate().Model((*models.WorkerQueue)(nil)).Set("last_seen_at = ?", time.Now().UTC().Add(-2*time.Minute)).
			Where("worker = ?", "g").Exec(ctx); err != nil {
			t.Fatal(err)
		}
		got, err = rollouts.Of(s).QueueCapacities(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[1] != (rollouts.QueueCapacity{Queue: "sandboxes-cpu", Workers: 1, SandboxCapacity: 8}) {
			t.Errorf("after a stop and a crash: %+v", got)
		}
	})
}
