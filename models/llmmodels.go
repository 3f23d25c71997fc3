package models

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// LLMModel is a catalog entry an agent runs on: which adapter drives it and where it is served.
// Provider keys are never stored: APIKeyEnv names the environment variable that holds the key on
// the workers.
type LLMModel struct {
	bun.BaseModel     `bun:"table:llm_models,alias:m"`
	ID                uuid.UUID  `bun:"id,pk,type:uuid"`
	TeamID            *uuid.UUID `bun:"team_id,type:uuid"`
	ModelName         string     `bun:"model_name"`
	Name              string     `bun:"name"`
	Provider          string     `bun:"provider"`
	Adapter           string     `bun:"adapter"`
	SDKAgentType      string     `bun:"sdk_agent_type"`
	BaseURL           string     `bun:"base_url"`
	APIKeyEnv         string     `bun:"api_key_env"`
	ContextWindow     int        `bun:"context_window"`
	Hidden            bool       `bun:"hidden"`
	InputCostPerToken float64    `bun:"input_cost_per_token"`
	// OutputCostPerToken prices completion tokens (the spec shows input_cost_per_token only).
	OutputCostPerToken float64        `bun:"output_cost_per_token"`
	RequestDefaults    map[string]any `bun:"request_defaults"`
	// Trainable models can be forked; a fork is trainable and takes checkpoints, and its head
	// checkpoint is what the gateway calls.
	Trainable bool `bun:"trainable"`
	// TrainingPolicy models are asked for the tokens of each call (token ids and logprobs),
	// kept beside the trace for export; a fork of one is one too.
	TrainingPolicy   bool       `bun:"training_policy"`
	ForkOfModelID    *uuid.UUID `bun:"fork_of_model_id,type:uuid"`
	HeadCheckpointID *uuid.UUID `bun:"head_checkpoint_id,type:uuid"`
	CreatedAt        time.Time  `bun:"created_at"`
	UpdatedAt        time.Time  `bun:"updated_at"`
}

// Model adapters.
const (
	AdapterOracle    = "oracle"
	AdapterOpenAI    = "openai"
	AdapterAnthropic = "anthropic"
	// AdapterIdle is an agent that makes no tool call and says it is done (certification's
	// check that a task cannot be passed without work).
	AdapterIdle = "idle"
	// AdapterRandom is an agent that calls tools with random arguments their schemas allow
	// (certification's check that a task rewards work, not activity).
	AdapterRandom = "random"
	// AdapterTamper is an agent that calls the hidden setup and evaluate dispatchers
	// (certification's check that an agent cannot reach them).
	AdapterTamper = "tamper"
	// AdapterReplay answers each model call of an attempt with the answer recorded at that step
	// by the attempt it replays (a replay check's regression replay of a new build).
	AdapterReplay = "replay"
)

// builtinAgents are the platform's own agents, by adapter: they call no provider and answer no
// completions. name names one in a sentence, does says what it does instead.
var builtinAgents = map[string]struct{ name, does string }{
	AdapterOracle: {"oracle", "the oracle replays tasks' validation calls"},
	AdapterIdle:   {"idle agent", "the idle model makes no tool call"},
	AdapterRandom: {"random agent", "the random model calls tools with random arguments"},
	AdapterTamper: {"tamper probe", "the tamper probe calls the hidden setup and evaluate dispatchers"},
	AdapterReplay: {"replay model", "the replay model answers with a recorded attempt's answers"},
}

// Builtin reports whether m is one of the platform's own agents (builtinAgents).
func (m *LLMModel) Builtin() bool {
	_, ok := builtinAgents[m.Adapter]
	return ok
}

// BuiltinName names a Builtin model in a sentence: "oracle", "idle agent".
func (m *LLMModel) BuiltinName() string { return builtinAgents[m.Adapter].name }

// BuiltinDoes says what a Builtin model does instead of answering completions.
func (m *LLMModel) BuiltinDoes() string { return builtinAgents[m.Adapter].does }

