package httpapi

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

func (s *Server) registerInstances() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-instances", Method: http.MethodGet, Path: "/instance", Tags: []string{"Instances"}, Summary: "List an environment's instances",
		Description: "The sandboxes the caller's team's attempts run (or ran, with `include_terminated`) of one environment, newest first: " +
			"one per try of an attempt, with its resources, the hourly rate it started with and its cost so far.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listInstances)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "stop-instances", Method: http.MethodPost, Path: "/instance/stop", Tags: []string{"Instances"}, Summary: "Stop instances",
		Description: "Cancels the attempts that run these instances through their workflows: each attempt ends cancelled and its sandbox " +
			"is torn down. An id that is not a running instance of the environment is reported in `errors`, not stopped.",
		Errors: []int{http.StatusNotFound, http.StatusServiceUnavailable},
	}, authKeyOrSession)), s.stopInstances)
}

// InstanceGPU is the GPUs an instance was given.
type InstanceGPU struct {
	Count int    `json:"count"`
	Type  string `json:"type"`
}

// InstanceResources are what an instance was given (0: no limit).
type InstanceResources struct {
	CPU      float64     `json:"cpu"`
	MemoryMB int         `json:"memory_mb"`
	GPU      InstanceGPU `json:"gpu"`
}

// Instance is one sandbox of an attempt's try (spec: Resources › Instance, and more).
type Instance struct {
	ID                  uuid.UUID         `json:"id"`
	Status              string            `json:"status" enum:"running,terminated"`
	CreatedAt           time.Time         `json:"created_at"`
	ActualCost          float64           `json:"actual_cost" doc:"USD so far: the hourly rate over its time, at least its baseline minutes"`
	BuildID             *uuid.UUID        `json:"build_id" doc:"the build whose image it runs; null for a host command"`
	CPUMillicores       int               `json:"cpu_millicores" doc:"the CPU it may use (0: no limit)"`
	VMInstanceType      string            `json:"vm_instance_type" example:"gpu-h100" doc:"the pool it runs in: cpu, or gpu-<type>"`
	FileTrackingEnabled bool              `json:"file_tracking_enabled" doc:"always false: Proctor does not track files written in sandboxes"`
	HourlyRate          float64           `json:"hourly_rate"`
	MaxRuntimeSeconds   float64           `json:"max_runtime_seconds" doc:"its attempt's run timeout"`
	MaxSessionSeconds   float64           `json:"max_session_seconds" doc:"how long it may live: its startup timeout and its run timeout"`
	MemoryGB            float64           `json:"memory_gb" doc:"the memory it may use in GiB (0: no limit)"`
	TerminatedAt        *time.Time        `json:"terminated_at"`
	StopReason          string            `json:"stop_reason" doc:"why it ended; empty while it runs"`
	RegistryID          *uuid.UUID        `json:"registry_id"`
	TraceID             uuid.UUID         `json:"trace_id"`
	JobID               uuid.UUID         `json:"job_id"`
	Attempt             int               `json:"attempt" doc:"the try of the attempt it serves"`
	HostQueue           string            `json:"host_queue" doc:"the worker that runs it"`
	Resources           InstanceResources `json:"resources"`
	DurationHours       float64           `json:"duration_hours"`
	UserID              *uuid.UUID        `json:"user_id"`
	APIKeyID            *uuid.UUID        `json:"api_key_id"`
}

func instanceOut(in *models.Instance, at time.Time) Instance {
	minutes, cost := in.Usage(at)
	out := Instance{ID: in.ID, Status: in.Status, CreatedAt: in.CreatedAt, ActualCost: cost, BuildID: in.BuildID, CPUMillicores: int(math.Round(in.CPU * 1000)),
		VMInstanceType: "cpu", HourlyRate: in.HourlyRate, MemoryGB: models.RoundUSD(float64(in.MemoryMB) / 1024), TerminatedAt: in.TerminatedAt,
		StopReason: in.StopReason, RegistryID: in.RegistryID, TraceID: in.TraceID, JobID: in.JobID, Attempt: in.Attempt, HostQueue: in.HostQueue,
		Resources:     InstanceResources{CPU: in.CPU, MemoryMB: in.MemoryMB, GPU: InstanceGPU{Count: in.GPUCount, Type: in.GPUType}},
		DurationHours: models.RoundUSD(minutes / 60), UserID: in.UserID, APIKeyID: in.APIKeyID}
	if in.GPUCount > 0 {
		out.VMInstanceType = "gpu-" + in.GPUType
		if in.GPUType == "" {
			out.VMInstanceType = "gpu"
		}
	}
	if l := in.Limits; l != nil {
		if l.RunTimeoutS != nil {
			out.MaxRuntimeSeconds = *l.RunTimeoutS
		}
		out.MaxSessionSeconds = out.MaxRuntimeSeconds
		if l.StartupTimeoutS != nil {
			out.MaxSessionSeconds += *l.StartupTimeoutS
		}
	}
	return out
}

