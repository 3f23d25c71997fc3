package models

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// WorkerQueue is one task queue a worker process polls: a worker announces its queues at start
// and every WorkerAnnounceEvery, and retires them when it stops.
type WorkerQueue struct {
	bun.BaseModel `bun:"table:worker_queues,alias:wq"`
	// Worker names the process (hostname/pid/random); Queue the task queue it polls.
	Worker string `bun:"worker,pk"`
	Queue  string `bun:"queue,pk"`
	// Hostname is the host the process runs on.
	Hostname string `bun:"hostname"`
	// SandboxCapacity is how many sandboxes the process runs at once for this queue (0 for the
	// workflow and build queues).
	SandboxCapacity int       `bun:"sandbox_capacity"`
	GPUs            int       `bun:"gpus"`
	GPUType         string    `bun:"gpu_type"`
	StartedAt       time.Time `bun:"started_at"`
	LastSeenAt      time.Time `bun:"last_seen_at"`
}

// WorkerAnnounceEvery is how often a worker refreshes its rows; WorkerLiveWithin how recently a
// worker must have done so to count as live (a few missed refreshes are tolerated).
const (
	WorkerAnnounceEvery = 15 * time.Second
	WorkerLiveWithin    = time.Minute
	// workerForgetAfter is when a crashed worker's rows are deleted.
	workerForgetAfter = time.Hour
)

// AnnounceWorker writes (or refreshes) a worker's queues as seen now, and forgets the rows of
// workers not seen for an hour.
func (s *Store) AnnounceWorker(ctx context.Context, rows []WorkerQueue) error {
	if len(rows) == 0 {
		return nil
	}
	t := now()
	for i := range rows {
		rows[i].LastSeenAt = t
		if rows[i].StartedAt.IsZero() {
			rows[i].StartedAt = t
		}
	}
	if _, err := s.DB.NewInsert().Model(&rows).On("CONFLICT (worker, queue) DO UPDATE").
		Set("last_seen_at = EXCLUDED.last_seen_at").Set("sandbox_capacity = EXCLUDED.sandbox_capacity").Exec(ctx); err != nil {
		return fmt.Errorf("announce worker: %w", err)
	}
	if _, err := s.DB.NewDelete().Model((*WorkerQueue)(nil)).Where("last_seen_at < ?", t.Add(-workerForgetAfter)).Exec(ctx); err != nil {
		return fmt.Errorf("forget old workers: %w", err)
	}
	return nil
}

// RetireWorker deletes a stopping worker's rows.
func (s *Store) RetireWorker(ctx context.Context, worker string) error {
	if _, err := s.DB.NewDelete().Model((*WorkerQueue)(nil)).Where("worker = ?", worker).Exec(ctx); err != nil {
		return fmt.Errorf("retire worker: %w", err)
	}
	return nil
}

// QueueCapacity is what the live workers of one task queue offer.
type QueueCapacity struct {
	Queue           string `bun:"queue"`
	Workers         int    `bun:"workers"`
	SandboxCapacity int    `bun:"sandbox_capacity"`
	GPUs            int    `bun:"gpus"`
}

// QueueCapacities sums, per task queue, the workers seen within WorkerLiveWithin, by queue name.
func (s *Store) QueueCapacities(ctx context.Context) ([]QueueCapacity, error) {
	out := []QueueCapacity{}
	err := s.DB.NewSelect().Model((*WorkerQueue)(nil)).
		ColumnExpr("queue, COUNT(*) AS workers, COALESCE(SUM(sandbox_capacity), 0) AS sandbox_capacity, COALESCE(SUM(gpus), 0) AS gpus").
		Where("last_seen_at >= ?", now().Add(-WorkerLiveWithin)).Group("queue").Order("queue").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("queue capacities: %w", err)
	}
	return out, nil
}
