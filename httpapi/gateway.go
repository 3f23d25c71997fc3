package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
)

// The gateway's provider-compatible endpoints (a Proctor extension): a client written with the
// official OpenAI or Anthropic SDK calls a catalog model through the gateway by setting its base
// URL and giving a Proctor API key, and changes nothing else: the request and the answer,
// streamed or not, are the provider's own (inference.Relay). The gateway picks the provider's
// name for the model and the key to call it with (the member's own, else the platform's),
// holds the call to the caller's spending limits, and records it in the usage log as any other.
//
//	OpenAI:    base URL <server>/v2/gateway/openai     → POST /v2/gateway/openai/chat/completions
//	Anthropic: base URL <server>/v2/gateway/anthropic  → POST /v2/gateway/anthropic/v1/messages
//
// The Anthropic SDK sends its key as x-api-key, which these routes take as a bearer key.

// metaKeyHeader in an operation's metadata names a header that carries the API key when no
// Authorization header is sent (authMiddleware).
const metaKeyHeader = "key_header"

func (s *Server) registerGateway() {
	const openaiPath, anthropicPath = "/gateway/openai/chat/completions", "/gateway/anthropic/v1/messages"
	huma.Register(s.v2, s.relayOperation(inference.ProtocolOpenAI, "gateway-openai-chat-completions", openaiPath,
		"An OpenAI chat completion through the gateway (Proctor extension)",
		"OpenAI's chat completions API (https://platform.openai.com/docs/api-reference/chat), for models the catalog serves over it: "+
			"set an OpenAI SDK's base URL to `<server>/v2/gateway/openai` and its key to a Proctor API key. "),
		func(ctx context.Context, in *openaiRelayInput) (*huma.StreamResponse, error) {
			return s.relay(ctx, inference.ProtocolOpenAI, in.RawBody, http.Header{})
		})
	huma.Register(s.v2, s.relayOperation(inference.ProtocolAnthropic, "gateway-anthropic-messages", anthropicPath,
		"An Anthropic message through the gateway (Proctor extension)",
		"Anthropic's messages API (https://docs.anthropic.com/en/api/messages), for models the catalog serves over it: "+
			"set an Anthropic SDK's base URL to `<server>/v2/gateway/anthropic` and its key to a Proctor API key (sent as `x-api-key` "+
			"or as a bearer token). `anthropic-version` and `anthropic-beta` are sent on. "),
		func(ctx context.Context, in *anthropicRelayInput) (*huma.StreamResponse, error) {
			h := http.Header{}
			if in.AnthropicVersion != "" {
				h.Set("Anthropic-Version", in.AnthropicVersion)
			}
			if in.AnthropicBeta != "" {
				h.Set("Anthropic-Beta", in.AnthropicBeta)
			}
			return s.relay(ctx, inference.ProtocolAnthropic, in.RawBody, h)
		})
	documentRelay(s.api.OpenAPI().Paths["/v2"+openaiPath].Post)
	documentRelay(s.api.OpenAPI().Paths["/v2"+anthropicPath].Post)
}

// relayOperation is one provider-compatible endpoint.
func (s *Server) relayOperation(protocol, id, path, summary, what string) huma.Operation {
	o := op(huma.Operation{
		OperationID: id, Method: http.MethodPost, Path: path, Tags: []string{"Gateway"}, Summary: summary,
		Description: what + "The body is the provider's request, its `model` a catalog model's `model_name` or id; it is sent on " +
			"with `model` replaced by the provider's name for it (a fork's head checkpoint's), with the member's own key for the " +
			"provider when they have one bound, else the platform's. The answer is the provider's, as it came: JSON, or server-sent " +
			"events when the request says `stream` (an OpenAI stream is asked to end with its usage). Each call is held to the " +
			"caller's spending limits and recorded in the usage log (route `completions`). Before the provider is asked, errors " +
			"use this API's envelope: 404 for an unknown model, 422 for the oracle or a model served over the other provider's API, " +
			"502 when the provider cannot be reached. The provider's own errors (401, 429 with its Retry-After, 529 …) are passed on " +
			"as it gave them, in its format, for its SDK to read.",
		Errors: []int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusBadGateway},
	}, authAPIKey)
	o.MaxBodyBytes, o.SkipValidateBody = s.maxBodyBytes, true
	if protocol == inference.ProtocolAnthropic {
		o.Metadata[metaKeyHeader] = "X-Api-Key"
		o.Security = []map[string][]string{{"bearer": {}}, {"x-api-key": {}}}
	}
	return o
}

