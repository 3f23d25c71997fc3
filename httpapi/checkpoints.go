package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
)

func (s *Server) registerCheckpoints() {
	tags := []string{"Models"}
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "fork-model", Method: http.MethodPost, Path: "/models/fork", Tags: tags, Summary: "Fork a trainable model",
		Description: "A trainable copy of a trainable base, owned by the caller's team, that takes checkpoints.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession)), s.forkModel)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-checkpoints", Method: http.MethodGet, Path: "/models/{model_id}/checkpoints", Tags: tags, Summary: "A model's checkpoints",
		Description: "Newest first; is_active marks the head, which inference calls. jobs and mean_reward are the caller's team's " +
			"jobs whose attempts the checkpoint answered.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listCheckpoints)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "register-checkpoint", Method: http.MethodPost, Path: "/models/{model_id}/checkpoints", Tags: tags,
		Summary: "Register a checkpoint (Proctor extension)",
		Description: "Not in the spec: how a trainer that runs outside the platform reports a checkpoint of a fork, with the upstream " +
			"model name that serves it and its training figures. PUT …/head then points inference at it.",
		DefaultStatus: http.StatusCreated, Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusConflict},
	}, authKeyOrSession)), s.registerCheckpoint)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "set-model-head", Method: http.MethodPut, Path: "/models/{model_id}/head", Tags: tags, Summary: "Point inference at a checkpoint",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.setHead)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-checkpoint-traces", Method: http.MethodGet, Path: "/models/{model_id}/checkpoints/{checkpoint_id}/traces", Tags: tags,
		Summary: "Attempts a checkpoint answered", Description: "The caller's team's, newest first.", Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listCheckpointTraces)
}

type forkInput struct {
	Body struct {
		SourceModelID uuid.UUID `json:"source_model_id"`
		Name          string    `json:"name" minLength:"1" maxLength:"200" doc:"The fork's name, as given; its model_name is the name with what a model name cannot hold (spaces, punctuation other than . _ : / -) turned into dashes"`
	}
}

// forkModel serves POST /v2/models/fork.
func (s *Server) forkModel(ctx context.Context, in *forkInput) (*modelOutput, error) {
	m, err := s.llms.ForkModel(ctx, callerFrom(ctx), in.Body.SourceModelID, in.Body.Name)
	if err != nil {
		return nil, storeError(err, "model")
	}
	return s.modelOutput(ctx, m)
}

// CheckpointOut is a checkpoint as answers show it.
type CheckpointOut struct {
	ID             uuid.UUID      `json:"id"`
	CreatedAt      time.Time      `json:"created_at"`
	CheckpointName string         `json:"checkpoint_name" doc:"the upstream model name that serves it"`
	Name           string         `json:"name"`
	IsActive       bool           `json:"is_active"`
	Jobs           []JobName      `json:"jobs" nullable:"false"`
	LearningRate   *float64       `json:"learning_rate"`
	LossFn         string         `json:"loss_fn"`
	MeanReward     *float64       `json:"mean_reward"`
	Metrics        map[string]any `json:"metrics"`
	NumDatums      int            `json:"num_datums"`
	NumTokens      int64          `json:"num_tokens"`
}

// JobName names a job.
type JobName struct {
	ID   uuid.UUID `json:"id"`
	Name string    `json:"name"`
}

type listCheckpointsOutput struct {
	Body []CheckpointOut `nullable:"false"`
}

func checkpointOut(r llms.CheckpointRow) CheckpointOut {
	out := CheckpointOut{ID: r.ID, CreatedAt: r.CreatedAt, CheckpointName: r.UpstreamModel, Name: r.Name, IsActive: r.IsActive, Jobs: []JobName{},
		LearningRate: r.LearningRate, LossFn: r.LossFn, MeanReward: r.MeanReward, Metrics: nonNilMap(r.Metrics), NumDatums: r.NumDatums, NumTokens: r.NumTokens}
	for _, j := range r.Jobs {
		out.Jobs = append(out.Jobs, JobName{ID: j.ID, Name: j.Name})
	}
	return out
}

