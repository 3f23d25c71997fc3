package httpapi

import (
	"testing"

	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/llms"
)

// BenchmarkGatewayRelay is the latency the gateway adds to a model call: the same chat
// completion (with a tool, answered at once by a scripted provider) made by the official OpenAI
// SDK straight to the provider and through /v2/gateway/openai (authentication, the spending
// check, the model's resolution, the relay and the usage row, on SQLite), alternately, b.N
// times each. It reports both medians and the added latency at p50 and p99.
func BenchmarkGatewayRelay(b *testing.B) {
	s := storetest.Open(b, models.SQLite)
	f := newFixture(b, s, Options{})
	p := newScriptedProvider(b)
	b.Setenv("PROCTOR_TEST_OPENAI_KEY", "platform-openai-key")
	if err := llms.Of(s).UpsertModel(ctx, &models.LLMModel{ModelName: "gpt-up", Name: "GPT", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
		BaseURL: p.srv.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_OPENAI_KEY", InputCostPerToken: 1e-6, OutputCostPerToken: 3e-6}); err != nil {
		b.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{Model: "gpt-up", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("add one")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "add"})}}
	direct := openai.NewClient(openaioption.WithBaseURL(p.srv.URL+"/v1/"), openaioption.WithAPIKey("platform-openai-key"), openaioption.WithMaxRetries(0))
	gateway := openai.NewClient(openaioption.WithBaseURL(f.srv.URL+"/v2/gateway/openai/"), openaioption.WithAPIKey(f.key), openaioption.WithMaxRetries(0))
	call := func(c openai.Client) func() error {
		return func() error { _, err := c.Chat.Completions.New(ctx, params); return err }
	}
	testenv.MeasureAddedLatency(b, "gateway", call(direct), call(gateway))
}
