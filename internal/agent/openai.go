package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// DefaultOpenAIBaseURL is the OpenAI API; any OpenAI-compatible server (vLLM, Ollama,
// llama.cpp, a gateway) is reached by setting [OpenAIConfig.BaseURL] instead.
const DefaultOpenAIBaseURL = "https://api.openai.com/v1/"

// OpenAIConfig configures [NewOpenAI].
type OpenAIConfig struct {
	// BaseURL is the API root, up to and including /v1 ("http://localhost:8000/v1" for vLLM);
	// DefaultOpenAIBaseURL when empty.
	BaseURL string
	// APIKey is sent as a bearer token; empty sends none (local servers often need none).
	APIKey string
	// Model is the model name the server knows; required.
	Model string
	// Temperature, when set, is sent; otherwise the server's default applies.
	Temperature *float64
	// MaxTokens bounds each answer when the request does not; 0 sends no bound.
	MaxTokens int
	// LegacyMaxTokens sends the bound as max_tokens rather than max_completion_tokens, for
	// servers that only know the older name.
	LegacyMaxTokens bool
	// CaptureTokens asks for the tokens of each answer (a training policy's): logprobs, and
	// return_token_ids, which vLLM answers with the prompt's and the completion's token ids; the
	// StepResult's Tokens holds what came back. Servers that do not know return_token_ids may
	// refuse it: it is for models served for training.
	CaptureTokens bool
	// HTTPClient makes the requests; a client of its own when nil.
	HTTPClient *http.Client
	// Logger receives a debug line per step; slog.Default() when nil.
	Logger *slog.Logger
}

type openAIModel struct {
	cfg    OpenAIConfig
	chat   openai.ChatCompletionService
	logger *slog.Logger
}

// NewOpenAI returns a [Model] that calls an OpenAI-compatible chat completions endpoint with
// tool calling: tools are sent as functions with their JSON schemas, tool results as "tool"
// messages answering a tool_call_id.
//
// Only cfg configures the client: unlike the SDK's NewClient, no OPENAI_* environment
// variable is read, so a worker's ambient key or organisation never reaches a server it was
// not meant for. The SDK's retries are off; see [APIError].
func NewOpenAI(cfg OpenAIConfig) (Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai model: no model name")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultOpenAIBaseURL
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		// Bounded per step by the caller's context; the header timeout catches servers that
		// accept a request and never answer.
		transport := http.DefaultTransport.(*http.Transport).Clone()
		transport.ResponseHeaderTimeout = 10 * time.Minute
		httpClient = &http.Client{Transport: transport}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	// NewChatCompletionService, unlike NewClient, adds no environment defaults.
	return &openAIModel{cfg: cfg, chat: openai.NewChatCompletionService(opts...), logger: logger}, nil
}

func (m *openAIModel) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := m.chat.New(ctx, params)
	if err != nil {
		return nil, callError(ctx, "openai", err, openAIStatus)
	}
	out, err := OpenAIAnswer(res)
	if err != nil {
		return nil, err
	}
	if m.cfg.CaptureTokens {
		if out.Tokens, err = openAITokens(res.RawJSON(), params); err != nil {
			return nil, err
		}
	}
	m.logger.DebugContext(ctx, "model step", "provider", "openai", "model", out.Model, "tool_calls", len(out.Message.ToolCalls),
		"input_tokens", out.Usage.InputTokens, "output_tokens", out.Usage.OutputTokens, "elapsed", time.Since(start))
	return out, nil
}

func (m *openAIModel) params(req StepRequest) (openai.ChatCompletionNewParams, error) {
	params := openai.ChatCompletionNewParams{Model: shared.ChatModel(m.cfg.Model)}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	var pending []openai.ChatCompletionContentPartUnionParam // images of the tool results so far
	for i, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			params.Messages = append(params.Messages, openai.SystemMessage(msg.Content))
		case RoleUser:
			params.Messages = append(params.Messages, openai.UserMessage(msg.Content))
		case RoleAssistant:
			am := openai.ChatCompletionAssistantMessageParam{}
			if msg.Content != "" || len(msg.ToolCalls) == 0 {
				am.Content.OfString = openai.String(msg.Content)
			}
			for _, tc := range msg.ToolCalls {
				am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID:       tc.ID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Name, Arguments: argumentsJSON(tc)},
					},
				})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
		case RoleTool:
			// Tool messages carry text only: a result's images follow the run of tool messages
			// (they must directly follow the assistant turn that called them) in one user message.
			text, shown := toolContent(toolResultText(msg), msg)
			if len(shown) > 0 {
				text = joinLines(text, fmt.Sprintf("[%d image(s): in the next user message]", len(shown)))
				pending = append(pending, openai.TextContentPart(fmt.Sprintf("The image(s) of the result of call %s:", msg.ToolCallID)))
				for _, im := range shown {
					pending = append(pending, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(im)}))
				}
			}
			params.Messages = append(params.Messages, openai.ToolMessage(text, msg.ToolCallID))
			if len(pending) > 0 && (i+1 == len(req.Messages) || req.Messages[i+1].Role != RoleTool) {
				params.Messages = append(params.Messages, openai.UserMessage(pending))
				pending = nil
			}
		default:
			return params, fmt.Errorf("openai step: message %d: unknown role %q", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		fn := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(objectSchema(t.InputSchema))}
		if t.Description != "" {
			fn.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fn))
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.cfg.MaxTokens
	}
	if maxTokens > 0 {
		if m.cfg.LegacyMaxTokens {
			params.MaxTokens = openai.Int(int64(maxTokens))
		} else {
			params.MaxCompletionTokens = openai.Int(int64(maxTokens))
		}
	}
	if m.cfg.Temperature != nil {
		params.Temperature = openai.Float(*m.cfg.Temperature)
	}
	if m.cfg.CaptureTokens {
		params.Logprobs = openai.Bool(true)
		params.SetExtraFields(map[string]any{"return_token_ids": true})
	}
	return params, nil
}

