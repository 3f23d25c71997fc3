package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	openaioption "github.com/openai/openai-go/v3/option"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/internal/testenv"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/llms"
)

// scriptedProvider is an OpenAI-compatible and Anthropic server that answers from a script and
// keeps what it was sent (a fake: the providers cannot be reached from here).
type scriptedProvider struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []providerCall
}

type providerCall struct {
	path   string
	header http.Header
	body   map[string]any
}

func newScriptedProvider(t testing.TB) *scriptedProvider {
	p := &scriptedProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *scriptedProvider) calls() []providerCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]providerCall(nil), p.got...)
}

func (p *scriptedProvider) serve(w http.ResponseWriter, r *http.Request) {
	var body map[string]any
	json.NewDecoder(r.Body).Decode(&body) //nolint:errcheck
	p.mu.Lock()
	p.got = append(p.got, providerCall{path: r.URL.Path, header: r.Header.Clone(), body: body})
	p.mu.Unlock()
	stream, _ := body["stream"].(bool)
	if body["model"] == "rate-limited" {
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error": {"message": "slow down", "type": "rate_limit_error"}}`) //nolint:errcheck
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v1/chat/completions" && !stream:
		io.WriteString(w, `{"id": "c1", "object": "chat.completion", "created": 1, "model": "gpt-up", "choices": [{"index": 0, "finish_reason": "tool_calls",
			"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 1}"}}]}}],
			"usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}}`) //nolint:errcheck
	case r.URL.Path == "/v1/chat/completions":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, chunk := range []string{
			`{"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "gpt-up", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}}]}`,
			`{"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "gpt-up", "choices": [{"index": 0, "delta": {"content": "lo"}}]}`,
			`{"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "gpt-up", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}`,
			`{"id": "c2", "object": "chat.completion.chunk", "created": 1, "model": "gpt-up", "choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}}`,
			`[DONE]`,
		} {
			fmt.Fprintf(w, "data: %s\n\n", chunk)
			w.(http.Flusher).Flush()
		}
	case r.URL.Path == "/v1/messages" && !stream:
		io.WriteString(w, `{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up", "content": [{"type": "text", "text": "Hi"}],
			"stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 3}}`) //nolint:errcheck
	case r.URL.Path == "/v1/messages":
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range [][2]string{
			{"message_start", `{"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-up", "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 9, "output_tokens": 1}}}`},
			{"content_block_start", `{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`},
			{"content_block_delta", `{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello"}}`},
			{"content_block_stop", `{"type": "content_block_stop", "index": 0}`},
			{"message_delta", `{"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 4}}`},
			{"message_stop", `{"type": "message_stop"}`},
		} {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev[0], ev[1])
			w.(http.Flusher).Flush()
		}
	default:
		http.NotFound(w, r)
	}
}

