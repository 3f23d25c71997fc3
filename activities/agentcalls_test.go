package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/proctorhq/proctor/internal/agentport"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/rollouts"
)

// portFor opens an agent port for a fresh attempt (of a run_list job with the given ceiling) on
// model m, as RunAgent does, and returns the port, its root URL and the trace.
func portFor(t testing.TB, e *engine, s *models.Store, m *models.LLMModel, ceiling *float64) (*agentport.Port, string, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	job, traces, err := rollouts.Of(s).LaunchJob(ctx, e.caller, rollouts.Launch{Name: "agent", MaxSteps: 10, GroupSize: 1, MaxConcurrent: 1, Kind: models.JobBatch,
		MaxCostUSD: ceiling, Traces: []rollouts.LaunchTrace{{TraceID: uuid.New(), TaskVersionID: e.version, ModelID: m.ID, MaxSteps: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rollouts.Of(s).SetJobStatus(ctx, job.ID, models.JobRunning); err != nil {
		t.Fatal(err)
	}
	id := traces[0].ID
	r, err := e.acts.load(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	rec := &agentRecorder{a: e.acts, try: TryInput{TraceID: id, Attempt: 1}, r: r, gw: e.acts.gateway()}
	port, root, err := agentport.Start(agentport.Config{Models: []string{m.ModelName}, Handler: rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { port.Close() })
	return port, root, id
}

// A brought agent that streams its call to a training policy keeps the call's tokens as a
// whole answer would: the prompt's token ids of the first chunk, and the choice's token ids and
// logprobs of every chunk put together in order, each value's bytes as the upstream wrote them.
func TestABroughtAgentsStreamedCallKeepsItsTokens(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 1)
		asked := make(chan string, 1)
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var req map[string]json.RawMessage
			json.NewDecoder(r.Body).Decode(&req) //nolint:errcheck // checked below
			asked <- fmt.Sprintf("stream=%s logprobs=%s return_token_ids=%s", req["stream"], req["logprobs"], req["return_token_ids"])
			w.Header().Set("Content-Type", "text/event-stream")
			for _, chunk := range []string{
				`{"id":"c","object":"chat.completion.chunk","created":0,"model":"policy","prompt_token_ids": [151644, 8948,  198],"choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"token_ids":[ 9707 ],"logprobs":{"content":[{"token":"Hel","logprob":-1.2e-05,"bytes":[72,101,108]}]},"finish_reason":null}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":0,"model":"policy","choices":[{"index":0,"delta":{"content":"lo"},"token_ids":[385, 151645],"logprobs":{"content":[{"token":"lo","logprob":-0.0,"bytes":[108,111]}, {"token":"<|im_end|>","logprob":-3.5,"bytes":[]}]},"finish_reason":"stop"}]}`,
				`{"id":"c","object":"chat.completion.chunk","created":0,"model":"policy","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`,
				`[DONE]`,
			} {
				fmt.Fprintf(w, "data: %s\n\n", chunk)
			}
		}))
		defer provider.Close()
		t.Setenv("PROCTOR_TEST_POLICY_KEY", "provider-key")
		m := &models.LLMModel{ModelName: "policy", Name: "Policy", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
			BaseURL: provider.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_POLICY_KEY", TrainingPolicy: true}
		if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
			t.Fatal(err)
		}
		port, root, id := portFor(t, e, s, m, nil)
		client := openai.NewClient(option.WithBaseURL(root+"/openai/"), option.WithAPIKey(port.Key()), option.WithMaxRetries(0))
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: m.ModelName,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("say hello")}})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "Hello" {
			t.Fatalf("the streamed answer through the port: %+v, %v", acc.Choices, err)
		}
		if got := <-asked; got != "stream=true logprobs=true return_token_ids=true" {
			t.Errorf("the policy was asked %s", got)
		}
		// The answer is recorded once it was relayed whole: wait for it.
		var evs []models.TraceEvent
		testenv.Wait(t, "the assistant event", testenv.StallWindow, func() (bool, string) {
			var err error
			evs, err = rollouts.Of(s).TraceEvents(ctx, id, -1, false)
			return err == nil && len(evs) > 0, fmt.Sprint(len(evs), err)
		}, nil)
		if len(evs) != 1 || evs[0].Kind != models.EventAssistant {
			t.Fatalf("events %+v: want the assistant's", evs)
		}
		var data models.AssistantEventData
		if err := json.Unmarshal(evs[0].Data, &data); err != nil || data.TokensRef == nil || data.Message.Content != "Hello" {
			t.Fatalf("the assistant event: %s, %v", evs[0].Data, err)
		}
		kept, err := llms.Of(s).ModelCallTokensOf(ctx, id, []uuid.UUID{*data.TokensRef})
		if err != nil {
			t.Fatal(err)
		}
		got := kept[*data.TokensRef]
		want := models.ModelCallTokens{PromptTokenIDs: "[151644, 8948,  198]", CompletionTokenIDs: "[9707,385,151645]",
			Logprobs: `{"content":[{"token":"Hel","logprob":-1.2e-05,"bytes":[72,101,108]},{"token":"lo","logprob":-0.0,"bytes":[108,111]},{"token":"<|im_end|>","logprob":-3.5,"bytes":[]}]}`}
		if got.PromptTokenIDs != want.PromptTokenIDs || got.CompletionTokenIDs != want.CompletionTokenIDs || got.Logprobs != want.Logprobs {
			t.Errorf("kept\n  %s %s %s\nwant\n  %s %s %s", got.PromptTokenIDs, got.CompletionTokenIDs, got.Logprobs, want.PromptTokenIDs, want.CompletionTokenIDs, want.Logprobs)
		}
		if !strings.Contains(got.Sampling, `"logprobs":true`) || strings.Contains(got.Sampling, "stream") {
			t.Errorf("sampling kept: %s", got.Sampling)
		}
	})
}

