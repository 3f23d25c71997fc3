package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/rollouts"
)

func (s *Server) registerUsage() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-usage", Method: http.MethodGet, Path: "/jobs/{job_id}/usage", Tags: []string{"Jobs"}, Summary: "A job's cost",
		Description: "Inference (the gateway's recorded calls) and environment time (each sandbox an attempt ran in, from its start to " +
			"its end or now, at the hourly rate its resources were priced at when it started, and at least the baseline minutes) of the caller's team's job.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getJobUsage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-usage", Method: http.MethodGet, Path: "/trace/{trace_id}/usage", Tags: []string{"Traces"}, Summary: "An attempt's cost",
		Description: "The trace entry of the job's usage.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTraceUsage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-environment-usage", Method: http.MethodGet, Path: "/environments/usage", Tags: []string{"Usage"},
		Summary: "Environment usage",
		Description: "The team's sandboxes (instances) started in the last `days` days: totals, a daily chart (UTC, by start day) and the " +
			"instances, newest first. A running instance is priced up to now.",
	}, authKeyOrSession), s.getEnvironmentUsage)
}

// TraceUsage is one attempt's usage.
type TraceUsage struct {
	TraceID                      uuid.UUID  `json:"trace_id"`
	AgentActions                 int        `json:"agent_actions" doc:"the tool calls the agent made"`
	CreatedAt                    time.Time  `json:"created_at"`
	EndTime                      *time.Time `json:"end_time"`
	EnvironmentAdditionalCost    float64    `json:"environment_additional_cost"`
	EnvironmentAdditionalMinutes float64    `json:"environment_additional_minutes"`
	EnvironmentBaselineCost      float64    `json:"environment_baseline_cost"`
	EnvironmentBaselineMinutes   float64    `json:"environment_baseline_minutes" doc:"the minutes its sandboxes are charged at least (the baseline per sandbox, summed)"`
	EnvironmentCost              float64    `json:"environment_cost"`
	EnvironmentHourlyRate        float64    `json:"environment_hourly_rate"`
	EnvironmentID                *uuid.UUID `json:"environment_id"`
	EnvironmentStillRunning      bool       `json:"environment_still_running" doc:"one of its sandboxes is running"`
	InferenceCost                float64    `json:"inference_cost" doc:"the cost of the attempt's model calls"`
}

func traceUsage(u billing.TraceUsage) TraceUsage {
	return TraceUsage{TraceID: u.TraceID, AgentActions: u.AgentActions, CreatedAt: u.CreatedAt, EndTime: u.EndTime,
		EnvironmentAdditionalCost: u.AdditionalCost, EnvironmentAdditionalMinutes: u.AdditionalMinutes, EnvironmentBaselineCost: u.BaselineCost,
		EnvironmentBaselineMinutes: u.BaselineMinutes, EnvironmentCost: u.EnvironmentCost, EnvironmentHourlyRate: u.EnvironmentRateUSD,
		EnvironmentID: u.EnvironmentID, EnvironmentStillRunning: u.StillRunning, InferenceCost: u.InferenceCost}
}

// CostBlock is the cost of one kind of usage.
type CostBlock struct {
	Cost    float64 `json:"cost"`
	Count   int     `json:"count"`
	Details object  `json:"details"`
}

// environmentCostDetails and inferenceCostDetails are the details of a job's cost blocks (an
// open object in the spec).
type environmentCostDetails struct {
	Instances             int `json:"instances"`
	AttemptsWithInstances int `json:"attempts_with_instances"`
}

type inferenceCostDetails struct {
	Calls int `json:"calls"`
}

// TrainingCost is training on the platform (none: training happens outside it).
type TrainingCost struct {
	TotalCost      float64 `json:"total_cost"`
	HourlyRate     float64 `json:"hourly_rate"`
	RuntimeSeconds float64 `json:"runtime_seconds"`
}

type jobUsageOutput struct {
	Body struct {
		JobID                    uuid.UUID    `json:"job_id"`
		CalculatedAt             time.Time    `json:"calculated_at"`
		JobName                  string       `json:"job_name"`
		Note                     string       `json:"note"`
		TotalCost                float64      `json:"total_cost"`
		TraceCount               int          `json:"trace_count"`
		EnvironmentsStillRunning int          `json:"environments_still_running"`
		InferenceCostIncomplete  bool         `json:"inference_cost_incomplete" doc:"attempts still run: more calls may come"`
		EnvironmentCost          CostBlock    `json:"environment_cost"`
		InferenceCost            CostBlock    `json:"inference_cost"`
		TrainingCost             TrainingCost `json:"training_cost"`
		Traces                   []TraceUsage `json:"traces" nullable:"false"`
	}
}

type jobPathInput struct {
	JobID uuid.UUID `path:"job_id"`
}

