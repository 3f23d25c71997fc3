// Package inference is the inference gateway: every model call of the platform (an agent's model
// step, POST /v2/completions) goes through it. For each call it picks the credential (the
// caller's own key for the model's provider, else the platform's), calls the provider through
// the agent adapters, and writes one row of the call's tokens, cost and duration.
package inference

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/metrics"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/credentials"
	"github.com/proctorhq/proctor/models/llms"
)

// Factory builds the adapter for a catalog model; apiKey, when set, replaces the platform's key.
type Factory func(m *models.LLMModel, validation []models.ValidationCall, apiKey string) (agent.Model, error)

// DefaultModels builds models from the catalog: the oracle (which replays validation),
// OpenAI-compatible servers and Anthropic, with apiKey or else the key in the environment
// variable the entry names.
func DefaultModels(m *models.LLMModel, validation []models.ValidationCall, apiKey string) (agent.Model, error) {
	key := cmp.Or(apiKey, os.Getenv(m.APIKeyEnv))
	switch m.Adapter {
	case models.AdapterIdle:
		return agent.NewIdle(), nil
	case models.AdapterRandom:
		return agent.NewRandom(1), nil
	case models.AdapterTamper:
		return agent.NewTamper(), nil
	case models.AdapterReplay:
		return nil, fmt.Errorf("model %s answers only a replay check's attempts, from the attempt each replays", m.ModelName)
	case models.AdapterOracle:
		calls := make([]agent.Call, len(validation))
		for i, v := range validation {
			args := v.Arguments
			if args == nil {
				args = map[string]any{}
			}
			calls[i] = agent.Call{Name: v.Name, Arguments: args}
		}
		return agent.NewOracle(calls), nil
	case models.AdapterOpenAI:
		return agent.NewOpenAI(agent.OpenAIConfig{BaseURL: m.BaseURL, APIKey: key, Model: m.ModelName, CaptureTokens: m.TrainingPolicy})
	case models.AdapterAnthropic:
		return agent.NewAnthropic(agent.AnthropicConfig{BaseURL: m.BaseURL, APIKey: key, Model: m.ModelName})
	default:
		return nil, fmt.Errorf("model %s: unknown adapter %q", m.ModelName, m.Adapter)
	}
}

// Gateway makes model calls and records them.
type Gateway struct {
	Store *models.Store
	// Keys opens members' own provider keys (nil: only the platform's keys are used).
	Keys   credentials.Sealer
	Models Factory
	Logger *slog.Logger
	// Metrics times and counts the recorded calls (nil: none).
	Metrics *metrics.Metrics
}

// Call says who makes a model call and for what.
type Call struct {
	Model  *models.LLMModel
	TeamID uuid.UUID
	// UserID is the member the call is made for (an attempt's launcher, a completion's caller).
	UserID   *uuid.UUID
	APIKeyID *uuid.UUID
	TraceID  *uuid.UUID
	Route    string
	// Validation feeds the oracle (which replays a task's validation calls).
	Validation []models.ValidationCall
}

