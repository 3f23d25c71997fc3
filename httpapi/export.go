package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/trajectory"
	"github.com/proctorhq/proctor/models"
)

// exportPage is how many attempts an export reads at once: their events are held while they are
// written, so a page bounds the memory of an export whatever the job's size.
const exportPage = 50

// exportImageTTL is how long the image URLs of an export can be read: long enough for a trainer
// to fetch them after a large export.
const exportImageTTL = 24 * time.Hour

// registerExport registers a job's export (a Proctor extension).
func (s *Server) registerExport() {
	o := op(huma.Operation{
		OperationID: "export-job", Method: http.MethodGet, Path: "/jobs/{job_id}/export", Tags: []string{"Jobs"},
		Summary: "Export a job's attempts as JSON Lines (Proctor extension)",
		Description: "Streams one JSON object a line (`application/x-ndjson`), one attempt each, in launch order: its task, task version, " +
			"environment build digest, group, model, status, stop reason, reward and evaluation result, and its conversation in OpenAI's " +
			"chat format (`messages`, with tool calls and results, and `tools`), rebuilt from its events as the model was sent them (a " +
			"tool result's images follow its run of tool messages in one user message, as image URLs valid for a day), with the tokens " +
			"its model calls used. Each line carries a `cursor`: pass the last one read as `cursor` to resume an export that was cut " +
			"off, with the same filters. Invalid filters are a 422 before any line; a line is written only once whole.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, authKeyOrSession)
	huma.Register(s.v2, o, s.exportJob)
	doc := s.api.OpenAPI().Paths["/v2/jobs/{job_id}/export"].Get
	doc.Responses["200"] = &huma.Response{Description: "One attempt a line", Content: map[string]*huma.MediaType{
		"application/x-ndjson": {Schema: s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[ExportLine](), true, "ExportLine")},
	}}
}

type exportInput struct {
	JobID     uuid.UUID `path:"job_id"`
	ValidOnly bool      `query:"valid_only" doc:"leave out invalidated attempts"`
	MinReward float64   `query:"min_reward" default:"-1e300" doc:"only attempts with a reward of at least this (set: unrewarded ones are left out)"`
	MaxReward float64   `query:"max_reward" default:"1e300" doc:"only attempts with a reward of at most this (set: unrewarded ones are left out)"`
	Status    []string  `query:"status" enum:"pending,initializing,running,completed,error,cancelling,cancelled" doc:"only attempts in one of these statuses"`
	Category  string    `query:"category" enum:"all,failed,live,no_score,successful" default:"all"`
	Cursor    string    `query:"cursor" maxLength:"200" doc:"resume after the line that carried this cursor"`
}

// ExportLine is one attempt of an export.
type ExportLine struct {
	Cursor           string               `json:"cursor" doc:"pass it as cursor to resume after this line"`
	TraceID          uuid.UUID            `json:"trace_id"`
	JobID            uuid.UUID            `json:"job_id"`
	TaskID           *uuid.UUID           `json:"task_id"`
	TaskName         string               `json:"task_name"`
	TaskVersionID    *uuid.UUID           `json:"task_version_id"`
	Digest           string               `json:"environment_digest" doc:"the environment build its last try ran; empty without an environment"`
	GroupID          string               `json:"group_id"`
	ModelID          *uuid.UUID           `json:"model_id"`
	ModelName        string               `json:"model_name"`
	Status           string               `json:"status"`
	StopReason       string               `json:"stop_reason"`
	Error            string               `json:"error"`
	IsValid          bool                 `json:"is_valid"`
	Reward           *float64             `json:"reward"`
	EvaluationResult object               `json:"evaluation_result" nullable:"true" doc:"as the trace serves it"`
	Tries            int                  `json:"tries" doc:"the try the conversation is from (earlier ones were lost to infrastructure and are left out)"`
	StartTime        *time.Time           `json:"start_time"`
	EndTime          *time.Time           `json:"end_time"`
	Messages         []trajectory.Message `json:"messages" nullable:"false"`
	Tools            []trajectory.Tool    `json:"tools" nullable:"false"`
	Steps            int                  `json:"steps" doc:"model calls"`
	Usage            ExportUsage          `json:"usage"`
	ModelCalls       []ExportModelCall    `json:"model_calls" nullable:"false" doc:"the tokens of each model call, for a training policy's attempts (empty for other models)"`
}

// ExportModelCall is the tokens of one model call of a training policy (a model registered with
// --training-policy), as its upstream returned them: the exact tokens to train on.
type ExportModelCall struct {
	MessageIndex       int             `json:"message_index" doc:"the assistant message of messages the call answered with"`
	PromptTokenIDs     json.RawMessage `json:"prompt_token_ids" doc:"the prompt's token ids as the upstream returned them (vLLM's prompt_token_ids), byte for byte but for whitespace between JSON tokens; null when it returned none"`
	CompletionTokenIDs json.RawMessage `json:"completion_token_ids" doc:"the sampled tokens' ids (the choice's token_ids), as returned; null when none"`
	Logprobs           json.RawMessage `json:"logprobs" doc:"the choice's logprobs as the upstream returned them, byte for byte; null when none"`
	LossMask           []int           `json:"loss_mask" nullable:"true" doc:"one per token of prompt_token_ids then completion_token_ids: 0 for the prompt's, 1 for the sampled ones; null without both"`
	Sampling           json.RawMessage `json:"sampling" doc:"the sampling parameters the request carried"`
}

// ExportUsage counts the tokens of an attempt's model calls.
type ExportUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// exportJob serves GET /v2/jobs/{job_id}/export.
func (s *Server) exportJob(ctx context.Context, in *exportInput) (*huma.StreamResponse, error) {
	if _, err := s.store.GetJob(ctx, callerFrom(ctx), in.JobID); err != nil {
		return nil, storeError(err, "job")
	}
	f := models.ExportFilter{ValidOnly: in.ValidOnly, Statuses: in.Status, Category: in.Category}
	if in.MinReward > -1e300 {
		f.MinReward = &in.MinReward
	}
	if in.MaxReward < 1e300 {
		f.MaxReward = &in.MaxReward
	}
	var after *models.ExportCursor
	if in.Cursor != "" {
		c, err := parseExportCursor(in.Cursor)
		if err != nil {
			return nil, validation("query.cursor", "not a cursor of this export: pass a line's cursor as it was", in.Cursor)
		}
		after = &c
	}
	// The first page is read before the answer starts, so that a failure is an error answer.
	page, err := s.store.ExportPage(ctx, in.JobID, f, after, exportPage)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		hctx.SetHeader("Content-Type", "application/x-ndjson")
		w := hctx.BodyWriter().(http.ResponseWriter)
		rc := http.NewResponseController(w)
		// An export of a large job takes longer than the server's write timeout for one answer.
		rc.SetWriteDeadline(time.Now().Add(time.Hour)) //nolint:errcheck
		enc := json.NewEncoder(w)
		for len(page) > 0 {
			ids := make([]uuid.UUID, len(page))
			for i := range page {
				ids[i] = page[i].Trace.ID
			}
			tokens, err := s.store.ModelCallTokensOf(hctx.Context(), ids)
			if err != nil {
				s.log.ErrorContext(hctx.Context(), "export", "job", in.JobID, "error", err)
				abortExport()
			}
			for i := range page {
				line, err := s.exportLine(hctx.Context(), &page[i], tokens[page[i].Trace.ID])
				if err != nil {
					s.log.ErrorContext(hctx.Context(), "export", "job", in.JobID, "trace", page[i].Trace.ID, "error", err)
					abortExport()
				}
				if enc.Encode(line) != nil {
					return // the client went away
				}
			}
			rc.Flush() //nolint:errcheck
			last := page[len(page)-1].Trace
			if len(page) < exportPage {
				return
			}
			if page, err = s.store.ExportPage(hctx.Context(), in.JobID, f, &models.ExportCursor{CreatedAt: last.CreatedAt, ID: last.ID}, exportPage); err != nil {
				s.log.ErrorContext(hctx.Context(), "export", "job", in.JobID, "error", err)
				abortExport()
			}
		}
	}}, nil
}