// getJobUsage serves GET /v2/jobs/{job_id}/usage.
func (s *Server) getJobUsage(ctx context.Context, in *jobPathInput) (*jobUsageOutput, error) {
	c := callerFrom(ctx)
	job, err := s.rollouts.GetJob(ctx, c, in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	if job.TeamID != c.TeamID {
		return nil, newAPIError(http.StatusNotFound, "job not found")
	}
	rows, err := s.billing.TracesUsage(ctx, c, &job.ID, nil)
	if err != nil {
		return nil, err
	}
	out := &jobUsageOutput{}
	b := &out.Body
	b.JobID, b.CalculatedAt, b.JobName, b.TraceCount = job.ID, time.Now().UTC(), job.Name, len(rows)
	b.Note = "environment time is each sandbox's, from its start to its end (or now), at the hourly rate it started with and at least its baseline minutes"
	b.Traces = make([]TraceUsage, len(rows))
	calls, instances, withInstances, open := 0, 0, 0, 0
	for i, r := range rows {
		b.Traces[i] = traceUsage(r)
		b.EnvironmentCost.Cost += r.EnvironmentCost
		b.InferenceCost.Cost += r.InferenceCost
		calls += r.InferenceCalls
		instances += r.Instances
		if r.Instances > 0 {
			withInstances++
		}
		if r.StillRunning {
			b.EnvironmentsStillRunning++
		}
		if !rollouts.Terminal(r.Status) {
			open++
		}
	}
	b.EnvironmentCost.Count, b.InferenceCost.Count = instances, calls
	b.InferenceCostIncomplete = open > 0
	b.EnvironmentCost.Details = objectOf(&environmentCostDetails{Instances: instances, AttemptsWithInstances: withInstances})
	b.InferenceCost.Details = objectOf(&inferenceCostDetails{Calls: calls})
	b.EnvironmentCost.Cost, b.InferenceCost.Cost = models.RoundUSD(b.EnvironmentCost.Cost), models.RoundUSD(b.InferenceCost.Cost)
	b.TotalCost = models.RoundUSD(b.EnvironmentCost.Cost + b.InferenceCost.Cost)
	return out, nil
}

type traceUsageOutput struct{ Body TraceUsage }

type tracePathInput struct {
	TraceID uuid.UUID `path:"trace_id"`
}

// getTraceUsage serves GET /v2/trace/{trace_id}/usage.
func (s *Server) getTraceUsage(ctx context.Context, in *tracePathInput) (*traceUsageOutput, error) {
	rows, err := s.billing.TracesUsage(ctx, callerFrom(ctx), nil, &in.TraceID)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, newAPIError(http.StatusNotFound, "trace not found")
	}
	return &traceUsageOutput{Body: traceUsage(rows[0])}, nil
}

type environmentUsageInput struct {
	Days     int       `query:"days" minimum:"1" maximum:"366" default:"7"`
	UserID   uuid.UUID `query:"user_id"`
	APIKeyID uuid.UUID `query:"api_key_id"`
	Status   string    `query:"status" enum:"running,terminated" doc:"only instances in this status"`
	Limit    int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset   int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// EnvironmentUsageSummary totals the instances of the period.
type EnvironmentUsageSummary struct {
	ActiveCount int     `json:"active_count" doc:"instances running now"`
	TotalCost   float64 `json:"total_cost"`
	TotalCount  int     `json:"total_count"`
	TotalHours  float64 `json:"total_hours"`
}

// EnvironmentUsageDay is one UTC day of the chart: the instances started that day.
type EnvironmentUsageDay struct {
	Date  string  `json:"date" doc:"YYYY-MM-DD (UTC)"`
	Cost  float64 `json:"cost"`
	Count int     `json:"count"`
	Hours float64 `json:"hours"`
}

// EnvironmentUsageRow is one instance.
type EnvironmentUsageRow struct {
	ID            uuid.UUID  `json:"id"`
	CreatedAt     time.Time  `json:"created_at"`
	Status        string     `json:"status" enum:"running,terminated"`
	APIKeyID      *uuid.UUID `json:"api_key_id" doc:"the key that launched its attempt; null when a session did"`
	APIKeyName    *string    `json:"api_key_name"`
	Cost          float64    `json:"cost" doc:"USD so far"`
	DurationHours float64    `json:"duration_hours"`
	HourlyRate    float64    `json:"hourly_rate"`
	TerminatedAt  *time.Time `json:"terminated_at"`
	UserID        *uuid.UUID `json:"user_id"`
	UserName      *string    `json:"user_name"`
}

type environmentUsageOutput struct {
	Body struct {
		Summary      EnvironmentUsageSummary `json:"summary"`
		Chart        []EnvironmentUsageDay   `json:"chart" nullable:"false"`
		Environments []EnvironmentUsageRow   `json:"environments" nullable:"false"`
		OrgType      string                  `json:"org_type" doc:"whose usage this is: team"`
		TeamID       uuid.UUID               `json:"team_id"`
	}
}

// getEnvironmentUsage serves GET /v2/environments/usage.
func (s *Server) getEnvironmentUsage(ctx context.Context, in *environmentUsageInput) (*environmentUsageOutput, error) {
	c := callerFrom(ctx)
	u, err := s.rollouts.EnvironmentUsage(ctx, c, rollouts.EnvironmentUsageFilter{Since: time.Now().AddDate(0, 0, -in.Days),
		UserID: optionalID(in.UserID), APIKeyID: optionalID(in.APIKeyID), Status: in.Status}, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	out := &environmentUsageOutput{}
	b := &out.Body
	b.OrgType, b.TeamID = "team", c.TeamID
	b.Summary = EnvironmentUsageSummary{ActiveCount: u.ActiveCount, TotalCost: u.TotalCost, TotalCount: u.TotalCount, TotalHours: u.TotalHours}
	b.Chart = make([]EnvironmentUsageDay, len(u.Chart))
	for i, d := range u.Chart {
		b.Chart[i] = EnvironmentUsageDay{Date: d.Date, Cost: d.Cost, Count: d.Count, Hours: d.Hours}
	}
	now := time.Now()
	b.Environments = make([]EnvironmentUsageRow, len(u.Rows))
	for i, r := range u.Rows {
		minutes, cost := r.Usage(now)
		b.Environments[i] = EnvironmentUsageRow{ID: r.ID, CreatedAt: r.CreatedAt, Status: r.Status, APIKeyID: r.APIKeyID, APIKeyName: r.APIKeyName,
			Cost: cost, DurationHours: models.RoundUSD(minutes / 60), HourlyRate: r.HourlyRate, TerminatedAt: r.TerminatedAt, UserID: r.UserID, UserName: r.UserName}
	}
	return out, nil
}