// Client returns the model to call for c: with the member's own key for the model's provider
// when they have one bound (credentials.Store.ProviderKey), else the platform's. Each Step of the
// returned model writes one inference row. cred says which own key was used (nil: the platform's).
func (g *Gateway) Client(ctx context.Context, c Call) (m agent.Model, cred *credentials.ProviderCredential, err error) {
	up, err := g.upstream(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	served := up.model
	if served.TrainingPolicy && c.Route != billing.RouteAgent {
		// Tokens are kept for an attempt's calls only: another route's would be asked for them
		// and thrown away.
		plain := *served
		plain.TrainingPolicy = false
		served = &plain
	}
	inner, err := g.Models(served, c.Validation, up.ownKey)
	if err != nil {
		return nil, nil, err
	}
	if c.Model.Builtin() {
		return inner, nil, nil // the oracle replays a task, the idle agent does nothing: no inference
	}
	return &metered{g: g, call: c, up: up, inner: inner}, up.cred, nil
}

// upstream is where a call of a catalog model goes: the model as its provider serves it, and the
// member's own key for that provider when they have one.
type upstream struct {
	// model is c.Model under the name its provider serves: a fork's head checkpoint's, else its
	// base's.
	model  *models.LLMModel
	ownKey string
	cred   *credentials.ProviderCredential
	head   *models.Checkpoint
}

// key is the key the call is made with: the member's own, else the platform's (the
// environment variable the catalog entry names).
func (u *upstream) key() string { return cmp.Or(u.ownKey, os.Getenv(u.model.APIKeyEnv)) }

func (g *Gateway) upstream(ctx context.Context, c Call) (*upstream, error) {
	up := &upstream{model: c.Model}
	if !c.Model.Builtin() && c.UserID != nil &&
		(c.Model.Provider == models.AdapterOpenAI || c.Model.Provider == models.AdapterAnthropic) {
		cred, err := credentials.Of(g.Store).ProviderKey(ctx, g.Keys, c.TeamID, *c.UserID, c.Model.Provider)
		if err != nil {
			return nil, fmt.Errorf("the %s key of the member: %w", c.Model.Provider, err)
		}
		if cred != nil {
			up.cred, up.ownKey = cred, cred.Key
		}
	}
	// A fork with a head checkpoint is served upstream under the checkpoint's name.
	head, err := llms.Of(g.Store).HeadCheckpoint(ctx, c.Model)
	if err != nil {
		return nil, err
	}
	up.head = head
	switch {
	case head != nil:
		m := *c.Model
		m.ModelName = head.UpstreamModel
		up.model = &m
	case c.Model.ForkOfModelID != nil:
		// A fork without a checkpoint yet is its base.
		names, err := llms.Of(g.Store).ModelNames(ctx, []uuid.UUID{*c.Model.ForkOfModelID})
		if err != nil {
			return nil, err
		}
		if base, ok := names[*c.Model.ForkOfModelID]; ok {
			m := *c.Model
			m.ModelName = base
			up.model = &m
		}
	}
	return up, nil
}

// metered records each call of inner.
type metered struct {
	g     *Gateway
	call  Call
	up    *upstream
	inner agent.Model
}

func (m *metered) Step(ctx context.Context, req agent.StepRequest) (*agent.StepResult, error) {
	begin := time.Now()
	res, err := m.inner.Step(ctx, req)
	var usage agent.Usage
	if err == nil {
		usage = res.Usage
	}
	m.g.record(ctx, m.call, m.up, begin, usage, false, ErrorCode(err))
	return res, err
}

// record writes the inference row of one call made for c through up, which began at begin and
// used usage; errorCode is "" for a call that succeeded.
func (g *Gateway) record(ctx context.Context, c Call, up *upstream, begin time.Time, usage agent.Usage, streaming bool, errorCode string) {
	took := time.Since(begin)
	row := &models.InferenceLog{TeamID: c.TeamID, ModelID: c.Model.ID, Route: c.Route, Status: "ok",
		DurationMS: int(took.Milliseconds()), TraceID: c.TraceID, UserID: c.UserID, APIKeyID: c.APIKeyID, Streaming: streaming}
	if up.cred != nil {
		row.BYOK, row.ByokCredentialID = up.cred.Source != "", up.cred.ByokID
	}
	if up.head != nil {
		row.CheckpointID = &up.head.ID
	}
	if errorCode != "" {
		row.Status, row.ErrorCode = "error", errorCode
	}
	// A failed call's usage is zero, except a relayed answer the client left early, whose
	// tokens the provider bills all the same.
	row.PromptTokens, row.CompletionTokens = usage.InputTokens, usage.OutputTokens
	row.TotalTokens = row.PromptTokens + row.CompletionTokens
	row.Cost = float64(row.PromptTokens)*c.Model.InputCostPerToken + float64(row.CompletionTokens)*c.Model.OutputCostPerToken
	g.Metrics.ModelCall(c.Model.ModelName, took, errorCode == "", row.PromptTokens, row.CompletionTokens, row.Cost)
	// The call happened whether or not its row can be written: a failed write is logged, and
	// the call's answer is not lost over it.
	if werr := billing.Of(g.Store).RecordInference(context.WithoutCancel(ctx), row); werr != nil && g.Logger != nil {
		g.Logger.Warn("inference: record a call", "model", c.Model.ModelName, "error", werr)
	}
}

// ErrorCode is a failed call's code in its row: the provider's HTTP status ("http_429"),
// "unreachable", "bad_response", or "error"; "" for no error.
func ErrorCode(err error) string {
	var api *agent.APIError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &api) && api.Status != 0:
		return fmt.Sprintf("http_%d", api.Status)
	case errors.As(err, &api):
		return "unreachable"
	case errors.Is(err, agent.ErrBadResponse):
		return "bad_response"
	default:
		return "error"
	}
}
