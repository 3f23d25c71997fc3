package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/credentials"
)

func (s *Server) registerInference() {
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "create-completion", Method: http.MethodPost, Path: "/completions", Tags: []string{"Completions"},
		Summary: "One chat completion",
		Description: "Through the inference gateway: the caller's own key for the model's provider when one is bound (a personal " +
			"credential, a secret bound to the provider, the team's credential), else the platform's; the call is recorded with " +
			"its tokens and cost. A provider's 429 stays 429 with its Retry-After; other provider failures are 502.",
		Errors: []int{http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests, http.StatusBadGateway},
	}, authKeyOrSession), s.createCompletion)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-inference-usage", Method: http.MethodGet, Path: "/inference/usage", Tags: []string{"Usage"},
		Summary: "Inference usage log", Description: "The team's model calls of the last `days` days, newest first.",
	}, authKeyOrSession), s.listInferenceUsage)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-inference-usage-buckets", Method: http.MethodGet, Path: "/usage/inference", Tags: []string{"Usage"},
		Summary: "Inference usage over time", Description: "The team's calls and their cost in hourly or daily buckets (UTC), optionally grouped.",
	}, authKeyOrSession), s.listUsageBuckets)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "list-model-logs", Method: http.MethodGet, Path: "/models/{model_id}/logs", Tags: []string{"Models"},
		Summary: "A model's inference log", Description: "The caller's team's calls of the model through the gateway, newest first.",
		Errors: []int{http.StatusNotFound},
	}, authKeyOrSession), s.listModelLogs)
}

// gateway is the inference gateway of this server.
func (s *Server) gateway() *inference.Gateway {
	var keys credentials.Sealer
	if s.secrets != nil {
		keys = s.secrets
	}
	return &inference.Gateway{Store: s.store, Keys: keys, Models: inference.DefaultModels, Logger: s.log, Metrics: s.metrics}
}

// CompletionMessage is one turn of a completion's conversation.
type CompletionMessage struct {
	Role    string `json:"role" enum:"system,user,assistant"`
	Content string `json:"content" maxLength:"1000000"`
}

type completionInput struct {
	Body struct {
		Model     string              `json:"model" minLength:"1" maxLength:"200" doc:"a model_name or an id"`
		Messages  []CompletionMessage `json:"messages" minItems:"1" maxItems:"1000"`
		MaxTokens int                 `json:"max_tokens,omitempty" minimum:"1" maximum:"1000000"`
	}
}

type completionOutput struct {
	Body struct {
		Content string `json:"content"`
		Model   string `json:"model" doc:"the model that answered, as the provider names it"`
	}
}

// createCompletion serves POST /v2/completions: one chat completion through the gateway.
func (s *Server) createCompletion(ctx context.Context, in *completionInput) (*completionOutput, error) {
	c := callerFrom(ctx)
	if err := s.checkSpend(ctx); err != nil {
		return nil, err
	}
	m, err := s.llms.ResolveModel(ctx, c, in.Body.Model)
	if err != nil {
		return nil, storeError(err, "model "+in.Body.Model)
	}
	if m.Builtin() {
		return nil, validation("body.model", m.BuiltinDoes()+"; it answers no completions", in.Body.Model)
	}
	req := agent.StepRequest{MaxTokens: in.Body.MaxTokens}
	var system []string
	for _, msg := range in.Body.Messages {
		if msg.Role == "system" {
			system = append(system, msg.Content)
			continue
		}
		req.Messages = append(req.Messages, agent.Message{Role: msg.Role, Content: msg.Content})
	}
	req.System = strings.Join(system, "\n\n")
	if len(req.Messages) == 0 {
		return nil, validation("body.messages", "give at least one user or assistant message", nil)
	}
	call := inference.Call{Model: m, TeamID: c.TeamID, UserID: &c.UserID, Route: billing.RouteCompletions}
	if c.Kind == models.CredentialAPIKey {
		call.APIKeyID = &c.APIKeyID
	}
	model, _, err := s.gateway().Client(ctx, call)
	if err != nil {
		s.log.ErrorContext(ctx, "completion: model", "model", m.ModelName, "error", err)
		return nil, newAPIError(http.StatusBadGateway, "the model cannot be called: "+err.Error())
	}
	res, err := model.Step(ctx, req)
	if err != nil {
		return nil, providerError(err)
	}
	out := &completionOutput{}
	out.Body.Content, out.Body.Model = res.Message.Content, res.Model
	return out, nil
}

