package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/rollouts"
)

// Trace is the record of one attempt (spec: Resources › Trace).
type Trace struct {
	ID                  uuid.UUID      `json:"id"`
	JobID               uuid.UUID      `json:"job_id"`
	TaskID              *uuid.UUID     `json:"task_id"`
	TaskVersionID       *uuid.UUID     `json:"task_version_id"`
	GroupID             string         `json:"group_id"`
	Name                string         `json:"name"`
	Status              string         `json:"status" enum:"pending,initializing,running,completed,error,cancelling,cancelled"`
	CreatedAt           time.Time      `json:"created_at"`
	StartTime           *time.Time     `json:"start_time"`
	EndTime             *time.Time     `json:"end_time"`
	Error               string         `json:"error"`
	InferenceLLMModelID *uuid.UUID     `json:"inference_llm_model_id"`
	InstanceID          *uuid.UUID     `json:"instance_id"`
	Metadata            map[string]any `json:"metadata"`
	Reward              *float64       `json:"reward"`
	StopReason          string         `json:"stop_reason" example:"done"`
	IsValid             bool           `json:"is_valid"`
	Attempt             int            `json:"attempt" doc:"Tries so far: infrastructure failures retry the attempt in a fresh sandbox"`
}

func traceFrom(r *rollouts.TraceRow) Trace {
	return Trace{ID: r.ID, JobID: r.JobID, TaskID: r.TaskID, TaskVersionID: r.TaskVersionID, GroupID: r.GroupID, Name: r.Name,
		Status: r.Status, CreatedAt: r.CreatedAt, StartTime: r.StartTime, EndTime: r.EndTime, Error: forReader(r, r.Error),
		InferenceLLMModelID: r.ModelID, InstanceID: r.InstanceID, Metadata: nonNilMap(r.Metadata), Reward: r.Reward,
		StopReason: r.StopReason, IsValid: r.IsValid, Attempt: r.Attempt}
}

// TraceInfo is a trace with its environment and evaluation (spec: Trace info).
type TraceInfo struct {
	Trace
	ExecutionMode    string      `json:"execution_mode" example:"hosted" doc:"hosted: Proctor's workers ran the environment and the agent"`
	Environment      *TraceEnv   `json:"environment" doc:"the environment and build its sandbox runs (before it starts: the environment's latest build); null when its task names none"`
	CanEdit          bool        `json:"can_edit"`
	Description      string      `json:"description"`
	JobName          string      `json:"job_name"`
	EvaluationResult object      `json:"evaluation_result" nullable:"true"`
	Agent            *AgentBuild `json:"agent" doc:"Proctor extension: the brought agent's build the attempt ran; null for the built-in agent loop"`
}

type tracePath struct {
	TraceID uuid.UUID `path:"trace_id"`
}

type traceOutput struct{ Body Trace }

type traceInfoOutput struct{ Body TraceInfo }

// registerTraces registers the reads and edits of a trace's record.
func (s *Server) registerTraces() {
	tags := []string{"Traces"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace", Method: http.MethodGet, Path: "/trace/{trace_id}", Tags: tags, Summary: "Get a trace",
		Description: "A trace of a published job needs no credentials.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTrace)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-info", Method: http.MethodGet, Path: "/trace/{trace_id}/info", Tags: tags, Summary: "Get a trace with its evaluation",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceInfo)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-trace", Method: http.MethodPatch, Path: "/trace/{trace_id}", Tags: tags, Summary: "Rename or describe a trace",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.updateTrace)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "batch-validate-traces", Method: http.MethodPost, Path: "/trace/batch-validate", Tags: tags, Summary: "Mark traces valid or invalid",
		Description: "Applies to the listed traces of the caller's team; others are ignored. Invalid traces do not count toward scores.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession)), s.batchValidateTraces)
}

// getTrace serves GET /v2/trace/{trace_id}: get a trace.
func (s *Server) getTrace(ctx context.Context, in *tracePath) (*traceOutput, error) {
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return &traceOutput{Body: traceFrom(t)}, nil
}

// getTraceInfo serves GET /v2/trace/{trace_id}/info: get a trace with its evaluation.
func (s *Server) getTraceInfo(ctx context.Context, in *tracePath) (*traceInfoOutput, error) {
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return s.traceInfo(ctx, t)
}

type patchTraceInput struct {
	TraceID uuid.UUID `path:"trace_id"`
	Body    struct {
		Name        *string `json:"name,omitempty" maxLength:"200"`
		Description *string `json:"description,omitempty" maxLength:"10000"`
	}
}

// updateTrace serves PATCH /v2/trace/{trace_id}: rename or describe a trace.
func (s *Server) updateTrace(ctx context.Context, in *patchTraceInput) (*traceInfoOutput, error) {
	t, err := s.rollouts.UpdateTraceText(ctx, callerFrom(ctx), in.TraceID, in.Body.Name, in.Body.Description)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return s.traceInfo(ctx, t)
}

type batchValidateInput struct {
	Body struct {
		TraceIDs []uuid.UUID `json:"trace_ids" minItems:"1" maxItems:"10000"`
		IsValid  bool        `json:"is_valid"`
	}
}

// batchValidateTraces serves POST /v2/trace/batch-validate: mark traces valid or invalid.
func (s *Server) batchValidateTraces(ctx context.Context, in *batchValidateInput) (*updatedCount, error) {
	n, err := s.rollouts.SetTracesValidity(ctx, callerFrom(ctx), in.Body.TraceIDs, in.Body.IsValid)
	if err != nil {
		return nil, err
	}
	out := &updatedCount{}
	out.Body.UpdatedCount = n
	return out, nil
}

// TraceEnv is the environment of an attempt (spec: Trace info › environment).
type TraceEnv struct {
	ID            uuid.UUID  `json:"id"`
	Name          string     `json:"name"`
	BuildDigest   *string    `json:"build_digest"`
	BuildID       *uuid.UUID `json:"build_id"`
	BuildVersion  *int       `json:"build_version"`
	CanViewSource bool       `json:"can_view_source" doc:"the build's source can be downloaded (GET /v2/registry/{id}/source-url)"`
	RegistryType  string     `json:"registry_type"`
}

func (s *Server) traceInfo(ctx context.Context, t *rollouts.TraceRow) (*traceInfoOutput, error) {
	out := &traceInfoOutput{Body: TraceInfo{Trace: traceFrom(t), ExecutionMode: "hosted", CanEdit: t.CanEdit, Description: t.Description,
		JobName: t.JobName, EvaluationResult: objectOf(t.EvaluationResult)}}
	env, err := s.rollouts.EnvironmentOfTrace(ctx, callerFrom(ctx), t)
	if err != nil {
		return nil, err
	}
	if env != nil {
		e := &TraceEnv{ID: env.Registry.ID, Name: env.Registry.Name, CanViewSource: env.CanViewSource, RegistryType: env.Registry.RegistryType}
		if b := env.Build; b != nil {
			e.BuildID, e.BuildVersion = &b.ID, &b.Version
			if b.Digest != "" {
				e.BuildDigest = &b.Digest
			}
		}
		out.Body.Environment = e
	}
	a, err := s.rollouts.AgentOfTrace(ctx, &t.Trace)
	if err != nil {
		return nil, err
	}
	if a != nil {
		out.Body.Agent = &AgentBuild{BuildID: a.BuildID, Name: a.Name, Version: a.Version, Digest: a.Digest}
	}
	return out, nil
}