type listInstancesInput struct {
	RegistryID        uuid.UUID `query:"registry_id" required:"true"`
	IncludeTerminated bool      `query:"include_terminated" default:"false"`
	Limit             int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset            int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

type listInstancesOutput struct {
	Body struct {
		Instances       []Instance `json:"instances" nullable:"false"`
		Total           int        `json:"total" doc:"the instances listed by these filters, over every page"`
		RunningCount    int        `json:"running_count"`
		TerminatedCount int        `json:"terminated_count"`
		HasMore         bool       `json:"has_more"`
	}
}

// listInstances serves GET /v2/instance.
func (s *Server) listInstances(ctx context.Context, in *listInstancesInput) (*listInstancesOutput, error) {
	c := callerFrom(ctx)
	if _, err := s.registry.GetRegistry(ctx, c, in.RegistryID); err != nil {
		return nil, storeError(err, "environment")
	}
	l, err := s.rollouts.ListInstances(ctx, c, in.RegistryID, in.IncludeTerminated, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	out := &listInstancesOutput{}
	b := &out.Body
	b.Total, b.RunningCount, b.TerminatedCount = l.Total, l.Running, l.Terminated
	b.HasMore = in.Offset+len(l.Instances) < l.Total
	now := time.Now()
	b.Instances = make([]Instance, len(l.Instances))
	for i := range l.Instances {
		b.Instances[i] = instanceOut(&l.Instances[i], now)
	}
	return out, nil
}

type stopInstancesInput struct {
	Body struct {
		RegistryID  uuid.UUID   `json:"registry_id"`
		InstanceIDs []uuid.UUID `json:"instance_ids" minItems:"1" maxItems:"500"`
	}
}

type stopInstancesOutput struct {
	Body struct {
		Stopped int      `json:"stopped" doc:"instances whose attempts were told to stop"`
		Errors  []string `json:"errors" nullable:"false" doc:"one line per id that was not stopped, saying why"`
	}
}

// stopInstances serves POST /v2/instance/stop.
func (s *Server) stopInstances(ctx context.Context, in *stopInstancesInput) (*stopInstancesOutput, error) {
	c := callerFrom(ctx)
	if _, err := s.registry.GetRegistry(ctx, c, in.Body.RegistryID); err != nil {
		return nil, storeError(err, "environment")
	}
	if err := s.requireWorkflows(); err != nil {
		return nil, err
	}
	found, err := s.rollouts.TeamInstances(ctx, c, in.Body.RegistryID, in.Body.InstanceIDs)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]*models.Instance, len(found))
	for i := range found {
		byID[found[i].ID] = &found[i]
	}
	out := &stopInstancesOutput{}
	out.Body.Errors = []string{}
	seen := map[uuid.UUID]bool{}
	for _, id := range in.Body.InstanceIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		inst := byID[id]
		switch {
		case inst == nil:
			out.Body.Errors = append(out.Body.Errors, id.String()+": no such instance of this environment")
			continue
		case inst.Status != models.InstanceRunning:
			out.Body.Errors = append(out.Body.Errors, id.String()+": already terminated")
			continue
		}
		// The workflow settles it: it tears the sandbox down, then writes cancelled (and ends
		// the instance).
		s.rollouts.TransitionTrace(ctx, inst.TraceID, rollouts.TraceUpdate{Status: models.TraceCancelling}) //nolint:errcheck // informational
		if err := s.workflows.CancelTrace(ctx, inst.TraceID); err != nil {
			s.log.ErrorContext(ctx, "stop instance", "request_id", requestIDFrom(ctx), "instance", id, "trace", inst.TraceID, "error", err)
			out.Body.Errors = append(out.Body.Errors, id.String()+": the rollout engine could not cancel its attempt (request id "+requestIDFrom(ctx)+")")
			continue
		}
		out.Body.Stopped++
	}
	return out, nil
}