// documentRelay documents a relayed body as the JSON object it is (Huma documents a raw body as
// bytes), and the answer as the provider's.
func documentRelay(doc *huma.Operation) {
	doc.RequestBody = &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {Schema: &huma.Schema{
		Type: huma.TypeObject, Required: []string{"model"}, AdditionalProperties: true,
		Description: "The provider's request, as its API specifies it.",
		Properties:  map[string]*huma.Schema{"model": {Type: huma.TypeString, Description: "a catalog model's model_name or id"}, "stream": {Type: huma.TypeBoolean}},
	}}}}
	doc.Responses["200"] = &huma.Response{Description: "The provider's answer, as it came", Content: map[string]*huma.MediaType{
		"application/json":  {Schema: &huma.Schema{Type: huma.TypeObject, AdditionalProperties: true, Description: "The provider's answer, as its API specifies it."}},
		"text/event-stream": {Schema: &huma.Schema{Type: huma.TypeString, Description: "The provider's events, when the request streams."}},
	}}
}

type openaiRelayInput struct {
	RawBody []byte `contentType:"application/json"`
}

type anthropicRelayInput struct {
	RawBody          []byte `contentType:"application/json"`
	AnthropicVersion string `header:"anthropic-version" maxLength:"100" doc:"sent on"`
	AnthropicBeta    string `header:"anthropic-beta" maxLength:"1000" doc:"sent on"`
}

// relay serves the provider-compatible endpoints: it resolves the model, checks the caller's
// spend, then streams the provider's answer.
func (s *Server) relay(ctx context.Context, protocol string, raw []byte, header http.Header) (*huma.StreamResponse, error) {
	c := callerFrom(ctx)
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil || body == nil {
		return nil, newAPIError(http.StatusBadRequest, "the body is not a JSON object")
	}
	var name string
	if err := json.Unmarshal(body["model"], &name); err != nil || name == "" || len(name) > 200 {
		return nil, validation("body.model", "a catalog model's model_name or id, of 1 to 200 bytes", nil)
	}
	if err := s.checkSpend(ctx); err != nil {
		return nil, err
	}
	m, err := s.llms.ResolveModel(ctx, c, name)
	if err != nil {
		return nil, storeError(err, "model "+name)
	}
	switch {
	case m.Builtin():
		return nil, validation("body.model", m.BuiltinDoes()+"; it answers no completions", name)
	case m.Adapter != protocol:
		return nil, validation("body.model", "this model is served over the "+m.Adapter+" API: call it at /v2/gateway/"+m.Adapter, name)
	}
	call := inference.Call{Model: m, TeamID: c.TeamID, UserID: &c.UserID, APIKeyID: &c.APIKeyID, Route: billing.RouteCompletions}
	req := inference.RelayRequest{Protocol: protocol, Body: body, Header: header}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		w := hctx.BodyWriter().(http.ResponseWriter)
		// A model may stream its answer for many minutes: the server's write timeout is for
		// answers the server makes, not for relaying a provider's.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Hour)) //nolint:errcheck
		if _, err := s.gateway().Relay(hctx.Context(), call, req, w); err != nil {
			s.writeRelayError(hctx, err, m.ModelName)
		}
	}}, nil
}

// writeRelayError answers a call the gateway could not make, in the envelope: what the client
// can act on, the rest logged under the request id.
func (s *Server) writeRelayError(hctx huma.Context, err error, model string) {
	ctx := hctx.Context()
	var api *agent.APIError
	switch {
	case ctx.Err() != nil:
		return // the client went away
	case inference.IsBadRequest(err):
		writeHumaError(hctx, newAPIError(http.StatusBadRequest, err.Error()))
	case errors.As(err, &api):
		s.log.WarnContext(ctx, "gateway relay", "request_id", requestIDFrom(ctx), "model", model, "error", err)
		writeHumaError(hctx, newAPIError(http.StatusBadGateway, "the model's provider cannot be reached (request id "+requestIDFrom(ctx)+")"))
	default:
		s.log.ErrorContext(ctx, "gateway relay", "request_id", requestIDFrom(ctx), "model", model, "error", err)
		writeHumaError(hctx, newAPIError(http.StatusBadGateway, "the model cannot be called (request id "+requestIDFrom(ctx)+")"))
	}
}

