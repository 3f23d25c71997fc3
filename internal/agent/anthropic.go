package agent

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// DefaultAnthropicBaseURL is the Anthropic API.
const DefaultAnthropicBaseURL = "https://api.anthropic.com/"

// DefaultAnthropicMaxTokens bounds an answer when neither the request nor the configuration
// does: the Messages API requires a bound.
const DefaultAnthropicMaxTokens = 4096

// AnthropicConfig configures [NewAnthropic].
type AnthropicConfig struct {
	// BaseURL is the API root, without /v1; DefaultAnthropicBaseURL when empty.
	BaseURL string
	// APIKey is sent as x-api-key.
	APIKey string
	// Model is the model name; required.
	Model string
	// Temperature, when set, is sent; otherwise the API's default applies.
	Temperature *float64
	// MaxTokens bounds each answer when the request does not; DefaultAnthropicMaxTokens when 0.
	MaxTokens int
	// RequestTimeout bounds one request; 10 minutes when 0. Setting it also spares the SDK's
	// refusal of large max_tokens without streaming, which it bases on the default timeout.
	RequestTimeout time.Duration
	// HTTPClient makes the requests; a client of its own when nil.
	HTTPClient *http.Client
	// Logger receives a debug line per step; slog.Default() when nil.
	Logger *slog.Logger
}

type anthropicModel struct {
	cfg      AnthropicConfig
	messages anthropic.MessageService
	logger   *slog.Logger
}

// NewAnthropic returns a [Model] that calls the Anthropic Messages API with tool use: tools are
// sent with their input schemas, the model's tool_use blocks become tool calls, and tool
// results go back as tool_result blocks (is_error set for failed calls) in the next user turn.
//
// Only cfg configures the client: no ANTHROPIC_* environment variable or profile file is read.
// The SDK's retries are off; see [APIError].
func NewAnthropic(cfg AnthropicConfig) (Model, error) {
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("anthropic model: no model name")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultAnthropicBaseURL
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Minute
	}
	if cfg.MaxTokens <= 0 {
		cfg.MaxTokens = DefaultAnthropicMaxTokens
	}
	httpClient := cfg.HTTPClient
	if httpClient == nil {
		httpClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	opts := []option.RequestOption{
		option.WithBaseURL(cfg.BaseURL),
		option.WithHTTPClient(httpClient),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(cfg.RequestTimeout),
		option.WithAPIKey(cfg.APIKey),
	}
	// NewMessageService, unlike NewClient, adds no environment defaults.
	return &anthropicModel{cfg: cfg, messages: anthropic.NewMessageService(opts...), logger: logger}, nil
}

func (m *anthropicModel) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	params, err := m.params(req)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := m.messages.New(ctx, params)
	if err != nil {
		return nil, callError(ctx, "anthropic", err, anthropicStatus)
	}
	out := AnthropicAnswer(res)
	m.logger.DebugContext(ctx, "model step", "provider", "anthropic", "model", out.Model, "tool_calls", len(out.Message.ToolCalls),
		"input_tokens", out.Usage.InputTokens, "output_tokens", out.Usage.OutputTokens, "elapsed", time.Since(start))
	return out, nil
}