// providerError maps a failed provider call: 429 stays 429 (with the provider's Retry-After),
// anything else is a 502 that says what the provider said.
func providerError(err error) error {
	var api *agent.APIError
	if !errors.As(err, &api) {
		return newAPIError(http.StatusBadGateway, "the provider's answer could not be used: "+err.Error())
	}
	if api.Status == http.StatusTooManyRequests {
		wait := max(1, int((api.RetryAfter+time.Second-1)/time.Second))
		return huma.ErrorWithHeaders(newAPIError(http.StatusTooManyRequests, "the provider is rate limiting: "+api.Message),
			http.Header{"Retry-After": {strconv.Itoa(wait)}})
	}
	return newAPIError(http.StatusBadGateway, api.Error())
}

type modelLogsInput struct {
	ModelID uuid.UUID `path:"model_id"`
	Limit   int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset  int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// ModelLog is one call of a model through the gateway.
type ModelLog struct {
	ID               uuid.UUID  `json:"id"`
	CreatedAt        time.Time  `json:"created_at"`
	Route            string     `json:"route" enum:"agent,completions"`
	Status           string     `json:"status" enum:"ok,error"`
	PromptTokens     int        `json:"prompt_tokens"`
	CompletionTokens int        `json:"completion_tokens"`
	TotalTokens      int        `json:"total_tokens"`
	Cost             float64    `json:"cost" doc:"USD, from the model's per-token prices"`
	DurationMS       int        `json:"duration_ms"`
	ErrorCode        *string    `json:"error_code" doc:"http_<status>, unreachable, bad_response, or client_closed (a gateway call whose client left before the answer ended; its tokens are counted); null when the call succeeded"`
	Streaming        bool       `json:"streaming"`
	TraceID          *uuid.UUID `json:"trace_id"`
}

type modelLogsOutput struct{ Body Page[ModelLog] }

// listModelLogs serves GET /v2/models/{model_id}/logs.
func (s *Server) listModelLogs(ctx context.Context, in *modelLogsInput) (*modelLogsOutput, error) {
	logs, total, err := s.billing.ModelLogs(ctx, callerFrom(ctx), in.ModelID, in.Limit, in.Offset)
	if err != nil {
		return nil, storeError(err, "model")
	}
	items := make([]ModelLog, len(logs))
	for i, l := range logs {
		items[i] = ModelLog{ID: l.ID, CreatedAt: l.CreatedAt, Route: l.Route, Status: l.Status, PromptTokens: l.PromptTokens,
			CompletionTokens: l.CompletionTokens, TotalTokens: l.TotalTokens, Cost: l.Cost, DurationMS: l.DurationMS,
			Streaming: l.Streaming, TraceID: l.TraceID}
		if l.ErrorCode != "" {
			items[i].ErrorCode = &l.ErrorCode
		}
	}
	return &modelLogsOutput{Body: NewPage(items, total, in.Limit, in.Offset)}, nil
}

type inferenceUsageInput struct {
	Days             int       `query:"days" minimum:"1" maximum:"366" default:"7"`
	UserID           uuid.UUID `query:"user_id"`
	APIKeyID         uuid.UUID `query:"api_key_id"`
	ByokCredentialID uuid.UUID `query:"byok_credential_id"`
	ModelID          uuid.UUID `query:"model_id"`
	RequestType      string    `query:"request_type" enum:"agent,completions" doc:"the call's route"`
	Limit            int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	Offset           int       `query:"offset" minimum:"0" maximum:"2147483647" default:"0"`
}

// InferenceUsageLog is one model call in the usage log.
type InferenceUsageLog struct {
	ID                uuid.UUID  `json:"id"`
	CreatedAt         time.Time  `json:"created_at"`
	Model             string     `json:"model" doc:"the model's model_name"`
	Cost              float64    `json:"cost"`
	Type              string     `json:"type" enum:"agent,completions" doc:"the call's route"`
	APIKeyID          *uuid.UUID `json:"api_key_id"`
	APIKeyName        *string    `json:"api_key_name"`
	BYOK              bool       `json:"byok"`
	ByokCredentialID  *uuid.UUID `json:"byok_credential_id"`
	Checkpoint        object     `json:"checkpoint" nullable:"true" doc:"the checkpoint that answered ({id}); null for a model without one"`
	Metadata          object     `json:"metadata" doc:"trace_id, status, error_code, prompt_tokens, completion_tokens, duration_ms"`
	ModelCheckpointID *uuid.UUID `json:"model_checkpoint_id"`
}

// inferenceLogMetadata is a usage log row's metadata (an open object in the spec).
type inferenceLogMetadata struct {
	TraceID          *uuid.UUID `json:"trace_id,omitempty"`
	Status           string     `json:"status"`
	ErrorCode        string     `json:"error_code,omitempty"`
	PromptTokens     int        `json:"prompt_tokens"`
	CompletionTokens int        `json:"completion_tokens"`
	DurationMS       int        `json:"duration_ms"`
}

type inferenceUsageOutput struct {
	Body struct {
		Logs       []InferenceUsageLog `json:"logs" nullable:"false"`
		TotalCount int                 `json:"total_count"`
		OrgType    string              `json:"org_type" doc:"whose usage this is: team"`
		TeamID     uuid.UUID           `json:"team_id"`
	}
}

// listInferenceUsage serves GET /v2/inference/usage.
func (s *Server) listInferenceUsage(ctx context.Context, in *inferenceUsageInput) (*inferenceUsageOutput, error) {
	c := callerFrom(ctx)
	rows, total, err := s.billing.InferenceUsage(ctx, c, billing.UsageFilter{Since: time.Now().AddDate(0, 0, -in.Days), UserID: optionalID(in.UserID),
		APIKeyID: optionalID(in.APIKeyID), ByokCredentialID: optionalID(in.ByokCredentialID), Model: optionalID(in.ModelID), Route: in.RequestType,
		Limit: in.Limit, Offset: in.Offset})
	if err != nil {
		return nil, err
	}
	out := &inferenceUsageOutput{}
	out.Body.TotalCount, out.Body.OrgType, out.Body.TeamID = total, "team", c.TeamID
	out.Body.Logs = make([]InferenceUsageLog, len(rows))
	for i, r := range rows {
		meta := inferenceLogMetadata{TraceID: r.TraceID, Status: r.Status, ErrorCode: r.ErrorCode, PromptTokens: r.PromptTokens,
			CompletionTokens: r.CompletionTokens, DurationMS: r.DurationMS}
		out.Body.Logs[i] = InferenceUsageLog{ID: r.ID, CreatedAt: r.CreatedAt, Model: r.ModelName, Cost: r.Cost, Type: r.Route,
			APIKeyID: r.APIKeyID, APIKeyName: r.APIKeyName, BYOK: r.BYOK, ByokCredentialID: r.ByokCredentialID, Metadata: objectOf(&meta),
			ModelCheckpointID: r.CheckpointID}
		if r.CheckpointID != nil {
			out.Body.Logs[i].Checkpoint = objectOf(&struct {
				ID uuid.UUID `json:"id"`
			}{*r.CheckpointID})
		}
	}
	return out, nil
}

type usageBucketsInput struct {
	Start            time.Time `query:"start" doc:"default: end minus 7 days"`
	End              time.Time `query:"end" doc:"default: now"`
	BucketWidth      string    `query:"bucket_width" enum:"1h,1d" default:"1d"`
	GroupBy          string    `query:"group_by" enum:"api_key,byok,model,user,route"`
	UserID           uuid.UUID `query:"user_id"`
	APIKeyID         uuid.UUID `query:"api_key_id"`
	ByokCredentialID uuid.UUID `query:"byok_credential_id"`
}

// UsageGroup is the calls of one group in one bucket.
type UsageGroup struct {
	Key              string  `json:"key" doc:"the group's value: an API key, model or user id (empty: none), byok or platform, a route; all without group_by"`
	Requests         int     `json:"requests"`
	Cost             float64 `json:"cost"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
}

// UsageBucketOut is one time bucket.
type UsageBucketOut struct {
	Start  time.Time    `json:"start"`
	Groups []UsageGroup `json:"groups" nullable:"false"`
}

type usageBucketsOutput struct {
	Body struct {
		Start         time.Time        `json:"start"`
		End           time.Time        `json:"end"`
		BucketWidth   string           `json:"bucket_width" enum:"1h,1d"`
		TotalRequests int              `json:"total_requests"`
		TotalCost     float64          `json:"total_cost"`
		Buckets       []UsageBucketOut `json:"buckets" nullable:"false" doc:"buckets with calls, oldest first"`
		GroupBy       *string          `json:"group_by"`
	}
}

// window is the range asked for, with its defaults: the 7 days up to now.
func (in *usageBucketsInput) window() (start, end time.Time) {
	end = in.End
	if end.IsZero() {
		end = time.Now()
	}
	start = in.Start
	if start.IsZero() {
		start = end.AddDate(0, 0, -7)
	}
	return start, end
}

// Resolve bounds the range: a year of days, a month of hours.
func (in *usageBucketsInput) Resolve(huma.Context) []error {
	start, end := in.window()
	switch {
	case !start.Before(end):
		return []error{&huma.ErrorDetail{Location: "query.start", Message: "start must be before end"}}
	case in.BucketWidth == "1h" && end.Sub(start) > 31*24*time.Hour:
		return []error{&huma.ErrorDetail{Location: "query.start", Message: "hourly buckets cover at most 31 days; use bucket_width=1d"}}
	case end.Sub(start) > 366*24*time.Hour:
		return []error{&huma.ErrorDetail{Location: "query.start", Message: "the range covers at most 366 days"}}
	}
	return nil
}

// listUsageBuckets serves GET /v2/usage/inference: bucketed aggregates of the team's calls.
func (s *Server) listUsageBuckets(ctx context.Context, in *usageBucketsInput) (*usageBucketsOutput, error) {
	start, end := in.window()
	hourly := in.BucketWidth == "1h"
	rows, err := s.billing.InferenceBuckets(ctx, callerFrom(ctx), start, end, hourly, in.GroupBy,
		billing.UsageFilter{UserID: optionalID(in.UserID), APIKeyID: optionalID(in.APIKeyID), ByokCredentialID: optionalID(in.ByokCredentialID)})
	if err != nil {
		return nil, err
	}
	out := &usageBucketsOutput{}
	out.Body.Start, out.Body.End, out.Body.BucketWidth, out.Body.Buckets = start.UTC(), end.UTC(), in.BucketWidth, []UsageBucketOut{}
	if in.GroupBy != "" {
		out.Body.GroupBy = &in.GroupBy
	}
	layout := "2006-01-02"
	if hourly {
		layout = "2006-01-02 15"
	}
	for _, r := range rows {
		at, err := time.Parse(layout, r.Bucket)
		if err != nil {
			return nil, fmt.Errorf("usage bucket %q: %w", r.Bucket, err)
		}
		if n := len(out.Body.Buckets); n == 0 || !out.Body.Buckets[n-1].Start.Equal(at) {
			out.Body.Buckets = append(out.Body.Buckets, UsageBucketOut{Start: at, Groups: []UsageGroup{}})
		}
		b := &out.Body.Buckets[len(out.Body.Buckets)-1]
		b.Groups = append(b.Groups, UsageGroup{Key: r.Group, Requests: r.Requests, Cost: r.Cost, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens})
		out.Body.TotalRequests += r.Requests
		out.Body.TotalCost += r.Cost
	}
	return out, nil
}

// optionalID is an optional id query parameter: nil when not given (the zero uuid).
func optionalID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}