// UpsertModel adds a catalog entry or updates the one of the same owner and model_name (seeding
// is idempotent). Names are unique per owner: among platform models (no team), and within each
// team; a team's model may share a platform model's name, and ResolveModel prefers the team's.
func (s *Store) UpsertModel(ctx context.Context, m *LLMModel) error {
	if m.ID == uuid.Nil {
		m.ID = uuid.New()
	}
	if m.RequestDefaults == nil {
		m.RequestDefaults = map[string]any{}
	}
	m.CreatedAt, m.UpdatedAt = Now(), Now()
	conflict := "CONFLICT (model_name) WHERE team_id IS NULL DO UPDATE"
	if m.TeamID != nil {
		conflict = "CONFLICT (team_id, model_name) DO UPDATE"
	}
	_, err := s.DB.NewInsert().Model(m).On(conflict).
		Set("name = EXCLUDED.name, provider = EXCLUDED.provider, adapter = EXCLUDED.adapter, base_url = EXCLUDED.base_url, api_key_env = EXCLUDED.api_key_env, context_window = EXCLUDED.context_window, input_cost_per_token = EXCLUDED.input_cost_per_token, output_cost_per_token = EXCLUDED.output_cost_per_token, trainable = EXCLUDED.trainable, training_policy = EXCLUDED.training_policy, updated_at = EXCLUDED.updated_at").
		Returning("id").Exec(ctx)
	if err != nil {
		return fmt.Errorf("upsert model %s: %w", m.ModelName, err)
	}
	return nil
}

func visibleModels(q *bun.SelectQuery, c *Caller) *bun.SelectQuery {
	if c == nil {
		return q.Where("m.team_id IS NULL")
	}
	return q.Where("m.team_id IS NULL OR m.team_id = ?", c.TeamID)
}

// ListModels pages the catalog entries the caller may use (shared ones and its team's), hidden
// ones excluded, by name.
func (s *Store) ListModels(ctx context.Context, c *Caller, limit, offset int) ([]LLMModel, int, error) {
	var ms []LLMModel
	total, err := visibleModels(s.DB.NewSelect().Model(&ms), c).Where("NOT m.hidden").
		OrderExpr("m.model_name ASC").Limit(int64(limit)).Offset(int64(offset)).ScanAndCount(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("list models: %w", err)
	}
	return ms, int(total), nil
}

// GetModel reads a catalog entry the caller may use.
func (s *Store) GetModel(ctx context.Context, c *Caller, id uuid.UUID) (*LLMModel, error) {
	m := new(LLMModel)
	if err := visibleModels(s.DB.NewSelect().Model(m), c).Where("m.id = ?", id).Scan(ctx); err != nil {
		return nil, NotFound(err, "get model")
	}
	return m, nil
}

// ResolveModel turns a model_name (or an id) into the catalog entry: the caller's team's model of
// that name when it has one, else the platform's (names are unique per owner, so at most one each).
func (s *Store) ResolveModel(ctx context.Context, c *Caller, nameOrID string) (*LLMModel, error) {
	if id, err := uuid.Parse(nameOrID); err == nil {
		return s.GetModel(ctx, c, id)
	}
	m := new(LLMModel)
	if err := visibleModels(s.DB.NewSelect().Model(m), c).Where("m.model_name = ?", nameOrID).
		OrderExpr("CASE WHEN m.team_id IS NULL THEN 1 ELSE 0 END").Limit(1).Scan(ctx); err != nil {
		return nil, NotFound(err, fmt.Sprintf("model %q", nameOrID))
	}
	return m, nil
}

// ModelUpdate is what PATCH /v2/models/{id} may change; nil fields stay.
type ModelUpdate struct {
	Name            *string
	Hidden          *bool
	RequestDefaults map[string]any
}

// UpdateModel changes a model of the caller's team; shared (platform) models are read-only.
func (s *Store) UpdateModel(ctx context.Context, c *Caller, id uuid.UUID, u ModelUpdate) (*LLMModel, error) {
	m, err := s.GetModel(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if m.TeamID == nil || *m.TeamID != c.TeamID {
		return nil, fmt.Errorf("model %s is shared by the platform and read-only: %w", m.ModelName, ErrForbidden)
	}
	if u.Name != nil {
		m.Name = *u.Name
	}
	if u.Hidden != nil {
		m.Hidden = *u.Hidden
	}
	if u.RequestDefaults != nil {
		m.RequestDefaults = u.RequestDefaults
	}
	m.UpdatedAt = Now()
	if _, err := s.DB.NewUpdate().Model(m).Column("name", "hidden", "request_defaults", "updated_at").WherePK().Exec(ctx); err != nil {
		return nil, fmt.Errorf("update model: %w", err)
	}
	return m, nil
}
