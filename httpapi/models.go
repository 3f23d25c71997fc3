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

// Model is a catalog entry agents run on (spec: Resources › Model).
type Model struct {
	ID                uuid.UUID      `json:"id"`
	ModelName         string         `json:"model_name" doc:"The name clients resolve, e.g. oracle"`
	Name              string         `json:"name"`
	Provider          string         `json:"provider"`
	Adapter           string         `json:"adapter" enum:"oracle,idle,random,tamper,replay,openai,anthropic" doc:"Which adapter drives it (idle, random and tamper: built-in agents certification runs: no tool call, random ones, calls of the hidden setup and evaluate dispatchers; replay: a replay check's, answering with a recorded attempt's answers)"`
	SDKAgentType      string         `json:"sdk_agent_type"`
	CreatedAt         time.Time      `json:"created_at"`
	CanEdit           bool           `json:"can_edit"`
	CheckpointCount   int            `json:"checkpoint_count"`
	ContextWindow     int            `json:"context_window"`
	ForkOfModelID     *uuid.UUID     `json:"fork_of_model_id"`
	ForkOfModelName   *string        `json:"fork_of_model_name"`
	Hidden            bool           `json:"hidden"`
	InferenceCount    int            `json:"inference_count"`
	InputCostPerToken float64        `json:"input_cost_per_token"`
	RequestDefaults   map[string]any `json:"request_defaults"`
}

// modelViews are models as answers show them, with the caller's team's count of their calls,
// their checkpoints and the name of the model each is a fork of.
func (s *Server) modelViews(ctx context.Context, ms []models.LLMModel) ([]Model, error) {
	c := callerFrom(ctx)
	ids := make([]uuid.UUID, len(ms))
	var forks []uuid.UUID
	for i := range ms {
		ids[i] = ms[i].ID
		if ms[i].ForkOfModelID != nil {
			forks = append(forks, *ms[i].ForkOfModelID)
		}
	}
	calls, err := s.billing.InferenceCounts(ctx, c.TeamID, ids)
	if err != nil {
		return nil, err
	}
	cps, err := s.llms.CheckpointCounts(ctx, ids)
	if err != nil {
		return nil, err
	}
	names, err := s.llms.ModelNames(ctx, forks)
	if err != nil {
		return nil, err
	}
	out := make([]Model, len(ms))
	for i := range ms {
		m := &ms[i]
		out[i] = Model{ID: m.ID, ModelName: m.ModelName, Name: m.Name, Provider: m.Provider, Adapter: m.Adapter, SDKAgentType: m.SDKAgentType,
			CreatedAt: m.CreatedAt, CanEdit: m.TeamID != nil && *m.TeamID == c.TeamID, ContextWindow: m.ContextWindow,
			Hidden: m.Hidden, InputCostPerToken: m.InputCostPerToken, RequestDefaults: nonNilMap(m.RequestDefaults),
			InferenceCount: calls[m.ID], CheckpointCount: cps[m.ID], ForkOfModelID: m.ForkOfModelID}
		if m.ForkOfModelID != nil {
			if n, ok := names[*m.ForkOfModelID]; ok {
				out[i].ForkOfModelName = &n
			}
		}
	}
	return out, nil
}

type modelOutput struct{ Body Model }

// modelOutput answers with one model.
func (s *Server) modelOutput(ctx context.Context, m *models.LLMModel) (*modelOutput, error) {
	views, err := s.modelViews(ctx, []models.LLMModel{*m})
	if err != nil {
		return nil, err
	}
	return &modelOutput{Body: views[0]}, nil
}

type listModelsOutput struct{ Body Page[Model] }

func (s *Server) registerModels() {
	tags := []string{"Models"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-models", Method: http.MethodGet, Path: "/models", Tags: tags, Summary: "List models",
		Description: "The catalog entries the caller may run agents on, by name.", Errors: []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.listModels)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "resolve-model", Method: http.MethodGet, Path: "/models/resolve", Tags: tags, Summary: "Resolve a model name",
		Description: "Turns a model_name (or an id) into the catalog entry, so clients can launch with its id.", Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.resolveModel)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-model", Method: http.MethodGet, Path: "/models/{model_id}", Tags: tags, Summary: "Get a model",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.getModel)
	huma.Register(s.v2, ownerOnly(op(huma.Operation{
		OperationID: "update-model", Method: http.MethodPatch, Path: "/models/{model_id}", Tags: tags, Summary: "Change a model",
		Description: "Its display name, whether it is hidden from listings, and its request defaults. Only a team's own models " +
			"(can_edit) change; the platform's shared ones are read-only (403).",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession)), s.updateModel)
}

type updateModelInput struct {
	ModelID uuid.UUID `path:"model_id"`
	Body    struct {
		Name            *string        `json:"name,omitempty" minLength:"1" maxLength:"200"`
		Hidden          *bool          `json:"hidden,omitempty"`
		RequestDefaults map[string]any `json:"request_defaults,omitempty" maxProperties:"100" doc:"replaces the defaults merged into each request"`
	}
}

// Resolve needs something to change.
func (in *updateModelInput) Resolve(huma.Context) []error {
	if in.Body.Name == nil && in.Body.Hidden == nil && in.Body.RequestDefaults == nil {
		return []error{&huma.ErrorDetail{Location: "body", Message: "give name, hidden or request_defaults"}}
	}
	return nil
}

// updateModel serves PATCH /v2/models/{model_id}.
func (s *Server) updateModel(ctx context.Context, in *updateModelInput) (*modelOutput, error) {
	m, err := s.llms.UpdateModel(ctx, callerFrom(ctx), in.ModelID, llms.ModelUpdate{Name: in.Body.Name, Hidden: in.Body.Hidden, RequestDefaults: in.Body.RequestDefaults})
	if err != nil {
		return nil, storeError(err, "model")
	}
	return s.modelOutput(ctx, m)
}

type listModelsInput struct {
	Limit  int `query:"limit" minimum:"1" maximum:"500" default:"100"`
	Offset int `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// listModels serves GET /v2/models: list models.
func (s *Server) listModels(ctx context.Context, in *listModelsInput) (*listModelsOutput, error) {
	c := callerFrom(ctx)
	ms, total, err := s.llms.ListModels(ctx, c, in.Limit, in.Offset)
	if err != nil {
		return nil, err
	}
	items, err := s.modelViews(ctx, ms)
	if err != nil {
		return nil, err
	}
	return &listModelsOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

type resolveModelInput struct {
	Model string `query:"model" required:"true" minLength:"1" maxLength:"200" doc:"A model_name or an id"`
}

// resolveModel serves GET /v2/models/resolve: resolve a model name.
func (s *Server) resolveModel(ctx context.Context, in *resolveModelInput) (*modelOutput, error) {
	m, err := s.llms.ResolveModel(ctx, callerFrom(ctx), in.Model)
	if err != nil {
		return nil, storeError(err, "model "+in.Model)
	}
	return s.modelOutput(ctx, m)
}

type modelPath struct {
	ModelID uuid.UUID `path:"model_id"`
}

// getModel serves GET /v2/models/{model_id}: get a model.
func (s *Server) getModel(ctx context.Context, in *modelPath) (*modelOutput, error) {
	m, err := s.llms.GetModel(ctx, callerFrom(ctx), in.ModelID)
	if err != nil {
		return nil, storeError(err, "model")
	}
	return s.modelOutput(ctx, m)
}