// listCheckpoints serves GET /v2/models/{model_id}/checkpoints.
func (s *Server) listCheckpoints(ctx context.Context, in *modelPath) (*listCheckpointsOutput, error) {
	rows, err := s.llms.ListCheckpoints(ctx, callerFrom(ctx), in.ModelID)
	if err != nil {
		return nil, storeError(err, "model")
	}
	out := &listCheckpointsOutput{Body: make([]CheckpointOut, len(rows))}
	for i, r := range rows {
		out.Body[i] = checkpointOut(r)
	}
	return out, nil
}

type registerCheckpointInput struct {
	ModelID uuid.UUID `path:"model_id"`
	Body    struct {
		Name          string         `json:"name" minLength:"1" maxLength:"200"`
		UpstreamModel string         `json:"upstream_model" minLength:"1" maxLength:"500" doc:"the model name the fork's provider serves this checkpoint under"`
		LearningRate  *float64       `json:"learning_rate,omitempty" minimum:"0"`
		LossFn        string         `json:"loss_fn,omitempty" maxLength:"200"`
		Metrics       map[string]any `json:"metrics,omitempty" maxProperties:"100"`
		NumDatums     int            `json:"num_datums,omitempty" minimum:"0"`
		NumTokens     int64          `json:"num_tokens,omitempty" minimum:"0"`
	}
}

type checkpointOutput struct{ Body CheckpointOut }

// registerCheckpoint serves POST /v2/models/{model_id}/checkpoints (an extension).
func (s *Server) registerCheckpoint(ctx context.Context, in *registerCheckpointInput) (*checkpointOutput, error) {
	b := in.Body
	cp := &models.Checkpoint{Name: b.Name, UpstreamModel: b.UpstreamModel, LearningRate: b.LearningRate, LossFn: b.LossFn, Metrics: b.Metrics,
		NumDatums: b.NumDatums, NumTokens: b.NumTokens}
	if err := s.llms.AddCheckpoint(ctx, callerFrom(ctx), in.ModelID, cp); err != nil {
		return nil, storeError(err, "model")
	}
	return &checkpointOutput{Body: checkpointOut(llms.CheckpointRow{Checkpoint: *cp})}, nil
}

type setHeadInput struct {
	ModelID uuid.UUID `path:"model_id"`
	Body    struct {
		CheckpointID uuid.UUID `json:"checkpoint_id"`
	}
}

// setHead serves PUT /v2/models/{model_id}/head.
func (s *Server) setHead(ctx context.Context, in *setHeadInput) (*modelOutput, error) {
	m, err := s.llms.SetHead(ctx, callerFrom(ctx), in.ModelID, in.Body.CheckpointID)
	if err != nil {
		return nil, storeError(err, "model")
	}
	return s.modelOutput(ctx, m)
}

type checkpointTracesInput struct {
	ModelID      uuid.UUID `path:"model_id"`
	CheckpointID uuid.UUID `path:"checkpoint_id"`
	Limit        int       `query:"limit" minimum:"1" maximum:"1000" default:"200"`
}

// CheckpointTraceOut is an attempt a checkpoint answered.
type CheckpointTraceOut struct {
	TraceID   uuid.UUID `json:"trace_id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	Reward    *float64  `json:"reward"`
}

type checkpointTracesOutput struct {
	Body []CheckpointTraceOut `nullable:"false"`
}

// listCheckpointTraces serves GET /v2/models/{model_id}/checkpoints/{checkpoint_id}/traces.
func (s *Server) listCheckpointTraces(ctx context.Context, in *checkpointTracesInput) (*checkpointTracesOutput, error) {
	rows, err := s.llms.CheckpointTraces(ctx, callerFrom(ctx), in.ModelID, in.CheckpointID, in.Limit)
	if err != nil {
		return nil, storeError(err, "checkpoint")
	}
	out := &checkpointTracesOutput{Body: make([]CheckpointTraceOut, len(rows))}
	for i, r := range rows {
		out.Body[i] = CheckpointTraceOut{TraceID: r.TraceID, Status: r.Status, CreatedAt: r.CreatedAt, Reward: r.Reward}
	}
	return out, nil
}
