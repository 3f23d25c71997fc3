package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

func (s *Server) registerUsage() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-job-usage", Method: http.MethodGet, Path: "/jobs/{job_id}/usage", Tags: []string{"Jobs"}, Summary: "A job's cost",
		Description: "Inference (the gateway's recorded calls) and environment time (each attempt from its start to its end, or now, at " +
			"the server's hourly rate, with a baseline of minutes per started attempt) of the caller's team's job.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getJobUsage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-usage", Method: http.MethodGet, Path: "/trace/{trace_id}/usage", Tags: []string{"Traces"}, Summary: "An attempt's cost",
		Description: "The trace entry of the job's usage.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTraceUsage)
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
	EnvironmentBaselineMinutes   float64    `json:"environment_baseline_minutes"`
	EnvironmentCost              float64    `json:"environment_cost"`
	EnvironmentHourlyRate        float64    `json:"environment_hourly_rate"`
	EnvironmentID                *uuid.UUID `json:"environment_id"`
	EnvironmentStillRunning      bool       `json:"environment_still_running"`
	InferenceCost                float64    `json:"inference_cost" doc:"the cost of the attempt's model calls"`
}

func traceUsage(u models.TraceUsage) TraceUsage {
	return TraceUsage{TraceID: u.TraceID, AgentActions: u.AgentActions, CreatedAt: u.CreatedAt, EndTime: u.EndTime,
		EnvironmentAdditionalCost: u.AdditionalCost, EnvironmentAdditionalMinutes: u.AdditionalMinutes, EnvironmentBaselineCost: u.BaselineCost,
		EnvironmentBaselineMinutes: u.BaselineMinutes, EnvironmentCost: u.EnvironmentCost, EnvironmentHourlyRate: u.EnvironmentRateUSD,
		EnvironmentID: u.EnvironmentID, EnvironmentStillRunning: u.StillRunning, InferenceCost: u.InferenceCost}
}

// CostBlock is the cost of one kind of usage.
type CostBlock struct {
	Cost    float64        `json:"cost"`
	Count   int            `json:"count"`
	Details map[string]any `json:"details"`
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
	job, err := s.store.GetJob(ctx, c, in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	if job.TeamID != c.TeamID {
		return nil, newAPIError(http.StatusNotFound, "job not found")
	}
	rows, err := s.store.TracesUsage(ctx, c, &job.ID, nil, s.pricing)
	if err != nil {
		return nil, err
	}
	out := &jobUsageOutput{}
	b := &out.Body
	b.JobID, b.CalculatedAt, b.JobName, b.TraceCount = job.ID, time.Now().UTC(), job.Name, len(rows)
	b.Note = "environment time runs from each attempt's start to its end (or now), at the server's hourly rate, with a baseline per started attempt"
	b.Traces = make([]TraceUsage, len(rows))
	calls := 0
	for i, r := range rows {
		b.Traces[i] = traceUsage(r)
		b.EnvironmentCost.Cost += r.EnvironmentCost
		b.InferenceCost.Cost += r.InferenceCost
		calls += r.InferenceCalls
		if r.StartTime != nil {
			b.EnvironmentCost.Count++
		}
		if r.StillRunning {
			b.EnvironmentsStillRunning++
		}
	}
	b.InferenceCost.Count = calls
	b.InferenceCostIncomplete = b.EnvironmentsStillRunning > 0
	b.EnvironmentCost.Details = map[string]any{"hourly_rate": s.pricing.HourlyRate, "baseline_minutes": s.pricing.BaselineMinutes}
	b.InferenceCost.Details = map[string]any{"calls": calls}
	b.TotalCost = b.EnvironmentCost.Cost + b.InferenceCost.Cost
	return out, nil
}

type traceUsageOutput struct{ Body TraceUsage }

type tracePathInput struct {
	TraceID uuid.UUID `path:"trace_id"`
}

// getTraceUsage serves GET /v2/trace/{trace_id}/usage.
func (s *Server) getTraceUsage(ctx context.Context, in *tracePathInput) (*traceUsageOutput, error) {
	rows, err := s.store.TracesUsage(ctx, callerFrom(ctx), nil, &in.TraceID, s.pricing)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, newAPIError(http.StatusNotFound, "trace not found")
	}
	return &traceUsageOutput{Body: traceUsage(rows[0])}, nil
}