// OpenAITokensOf reads the token ids and logprobs of a chat completion's raw answer (JSON, not
// streamed), each value's own bytes, with sampling, the request's sampling parameters as a JSON
// object: what a brought agent's call to a training policy returned.
func OpenAITokensOf(answer []byte, sampling string) (*Tokens, error) {
	t, err := readOpenAITokens(answer)
	if err != nil {
		return nil, err
	}
	t.Sampling = sampling
	return t, nil
}

// readOpenAITokens reads the token parts of a chat completion's raw answer.
func readOpenAITokens(raw []byte) (*Tokens, error) {
	var answer struct {
		PromptTokenIDs json.RawMessage `json:"prompt_token_ids"`
		Choices        []struct {
			TokenIDs json.RawMessage `json:"token_ids"`
			Logprobs json.RawMessage `json:"logprobs"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("read the answer's tokens: %w", err)
	}
	t := &Tokens{PromptTokenIDs: rawValue(answer.PromptTokenIDs)}
	if len(answer.Choices) > 0 {
		t.CompletionTokenIDs, t.Logprobs = rawValue(answer.Choices[0].TokenIDs), rawValue(answer.Choices[0].Logprobs)
	}
	return t, nil
}

// openAITokens reads the token ids and logprobs of a chat completion's raw answer, each value's
// own bytes, and the sampling parameters the request carried.
func openAITokens(raw string, params openai.ChatCompletionNewParams) (*Tokens, error) {
	t, err := readOpenAITokens([]byte(raw))
	if err != nil {
		return nil, fmt.Errorf("openai step: %w", err)
	}
	sampling := map[string]any{"logprobs": true, "return_token_ids": true}
	if params.Temperature.Valid() {
		sampling["temperature"] = params.Temperature.Value
	}
	if params.MaxCompletionTokens.Valid() {
		sampling["max_completion_tokens"] = params.MaxCompletionTokens.Value
	}
	if params.MaxTokens.Valid() {
		sampling["max_tokens"] = params.MaxTokens.Value
	}
	sb, err := json.Marshal(sampling)
	if err != nil {
		return nil, err
	}
	t.Sampling = string(sb)
	return t, nil
}

// rawValue is a JSON value's text, empty for an absent or null one.
func rawValue(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	return string(v)
}

// dataURL is an image inline, as a data: URL.
func dataURL(im Image) string {
	return "data:" + im.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)
}

func openAIStatus(err error) (int, *http.Response, bool) {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode, apiErr.Response, true
	}
	return 0, nil, false
}

// objectSchema is a tool's input schema as the providers want it: an object schema, with
// "type": "object" and "properties" present even when the tool takes no arguments (OpenAI
// rejects {"type": "object"} alone for some models, and MCP tools may omit both).
func objectSchema(schema map[string]any) map[string]any {
	out := make(map[string]any, len(schema)+2)
	for k, v := range schema {
		out[k] = v
	}
	if _, ok := out["type"]; !ok {
		out["type"] = "object"
	}
	if _, ok := out["properties"]; !ok {
		out["properties"] = map[string]any{}
	}
	return out
}

// OpenAIAnswer is a chat completion as a step's result: its first choice's message, its usage.
func OpenAIAnswer(res *openai.ChatCompletion) (*StepResult, error) {
	if len(res.Choices) == 0 {
		return nil, fmt.Errorf("openai step: %w: no choices in the completion", ErrBadResponse)
	}
	choice := res.Choices[0]
	msg := Message{Role: RoleAssistant, Content: choice.Message.Content}
	if msg.Content == "" && choice.Message.Refusal != "" {
		msg.Content = choice.Message.Refusal
	}
	for _, tc := range choice.Message.ToolCalls {
		if tc.Type != "" && tc.Type != "function" {
			return nil, fmt.Errorf("openai step: %w: tool call of type %q", ErrBadResponse, tc.Type)
		}
		args, invalid := ParseArguments(tc.Function.Arguments)
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: args, InvalidArguments: invalid})
	}
	return &StepResult{
		Message:    msg,
		Done:       len(msg.ToolCalls) == 0,
		Usage:      Usage{InputTokens: int(res.Usage.PromptTokens), OutputTokens: int(res.Usage.CompletionTokens)},
		Model:      res.Model,
		StopReason: choice.FinishReason,
	}, nil
}