// A brought agent's model call past its job's ceiling is never made: the agent is answered 402
// budget_exceeded (which its SDK does not retry), its port stops (RunAgent then ends the attempt
// with stop reason budget), and the upstream is not asked.
func TestABroughtAgentsCallPastItsJobsCeilingStopsIt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 1)
		var calls atomic.Int64
		provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"c","object":"chat.completion","created":0,"model":"priced","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}}`)
		}))
		defer provider.Close()
		t.Setenv("PROCTOR_TEST_PRICED_KEY", "provider-key")
		// $0.01 a call.
		m := &models.LLMModel{ModelName: "priced", Name: "Priced", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
			BaseURL: provider.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_PRICED_KEY", InputCostPerToken: 5e-5, OutputCostPerToken: 1e-4}
		if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
			t.Fatal(err)
		}
		ceiling := 0.015
		port, root, id := portFor(t, e, s, m, &ceiling)
		client := openai.NewClient(option.WithBaseURL(root+"/openai/"), option.WithAPIKey(port.Key()), option.WithMaxRetries(2))
		params := openai.ChatCompletionNewParams{Model: m.ModelName, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		for i := range 2 {
			if _, err := client.Chat.Completions.New(ctx, params); err != nil {
				t.Fatalf("call %d under the ceiling: %v", i, err)
			}
		}
		// A call is billed once it was relayed: wait for the second's cost.
		testenv.Wait(t, "the calls billed", testenv.StallWindow, func() (bool, string) {
			b, err := billing.Of(s).TraceBudget(ctx, id)
			return err == nil && b.SpentUSD >= 0.02-1e-9, fmt.Sprint(b.SpentUSD, err)
		}, nil)
		_, err := client.Chat.Completions.New(ctx, params)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusPaymentRequired || !strings.Contains(apiErr.Message, "max_cost_usd") {
			t.Fatalf("the call past the ceiling: %v, want 402 naming max_cost_usd", err)
		}
		select {
		case <-port.Stopped():
		default:
			t.Fatal("the port did not stop the agent's run")
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("the upstream was asked %d times, want the 2 calls under the ceiling (the SDK retried nothing)", n)
		}
	})
}
