package models

import (
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// Checkpoint is one trained state of a fork, served upstream under UpstreamModel.
type Checkpoint struct {
	bun.BaseModel `bun:"table:model_checkpoints,alias:ck"`
	ID            uuid.UUID      `bun:"id,pk,type:uuid"`
	ModelID       uuid.UUID      `bun:"model_id,type:uuid"`
	Name          string         `bun:"name"`
	UpstreamModel string         `bun:"upstream_model"`
	LearningRate  *float64       `bun:"learning_rate"`
	LossFn        string         `bun:"loss_fn"`
	Metrics       map[string]any `bun:"metrics"`
	NumDatums     int            `bun:"num_datums"`
	NumTokens     int64          `bun:"num_tokens"`
	CreatedAt     time.Time      `bun:"created_at"`
}

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

// ModelCallTokens is what the upstream of a training policy (LLMModel.TrainingPolicy) returned of
// one model call's tokens, kept beside the trace, out of the event stream and workflow history;
// the assistant event of the call names it (AssistantEventData.TokensRef is CallID). Each field
// holds the JSON text of the upstream's own value, verbatim (a text column, which nothing
// re-encodes), or is empty where it returned none.
type ModelCallTokens struct {
	bun.BaseModel      `bun:"table:model_call_tokens"`
	TraceID            uuid.UUID `bun:"trace_id,pk,type:uuid"`
	CallID             uuid.UUID `bun:"call_id,pk,type:uuid"`
	PromptTokenIDs     string    `bun:"prompt_token_ids,nullzero"`
	CompletionTokenIDs string    `bun:"completion_token_ids,nullzero"`
	Logprobs           string    `bun:"logprobs,nullzero"`
	// Sampling is the sampling parameters the request carried, as a JSON object.
	Sampling  string    `bun:"sampling"`
	CreatedAt time.Time `bun:"created_at"`
}
