package models

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
)

// Pricing prices environment time: an hourly rate, and a baseline of minutes every attempt that
// started is charged at least (the spec's environment_baseline_minutes).
type Pricing struct {
	HourlyRate      float64
	BaselineMinutes float64
}

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

	// Computed from the times and the pricing.
	StillRunning       bool
	BaselineMinutes    float64
	AdditionalMinutes  float64
	BaselineCost       float64
	AdditionalCost     float64
	EnvironmentCost    float64
	EnvironmentRateUSD float64
}

// TracesUsage is the usage of the caller's team's attempts of a job (jobID) or of one attempt
// (traceID): environment time from each attempt's start to its end (or now), priced by p, and
// the cost of its model calls through the gateway.
func (s *Store) TracesUsage(ctx context.Context, c *Caller, jobID, traceID *uuid.UUID, p Pricing) ([]TraceUsage, error) {
	var out []TraceUsage
	q := s.DB.NewSelect().TableExpr("traces AS tr").
		ColumnExpr("tr.id, tr.status, tr.created_at, tr.start_time, tr.end_time, tv.registry_id").
		ColumnExpr("(SELECT count(*) FROM trace_events AS e WHERE e.trace_id = tr.id AND e.kind = ?) AS agent_actions", EventToolCall).
		ColumnExpr("(SELECT COALESCE(SUM(il.cost), 0.0) FROM inference_logs AS il WHERE il.trace_id = tr.id) AS inference_cost").
		ColumnExpr("(SELECT count(*) FROM inference_logs AS il WHERE il.trace_id = tr.id) AS inference_calls").
		Join("LEFT JOIN task_versions AS tv ON tv.id = tr.task_version_id").
		Where("tr.team_id = ?", c.TeamID)
	if jobID != nil {
		q = q.Where("tr.job_id = ?", *jobID)
	}
	if traceID != nil {
		q = q.Where("tr.id = ?", *traceID)
	}
	if err := q.OrderExpr("tr.created_at ASC, tr.id ASC").Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("traces usage: %w", err)
	}
	now := time.Now()
	for i := range out {
		u := &out[i]
		u.StillRunning = !Terminal(u.Status)
		u.EnvironmentRateUSD = p.HourlyRate
		if u.StartTime == nil {
			continue // never started: no environment time
		}
		end := now
		if u.EndTime != nil {
			end = *u.EndTime
		}
		minutes := math.Max(0, end.Sub(*u.StartTime).Minutes())
		u.BaselineMinutes = p.BaselineMinutes
		u.AdditionalMinutes = math.Max(0, minutes-p.BaselineMinutes)
		u.BaselineCost = p.HourlyRate * u.BaselineMinutes / 60
		u.AdditionalCost = p.HourlyRate * u.AdditionalMinutes / 60
		u.EnvironmentCost = u.BaselineCost + u.AdditionalCost
	}
	return out, nil
}