// A client written with the official OpenAI or Anthropic Go SDK calls catalog models through the
// gateway with nothing changed but its base URL and key: tool calls and streams come back as
// the provider gave them, the provider gets the platform's key (never the Proctor key), and
// every call is in the usage log with its tokens, cost and whether it streamed.
func TestGatewaySpeaksTheProvidersAPIs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		f := newFixture(t, s, Options{})
		p := newScriptedProvider(t)
		t.Setenv("PROCTOR_TEST_OPENAI_KEY", "platform-openai-key")
		t.Setenv("PROCTOR_TEST_ANTHROPIC_KEY", "platform-anthropic-key")
		gpt := &models.LLMModel{ModelName: "gpt-up", Name: "GPT", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
			BaseURL: p.srv.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_OPENAI_KEY", InputCostPerToken: 1e-6, OutputCostPerToken: 3e-6}
		claude := &models.LLMModel{ModelName: "claude-up", Name: "Claude", Provider: models.AdapterAnthropic, Adapter: models.AdapterAnthropic,
			BaseURL: p.srv.URL, APIKeyEnv: "PROCTOR_TEST_ANTHROPIC_KEY", InputCostPerToken: 2e-6, OutputCostPerToken: 4e-6}
		limited := &models.LLMModel{ModelName: "rate-limited", Name: "Limited", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
			BaseURL: p.srv.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_OPENAI_KEY"}
		for _, m := range []*models.LLMModel{gpt, claude, limited} {
			if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
				t.Fatal(err)
			}
		}

		oa := openai.NewClient(openaioption.WithBaseURL(f.srv.URL+"/v2/gateway/openai/"), openaioption.WithAPIKey(f.key), openaioption.WithMaxRetries(0))
		// By id, with a tool: the tool call comes back.
		done, err := oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: gpt.ID.String(), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("add one")}, Temperature: openai.Float(0.25),
			Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "add"})},
		})
		if err != nil {
			t.Fatal(err)
		}
		if calls := done.Choices[0].Message.ToolCalls; len(calls) != 1 || calls[0].Function.Name != "add" || calls[0].Function.Arguments != `{"a": 1}` {
			t.Errorf("OpenAI tool calls = %+v", calls)
		}
		// Streamed: the SDK accumulates the provider's chunks.
		stream := oa.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "gpt-up", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil || acc.Choices[0].Message.Content != "Hello" || acc.Usage.TotalTokens != 22 {
			t.Errorf("OpenAI stream = %q, usage %+v, err %v", acc.Choices[0].Message.Content, acc.Usage, err)
		}

		an := anthropic.NewClient(anthropicoption.WithBaseURL(f.srv.URL+"/v2/gateway/anthropic/"), anthropicoption.WithAPIKey(f.key), anthropicoption.WithMaxRetries(0))
		msg, err := an.Messages.New(ctx, anthropic.MessageNewParams{Model: "claude-up", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 || msg.Content[0].Text != "Hi" {
			t.Errorf("Anthropic message = %+v", msg.Content)
		}
		astream := an.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "claude-up", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var streamed anthropic.Message
		for astream.Next() {
			if err := streamed.Accumulate(astream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := astream.Err(); err != nil || len(streamed.Content) != 1 || streamed.Content[0].Text != "Hello" {
			t.Errorf("Anthropic stream = %+v, err %v", streamed.Content, err)
		}

		// Each SDK lists the models served over its provider's API.
		oaModels, err := oa.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var oaNames []string
		for _, m := range oaModels.Data {
			oaNames = append(oaNames, m.ID)
		}
		if strings.Join(oaNames, ",") != "gpt-up,rate-limited" {
			t.Errorf("OpenAI models = %v, want gpt-up and rate-limited", oaNames)
		}
		anModels, err := an.Models.List(ctx, anthropic.ModelListParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(anModels.Data) != 1 || anModels.Data[0].ID != "claude-up" || anModels.Data[0].DisplayName != "Claude" {
			t.Errorf("Anthropic models = %+v, want claude-up", anModels.Data)
		}

		// What the provider got: the platform's key, the provider's name for the model, the
		// client's own fields, and a stream that reports its usage.
		got := p.calls()
		if len(got) != 4 {
			t.Fatalf("the provider got %d calls, want 4", len(got))
		}
		for i, c := range got {
			auth := c.header.Get("Authorization") + c.header.Get("X-Api-Key")
			if strings.Contains(auth, f.key) || (!strings.Contains(auth, "platform-openai-key") && !strings.Contains(auth, "platform-anthropic-key")) {
				t.Errorf("call %d reached the provider with credentials %q, want the platform's only", i, auth)
			}
		}
		if got[0].body["model"] != "gpt-up" || got[0].body["temperature"] != 0.25 || got[0].body["tools"] == nil {
			t.Errorf("the provider got %v; want the model's name, the temperature and the tools as sent", got[0].body)
		}
		if opts, _ := got[1].body["stream_options"].(map[string]any); opts["include_usage"] != true {
			t.Errorf("the OpenAI stream was not asked for its usage: %v", got[1].body)
		}
		if v := got[2].header.Get("Anthropic-Version"); v == "" {
			t.Error("no anthropic-version reached the provider")
		}

		// The usage log: one row a call, priced.
		for _, tc := range []struct {
			m                  *models.LLMModel
			prompt, completion []int
			streaming          []bool
		}{
			{gpt, []int{20, 11}, []int{2, 7}, []bool{true, false}},
			{claude, []int{9, 5}, []int{4, 3}, []bool{true, false}},
		} {
			// A call is logged once its answer was relayed whole: the client may read it first.
			var logs []models.InferenceLog
			testenv.Wait(t, tc.m.ModelName+"'s calls logged", testenv.StallWindow, func() (bool, string) {
				var err error
				logs, _, err = billing.Of(s).ModelLogs(ctx, f.caller, tc.m.ID, 10, 0)
				return err == nil && len(logs) >= 2, fmt.Sprint(len(logs), err)
			}, nil)
			if len(logs) != 2 {
				t.Fatalf("%s: %d logged calls, want 2", tc.m.ModelName, len(logs))
			}
			for i, l := range logs { // newest first
				want := float64(tc.prompt[i])*tc.m.InputCostPerToken + float64(tc.completion[i])*tc.m.OutputCostPerToken
				if l.Status != "ok" || l.PromptTokens != tc.prompt[i] || l.CompletionTokens != tc.completion[i] || l.Streaming != tc.streaming[i] ||
					l.Route != billing.RouteCompletions || l.APIKeyID == nil || fmt.Sprintf("%.9f", l.Cost) != fmt.Sprintf("%.9f", want) {
					t.Errorf("%s call %d logged as %+v; want %d+%d tokens, streaming %v, cost %.9f", tc.m.ModelName, i, l, tc.prompt[i], tc.completion[i], tc.streaming[i], want)
				}
			}
		}

		// The provider's errors reach the SDK as the provider gave them, and are logged.
		_, err = oa.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "rate-limited", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var oaErr *openai.Error
		if !errors.As(err, &oaErr) || oaErr.StatusCode != http.StatusTooManyRequests || oaErr.Response.Header.Get("Retry-After") != "7" || !strings.Contains(oaErr.Message, "slow down") {
			t.Errorf("a rate-limited call = %v, want the provider's 429 with its Retry-After", err)
		}
		if logs, _, _ := billing.Of(s).ModelLogs(ctx, f.caller, limited.ID, 10, 0); len(logs) != 1 || logs[0].ErrorCode != "http_429" {
			t.Errorf("the rate-limited call logged as %+v, want one row with http_429", logs)
		}

		// Before the provider is asked, errors are this API's.
		post := func(path, auth, body string) response {
			req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			return f.send(req)
		}
		wantEnvelope(t, post("/v2/gateway/openai/chat/completions", "", `{"model": "gpt-up"}`), http.StatusUnauthorized, "unauthorized")
		wantEnvelope(t, post("/v2/gateway/openai/chat/completions", f.key, `{"model": "nope"}`), http.StatusNotFound, "not_found")
		wantValidation(t, post("/v2/gateway/openai/chat/completions", f.key, `{"model": "claude-up"}`), "body.model")
		wantValidation(t, post("/v2/gateway/anthropic/v1/messages", f.key, `{"messages": []}`), "body.model")
		wantEnvelope(t, post("/v2/gateway/anthropic/v1/messages", f.key, `[1, 2]`), http.StatusBadRequest, "bad_request")
		if n := len(p.calls()); n != 5 {
			t.Errorf("the provider got %d calls, want 5: refused requests must not reach it", n)
		}
	})
}

// A client that hangs up in the middle of a streamed answer does not make the call free: the
// gateway reads the provider's answer to its end and records its tokens, with the code
// client_closed, so that spending limits still count it.
func TestGatewayCountsACallWhoseClientLeft(t *testing.T) {
	s := storetest.Open(t, models.SQLite)
	f := newFixture(t, s, Options{})
	left := make(chan struct{})
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": {"content": "Hel"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		<-left // the rest, with the usage, only once the client has gone
		fmt.Fprint(w, `data: {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 9}}`+"\n\ndata: [DONE]\n\n")
	}))
	defer provider.Close()
	var once sync.Once
	hangUp := func() { once.Do(func() { close(left) }) }
	defer hangUp() // before the provider closes, which waits for its handler
	t.Setenv("PROCTOR_TEST_OPENAI_KEY", "k")
	m := &models.LLMModel{ModelName: "gpt-up", Name: "GPT", Provider: models.AdapterOpenAI, Adapter: models.AdapterOpenAI,
		BaseURL: provider.URL + "/v1", APIKeyEnv: "PROCTOR_TEST_OPENAI_KEY", InputCostPerToken: 1e-6, OutputCostPerToken: 1e-6}
	if err := llms.Of(s).UpsertModel(ctx, m); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", f.srv.URL+"/v2/gateway/openai/chat/completions", strings.NewReader(`{"model": "gpt-up", "stream": true, "messages": [{"role": "user", "content": "hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Content-Type", "application/json")
	// Not the default client: the response checker reads whole answers before handing them back.
	res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 20)
	if _, err := io.ReadFull(res.Body, first); err != nil {
		t.Fatal(err)
	}
	res.Body.Close() // the client hangs up after the first chunk
	hangUp()
	// The row is written once the provider's answer ends: wait for it, not for a time.
	for i := 0; ; i++ {
		if i == 250 {
			t.Fatal("no row after 5 s")
		}
		logs, _, err := billing.Of(s).ModelLogs(ctx, f.caller, m.ID, 10, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(logs) == 1 {
			// Its code says client_closed once the server has seen the client go, which it may
			// not have by the last write; the tokens are what must not be lost.
			if l := logs[0]; l.PromptTokens != 40 || l.CompletionTokens != 9 || l.Cost == 0 || !l.Streaming {
				t.Errorf("the call whose client left is logged as %+v, want its 40+9 tokens and their cost", l)
			} else {
				t.Logf("logged with code %q", l.ErrorCode)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
