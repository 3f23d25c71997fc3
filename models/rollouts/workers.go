package rollouts

import (
	"context"
	"fmt"
	"github.com/proctorhq/proctor/models"
	"time"
)

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
func (s *Store) AnnounceWorker(ctx context.Context, rows []models.WorkerQueue) error {
	if len(rows) == 0 {
		return nil
	}
	t := models.Now()
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
	if _, err := s.DB.NewDelete().Model((*models.WorkerQueue)(nil)).Where("last_seen_at < ?", t.Add(-workerForgetAfter)).Exec(ctx); err != nil {
		return fmt.Errorf("forget old workers: %w", err)
	}
	return nil
}

// RetireWorker deletes a stopping worker's rows.
func (s *Store) RetireWorker(ctx context.Context, worker string) error {
	if _, err := s.DB.NewDelete().Model((*models.WorkerQueue)(nil)).Where("worker = ?", worker).Exec(ctx); err != nil {
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
	err := s.DB.NewSelect().Model((*models.WorkerQueue)(nil)).
		ColumnExpr("queue, COUNT(*) AS workers, COALESCE(SUM(sandbox_capacity), 0) AS sandbox_capacity, COALESCE(SUM(gpus), 0) AS gpus").
		Where("last_seen_at >= ?", models.Now().Add(-WorkerLiveWithin)).Group("queue").Order("queue").Scan(ctx, &out)
	if err != nil {
		return nil, fmt.Errorf("queue capacities: %w", err)
	}
	return out, nil
}