// abortExport ends an export that cannot go on with the connection cut, not with the end of the
// answer: a stream that ends cleanly reads as complete, while one cut off is seen as such and
// resumed from its last cursor (proctor export, the Python client).
func abortExport() {
	panic(http.ErrAbortHandler)
}

// exportLine is one attempt's line.
func (s *Server) exportLine(ctx context.Context, a *models.ExportedAttempt, tokens map[int]models.ModelCallTokens) (*ExportLine, error) {
	t := &a.Trace
	conv, err := trajectory.FromEvents(a.Events, func(im agent.Image) string {
		if im.Key == "" || s.bucket == nil {
			return ""
		}
		url, err := s.bucket.SignedURL(ctx, im.Key, http.MethodGet, exportImageTTL)
		if err != nil {
			return ""
		}
		return url
	})
	if err != nil {
		return nil, err
	}
	return &ExportLine{
		Cursor: exportCursor(t.CreatedAt, t.ID), TraceID: t.ID, JobID: t.JobID, TaskID: t.TaskID, TaskName: a.TaskName, TaskVersionID: t.TaskVersionID,
		Digest: a.Digest, GroupID: t.GroupID, ModelID: t.ModelID, ModelName: a.ModelName, Status: t.Status, StopReason: t.StopReason,
		Error: t.Error, IsValid: t.IsValid, Reward: t.Reward, EvaluationResult: objectOf(t.EvaluationResult), Tries: t.Attempt,
		StartTime: t.StartTime, EndTime: t.EndTime, Messages: conv.Messages, Tools: conv.Tools, Steps: conv.Steps,
		Usage:      ExportUsage{PromptTokens: conv.Usage.InputTokens, CompletionTokens: conv.Usage.OutputTokens},
		ModelCalls: modelCalls(conv, tokens),
	}, nil
}

