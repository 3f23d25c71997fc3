package billing

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/proctorhq/proctor/models"
)

// TraceUsage is what one attempt used.
type TraceUsage struct {
	TraceID        uuid.UUID  `bun:"id,type:uuid"`
	Status         string     `bun:"status"`
	CreatedAt      time.Time  `bun:"created_at"`
	StartTime      *time.Time `bun:"start_time"`
	EndTime        *time.Time `bun:"end_time"`
	EnvironmentID  *uuid.UUID `bun:"registry_id,type:uuid"`
	AgentActions   int        `bun:"agent_actions"`
	InferenceCost  float64    `bun:"inference_cost"`
	InferenceCalls int        `bun:"inference_calls"`

	// Summed over the attempt's instances (one per try that got a sandbox).
	Instances          int
	StillRunning       bool
	BaselineMinutes    float64
	AdditionalMinutes  float64
	BaselineCost       float64
	AdditionalCost     float64
	EnvironmentCost    float64
	EnvironmentRateUSD float64
}

// TracesUsage is the usage of the caller's team's attempts of a job (jobID) or of one attempt
// (traceID): the cost of its model calls through the gateway, and its environment time, from
// its instances: each charged its hourly rate over the time it ran, and at least its baseline.
func (s *Store) TracesUsage(ctx context.Context, c *models.Caller, jobID, traceID *uuid.UUID) ([]TraceUsage, error) {
	var out []TraceUsage
	q := s.DB.NewSelect().TableExpr("traces AS tr").
		ColumnExpr("tr.id, tr.status, tr.created_at, tr.start_time, tr.end_time, tv.registry_id").
		ColumnExpr("(SELECT count(*) FROM trace_events AS e WHERE e.trace_id = tr.id AND e.kind = ?) AS agent_actions", models.EventToolCall).
		ColumnExpr("(SELECT COALESCE(SUM(il.cost), 0.0) FROM inference_logs AS il WHERE il.trace_id = tr.id) AS inference_cost").
		ColumnExpr("(SELECT count(*) FROM inference_logs AS il WHERE il.trace_id = tr.id) AS inference_calls").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		Where("tr.team_id = ?", c.TeamID)
	iq := s.DB.NewSelect().Model((*models.Instance)(nil)).Where("team_id = ?", c.TeamID)
	if jobID != nil {
		q, iq = q.Where("tr.job_id = ?", *jobID), iq.Where("job_id = ?", *jobID)
	}
	if traceID != nil {
		q, iq = q.Where("tr.id = ?", *traceID), iq.Where("trace_id = ?", *traceID)
	}
	if err := q.OrderExpr("tr.created_at ASC, tr.id ASC").Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("traces usage: %w", err)
	}
	var instances []models.Instance
	if err := iq.OrderExpr("created_at ASC").Scan(ctx, &instances); err != nil {
		return nil, fmt.Errorf("traces usage: %w", err)
	}
	byTrace := make(map[uuid.UUID]*TraceUsage, len(out))
	for i := range out {
		byTrace[out[i].TraceID] = &out[i]
	}
	at := models.Now()
	for i := range instances {
		in := &instances[i]
		u := byTrace[in.TraceID]
		if u == nil {
			continue
		}
		minutes, cost := in.Usage(at)
		base := in.HourlyRate * in.BaselineMinutes / 60
		u.Instances++
		u.StillRunning = u.StillRunning || in.Status == models.InstanceRunning
		u.EnvironmentRateUSD = in.HourlyRate // the latest try's
		u.BaselineMinutes += in.BaselineMinutes
		u.AdditionalMinutes += math.Max(0, minutes-in.BaselineMinutes)
		u.BaselineCost += base
		u.AdditionalCost += math.Max(0, cost-base)
		u.EnvironmentCost += cost
	}
	for i := range out {
		u := &out[i]
		u.BaselineCost, u.AdditionalCost, u.EnvironmentCost = models.RoundUSD(u.BaselineCost), models.RoundUSD(u.AdditionalCost), models.RoundUSD(u.EnvironmentCost)
	}
	return out, nil
}