func (m *anthropicModel) params(req StepRequest) (anthropic.MessageNewParams, error) {
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = m.cfg.MaxTokens
	}
	params := anthropic.MessageNewParams{Model: anthropic.Model(m.cfg.Model), MaxTokens: int64(maxTokens)}
	if m.cfg.Temperature != nil {
		params.Temperature = anthropic.Float(*m.cfg.Temperature)
	}
	if req.System != "" {
		params.System = append(params.System, anthropic.TextBlockParam{Text: req.System})
	}
	for i, msg := range req.Messages {
		switch msg.Role {
		case RoleSystem:
			// The Messages API has one system prompt; system turns join it, in order.
			if msg.Content != "" {
				params.System = append(params.System, anthropic.TextBlockParam{Text: msg.Content})
			}
		case RoleUser:
			if msg.Content != "" {
				params.Messages = appendTurn(params.Messages, anthropic.MessageParamRoleUser, anthropic.NewTextBlock(msg.Content))
			}
		case RoleTool:
			block := anthropic.ToolResultBlockParam{ToolUseID: msg.ToolCallID, IsError: anthropic.Bool(msg.IsError)}
			text, shown := toolContent(msg.Content, msg)
			// Empty text blocks are rejected: an empty result is sent without content.
			if text != "" {
				block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: text}})
			}
			for _, im := range shown {
				src := &anthropic.Base64ImageSourceParam{Data: base64.StdEncoding.EncodeToString(im.Data), MediaType: anthropic.Base64ImageSourceMediaType(im.MIMEType)}
				block.Content = append(block.Content, anthropic.ToolResultBlockParamContentUnion{OfImage: &anthropic.ImageBlockParam{Source: anthropic.ImageBlockParamSourceUnion{OfBase64: src}}})
			}
			params.Messages = appendTurn(params.Messages, anthropic.MessageParamRoleUser, anthropic.ContentBlockParamUnion{OfToolResult: &block})
		case RoleAssistant:
			var blocks []anthropic.ContentBlockParamUnion
			if msg.Content != "" {
				blocks = append(blocks, anthropic.NewTextBlock(msg.Content))
			}
			for _, tc := range msg.ToolCalls {
				var input any = tc.Arguments
				if tc.Arguments == nil {
					input = map[string]any{}
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(tc.ID, input, tc.Name))
			}
			if len(blocks) > 0 {
				params.Messages = appendTurn(params.Messages, anthropic.MessageParamRoleAssistant, blocks...)
			}
		default:
			return params, fmt.Errorf("anthropic step: message %d: unknown role %q", i, msg.Role)
		}
	}
	for _, t := range req.Tools {
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: anthropicSchema(t.InputSchema)}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	return params, nil
}

// appendTurn adds blocks to the conversation, merging them into the last turn when it has the
// same role: the results of one assistant turn's tool calls must all arrive in the one user
// turn that follows it.
func appendTurn(msgs []anthropic.MessageParam, role anthropic.MessageParamRole, blocks ...anthropic.ContentBlockParamUnion) []anthropic.MessageParam {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Content = append(msgs[n-1].Content, blocks...)
		return msgs
	}
	return append(msgs, anthropic.MessageParam{Role: role, Content: blocks})
}

// anthropicSchema splits a JSON schema into the SDK's typed fields and the rest.
func anthropicSchema(schema map[string]any) anthropic.ToolInputSchemaParam {
	s := objectSchema(schema)
	out := anthropic.ToolInputSchemaParam{Properties: s["properties"], ExtraFields: map[string]any{}}
	for k, v := range s {
		switch k {
		case "type", "properties":
		case "required":
			out.Required = stringList(v)
		default:
			out.ExtraFields[k] = v
		}
	}
	return out
}

func stringList(v any) []string {
	switch x := v.(type) {
	case []string:
		return x
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func anthropicStatus(err error) (int, *http.Response, bool) {
	var apiErr *anthropic.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode, apiErr.Response, true
	}
	return 0, nil, false
}

// AnthropicAnswer is a message as a step's result: its text and tool-use blocks, its usage.
func AnthropicAnswer(res *anthropic.Message) *StepResult {
	msg := Message{Role: RoleAssistant}
	var texts []string
	for _, block := range res.Content {
		switch block.Type {
		case "text":
			if block.Text != "" {
				texts = append(texts, block.Text)
			}
		case "tool_use":
			args, invalid := ParseArguments(string(block.Input))
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: block.ID, Name: block.Name, Arguments: args, InvalidArguments: invalid})
		}
		// Thinking and server-tool blocks are not part of this package's conversation.
	}
	msg.Content = strings.Join(texts, "\n")
	u := res.Usage
	return &StepResult{
		Message: msg,
		Done:    len(msg.ToolCalls) == 0,
		// Cached prompt tokens are prompt tokens too; counting them keeps the figure
		// comparable with OpenAI's prompt_tokens, which includes its cache hits.
		Usage:      Usage{InputTokens: int(u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens), OutputTokens: int(u.OutputTokens)},
		Model:      string(res.Model),
		StopReason: string(res.StopReason),
	}
}
