package activities

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// BenchmarkAgentPortModelCall is the latency Proctor adds to a brought agent's model call: the
// same chat completion (with a tool, answered at once by a scripted provider) made by the
// official OpenAI SDK straight to the provider and through an attempt's agent port (the key
// check, the step count, the gateway's relay with its spending check and usage row, reading the
// answer and appending the assistant event, on SQLite), alternately, b.N times each. It reports
// both medians and the added latency at p50 and p99.
func BenchmarkAgentPortModelCall(b *testing.B) {
	ctx := context.Background()
	s := storetest.Open(b, models.SQLite)
	e := newEngine(b, s, 2)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-up", //nolint:errcheck // the client may be gone
			"choices": []any{map[string]any{"index": 0, "finish_reason": "tool_calls", "message": map[string]any{"role": "assistant", "content": nil,
				"tool_calls": []any{map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "add", "arguments": `{"title":"x"}`}}}}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}})
	}))
	defer provider.Close()
	b.Setenv("PROCTOR_BENCH_OPENAI_KEY", "provider-key")
	m := &models.LLMModel{ModelName: "gpt-up", Name: "GPT", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
		BaseURL: provider.URL + "/v1", APIKeyEnv: "PROCTOR_BENCH_OPENAI_KEY", InputCostPerToken: 1e-6, OutputCostPerToken: 3e-6}
	if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
		b.Fatal(err)
	}
	port, root, id := portFor(b, e, s, m, nil)

	params := openai.ChatCompletionNewParams{Model: m.ModelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("add one")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "add"})}}
	direct := openai.NewClient(option.WithBaseURL(provider.URL+"/v1/"), option.WithAPIKey("provider-key"), option.WithMaxRetries(0))
	viaPort := openai.NewClient(option.WithBaseURL(root+"/openai/"), option.WithAPIKey(port.Key()), option.WithMaxRetries(0))
	call := func(c openai.Client) func() error {
		return func() error { _, err := c.Chat.Completions.New(ctx, params); return err }
	}
	testenv.MeasureAddedLatency(b, "port", call(direct), call(viaPort))
	if evs, err := rollouts.Of(s).TraceEvents(ctx, id, -1, false); err != nil || len(evs) != b.N+1 {
		b.Fatalf("%d events recorded for %d calls through the port: %v", len(evs), b.N+1, err)
	}
}

// BenchmarkModelStepTokens is what capturing a training policy's tokens costs a model call of the
// built-in loop: a ModelStep (the gateway's call, its usage row, the assistant event, on SQLite)
// of an ordinary model against the same step of a training policy, whose request asks for
// logprobs and token ids and whose answer's token arrays (a 2,000-token prompt, 200 sampled
// tokens with their logprobs, as vLLM returns them) are read and kept beside the event,
// alternately, b.N times each. It reports both medians and the added latency at p50 and p99.
func BenchmarkModelStepTokens(b *testing.B) {
	ctx := context.Background()
	s := storetest.Open(b, models.SQLite)
	e := newEngine(b, s, 2)
	ids := func(n, from int) []int {
		out := make([]int, n)
		for i := range out {
			out[i] = from + i
		}
		return out
	}
	logprobs := make([]map[string]any, 200)
	for i := range logprobs {
		logprobs[i] = map[string]any{"token": "token_id:" + strconv.Itoa(5000+i), "logprob": -0.01 * float64(i), "bytes": []int{104}}
	}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ReturnTokenIDs bool `json:"return_token_ids"`
		}
		json.NewDecoder(r.Body).Decode(&req) //nolint:errcheck // a benchmark's request
		choice := map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": "done"}}
		answer := map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "policy", "choices": []any{choice},
			"usage": map[string]any{"prompt_tokens": 2000, "completion_tokens": 200, "total_tokens": 2200}}
		if req.ReturnTokenIDs {
			answer["prompt_token_ids"] = ids(2000, 100)
			choice["token_ids"], choice["logprobs"] = ids(200, 5000), map[string]any{"content": logprobs}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(answer) //nolint:errcheck // the client may be gone
	}))
	defer provider.Close()
	b.Setenv("PROCTOR_BENCH_OPENAI_KEY", "provider-key")
	step := func(name string, policy bool, trace *uuid.UUID) func() error {
		m := &models.LLMModel{ModelName: name, Name: name, Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI, BaseURL: provider.URL + "/v1",
			APIKeyEnv: "PROCTOR_BENCH_OPENAI_KEY", TrainingPolicy: policy}
		if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
			b.Fatal(err)
		}
		_, traces, err := rollouts.Of(s).LaunchJob(ctx, e.caller, rollouts.Launch{Name: name, MaxSteps: 10, GroupSize: 1, MaxConcurrent: 1, Kind: models.JobSingle,
			Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: e.version, ModelID: m.ID, MaxSteps: 10}}})
		if err != nil {
			b.Fatal(err)
		}
		if trace != nil {
			*trace = traces[0].ID
		}
		n := 0
		return func() error {
			n++
			_, err := e.acts.ModelStep(ctx, ModelStepInput{TraceID: traces[0].ID, Attempt: 1, Step: n})
			return err
		}
	}
	var policyTrace uuid.UUID
	plain, policy := step("plain", false, nil), step("policy", true, &policyTrace)
	testenv.MeasureAddedLatency(b, "policy", plain, policy)
	if kept, err := s.DB.NewSelect().Model((*models.ModelCallTokens)(nil)).Where("trace_id = ?", policyTrace).Count(ctx); err != nil || int(kept) != b.N+1 {
		b.Fatalf("%d calls' tokens kept for %d calls of the policy: %v", kept, b.N+1, err)
	}
}