// registerGatewayModels registers the providers' model lists, for SDK clients that list models
// (some agents check at start that theirs is there).
func (s *Server) registerGatewayModels() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "gateway-openai-models", Method: http.MethodGet, Path: "/gateway/openai/models", Tags: []string{"Gateway"},
		Summary:     "The models served over OpenAI's API, as it lists them (Proctor extension)",
		Description: "OpenAI's model list (https://platform.openai.com/docs/api-reference/models/list): the catalog models the caller can use that are served over OpenAI's API, by `model_name`.",
	}, authAPIKey), s.listOpenAIModels)
	anthropic := op(huma.Operation{
		OperationID: "gateway-anthropic-models", Method: http.MethodGet, Path: "/gateway/anthropic/v1/models", Tags: []string{"Gateway"},
		Summary:     "The models served over Anthropic's API, as it lists them (Proctor extension)",
		Description: "Anthropic's model list (https://docs.anthropic.com/en/api/models-list), in one page: the catalog models the caller can use that are served over Anthropic's API, by `model_name`.",
	}, authAPIKey)
	anthropic.Metadata[metaKeyHeader] = "X-Api-Key"
	anthropic.Security = []map[string][]string{{"bearer": {}}, {"x-api-key": {}}}
	huma.Register(s.v2, anthropic, s.listAnthropicModels)
}

// gatewayModelLimit bounds the models listed: a catalog is a few dozen.
const gatewayModelLimit = 1000

type openAIModelsOutput struct {
	Body struct {
		Object string                  `json:"object" enum:"list"`
		Data   []inference.OpenAIModel `json:"data" nullable:"false"`
	}
}

// listOpenAIModels serves GET /v2/gateway/openai/models.
func (s *Server) listOpenAIModels(ctx context.Context, _ *struct{}) (*openAIModelsOutput, error) {
	ms, err := s.gatewayModels(ctx, inference.ProtocolOpenAI)
	if err != nil {
		return nil, err
	}
	out := &openAIModelsOutput{}
	out.Body.Object, out.Body.Data = "list", make([]inference.OpenAIModel, len(ms))
	for i, m := range ms {
		out.Body.Data[i] = inference.OpenAIModel{ID: m.ModelName, Object: "model", Created: m.CreatedAt.Unix(), OwnedBy: ownedBy(m)}
	}
	return out, nil
}

type anthropicModelsOutput struct {
	Body struct {
		Data    []inference.AnthropicModel `json:"data" nullable:"false"`
		HasMore bool                       `json:"has_more"`
		FirstID *string                    `json:"first_id"`
		LastID  *string                    `json:"last_id"`
	}
}

// listAnthropicModels serves GET /v2/gateway/anthropic/v1/models.
func (s *Server) listAnthropicModels(ctx context.Context, _ *struct{}) (*anthropicModelsOutput, error) {
	ms, err := s.gatewayModels(ctx, inference.ProtocolAnthropic)
	if err != nil {
		return nil, err
	}
	out := &anthropicModelsOutput{}
	out.Body.Data = make([]inference.AnthropicModel, len(ms))
	for i, m := range ms {
		out.Body.Data[i] = inference.AnthropicModel{Type: "model", ID: m.ModelName, DisplayName: m.Name, CreatedAt: m.CreatedAt}
	}
	out.Body.FirstID, out.Body.LastID = inference.AnthropicPage(out.Body.Data)
	return out, nil
}

// gatewayModels are the models the caller can use that are served over protocol.
func (s *Server) gatewayModels(ctx context.Context, protocol string) ([]models.LLMModel, error) {
	all, _, err := s.llms.ListModels(ctx, callerFrom(ctx), gatewayModelLimit, 0)
	if err != nil {
		return nil, err
	}
	out := []models.LLMModel{}
	for _, m := range all {
		if m.Adapter == protocol {
			out = append(out, m)
		}
	}
	return out, nil
}

// ownedBy is who serves a model: the caller's team for its own models, else the platform.
func ownedBy(m models.LLMModel) string {
	if m.TeamID != nil {
		return "team"
	}
	return "proctor"
}