// modelCalls are the kept tokens of the conversation's model calls, in the order of its messages.
func modelCalls(conv *trajectory.Conversation, tokens map[int]models.ModelCallTokens) []ExportModelCall {
	out := []ExportModelCall{}
	for _, seq := range slices.Sorted(maps.Keys(tokens)) {
		idx, ok := conv.Answers[seq]
		if !ok {
			continue // a superseded try's call
		}
		t := tokens[seq]
		c := ExportModelCall{MessageIndex: idx, PromptTokenIDs: rawOrNull(t.PromptTokenIDs), CompletionTokenIDs: rawOrNull(t.CompletionTokenIDs),
			Logprobs: rawOrNull(t.Logprobs), Sampling: rawOrNull(t.Sampling)}
		var prompt, completion []json.RawMessage
		if json.Unmarshal(c.PromptTokenIDs, &prompt) == nil && json.Unmarshal(c.CompletionTokenIDs, &completion) == nil && prompt != nil && completion != nil {
			c.LossMask = make([]int, len(prompt)+len(completion))
			for i := len(prompt); i < len(c.LossMask); i++ {
				c.LossMask[i] = 1
			}
		}
		out = append(out, c)
	}
	return out
}

// rawOrNull is kept JSON text as a value of the line, null when none was kept.
func rawOrNull(s string) json.RawMessage {
	if s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(s)
}

// exportCursor encodes where an export resumes: the attempt's creation time and id.
func exportCursor(createdAt time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(createdAt.UTC().Format(time.RFC3339Nano) + " " + id.String()))
}

func parseExportCursor(s string) (models.ExportCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return models.ExportCursor{}, err
	}
	ts, id, _ := strings.Cut(string(b), " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return models.ExportCursor{}, err
	}
	u, err := uuid.Parse(id)
	return models.ExportCursor{CreatedAt: t, ID: u}, err
}
