package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/parquet-go/parquet-go"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/trajectory"
	"github.com/proctorhq/proctor/models/rollouts"
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
	doc.Responses["200"] = &huma.Response{Description: "One attempt a line (format jsonl), or a Parquet file of one attempt a row (format parquet)", Content: map[string]*huma.MediaType{
		"application/x-ndjson": {Schema: s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[ExportLine](), true, "ExportLine")},
		parquetMediaType:       {Schema: &huma.Schema{Type: huma.TypeString, Format: "binary"}},
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
	Format    string    `query:"format" enum:"jsonl,parquet" default:"jsonl" doc:"jsonl: one attempt a line, resumable by cursor; parquet: one file (a row group per 50 attempts), read whole"`
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
	if _, err := s.rollouts.GetJob(ctx, callerFrom(ctx), in.JobID); err != nil {
		return nil, storeError(err, "job")
	}
	f := rollouts.ExportFilter{ValidOnly: in.ValidOnly, Statuses: in.Status, Category: in.Category}
	if in.MinReward > -1e300 {
		f.MinReward = &in.MinReward
	}
	if in.MaxReward < 1e300 {
		f.MaxReward = &in.MaxReward
	}
	var after *rollouts.ExportCursor
	if in.Cursor != "" && in.Format == exportParquet {
		return nil, validation("query.cursor", "a Parquet export is one file, read whole: it takes no cursor", in.Cursor)
	}
	if in.Cursor != "" {
		c, err := parseExportCursor(in.Cursor)
		if err != nil {
			return nil, validation("query.cursor", "not a cursor of this export: pass a line's cursor as it was", in.Cursor)
		}
		after = &c
	}
	// The first page is read before the answer starts, so that a failure is an error answer.
	page, err := s.rollouts.ExportPage(ctx, in.JobID, f, after, exportPage)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		w := hctx.BodyWriter().(http.ResponseWriter)
		rc := http.NewResponseController(w)
		// An export of a large job takes longer than the server's write timeout for one answer.
		rc.SetWriteDeadline(time.Now().Add(time.Hour)) //nolint:errcheck
		if in.Format == exportParquet {
			hctx.SetHeader("Content-Type", parquetMediaType)
			hctx.SetHeader("Content-Disposition", `attachment; filename="`+in.JobID.String()+`.parquet"`)
			pw := parquet.NewGenericWriter[ExportRow](w, parquet.Compression(&parquet.Zstd))
			rows := make([]ExportRow, 1)
			write := func(l *ExportLine) (err error) {
				if rows[0], err = exportRow(l); err != nil {
					return err
				}
				_, err = pw.Write(rows)
				return err
			}
			// Each page a row group: an export's memory stays a page's whatever the job's size.
			// The footer, which makes the file whole, is written only once every attempt is in:
			// a cut-off file is no Parquet file, never a short one.
			if s.exportPages(hctx, in.JobID, f, page, write, pw.Flush) {
				if err := pw.Close(); err != nil {
					s.log.ErrorContext(hctx.Context(), "export", "job", in.JobID, "error", err)
				}
			}
			return
		}
		hctx.SetHeader("Content-Type", "application/x-ndjson")
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false) // a token such as <|im_end|> as the model wrote it
		s.exportPages(hctx, in.JobID, f, page, func(l *ExportLine) error {
			buf.Reset()
			if err := enc.Encode(l); err != nil {
				s.log.ErrorContext(hctx.Context(), "export", "job", in.JobID, "trace", l.TraceID, "error", err)
				abortExport() // never a clean end that reads as complete
			}
			_, err := w.Write(buf.Bytes())
			return err
		}, rc.Flush)
	}}, nil
}

// exportPages writes the export's attempts, page after page from page (the first, already read),
// each with write, and flush after each page; it reports whether all were written. An attempt
// that cannot be read aborts the answer (see abortExport); a client that went away ends it.
func (s *Server) exportPages(hctx huma.Context, jobID uuid.UUID, f rollouts.ExportFilter, page []rollouts.ExportedAttempt, write func(*ExportLine) error, flush func() error) bool {
	for len(page) > 0 {
		var err error
		for i := range page {
			line, err := s.exportLine(hctx.Context(), &page[i])
			if err != nil {
				s.log.ErrorContext(hctx.Context(), "export", "job", jobID, "trace", page[i].Trace.ID, "error", err)
				abortExport()
			}
			if write(line) != nil {
				return false // the client went away
			}
		}
		if flush() != nil {
			return false
		}
		last := page[len(page)-1].Trace
		if len(page) < exportPage {
			return true
		}
		if page, err = s.rollouts.ExportPage(hctx.Context(), jobID, f, &rollouts.ExportCursor{CreatedAt: last.CreatedAt, ID: last.ID}, exportPage); err != nil {
			s.log.ErrorContext(hctx.Context(), "export", "job", jobID, "error", err)
			abortExport()
		}
	}
	return true
}

// A Parquet export (?format=parquet).
const (
	exportParquet    = "parquet"
	parquetMediaType = "application/vnd.apache.parquet"
)

// ExportRow is one attempt of a Parquet export: the export line's fields as columns, its nested
// ones (the conversation, the tools, the evaluation result, the model calls' tokens) as JSON
// text, which pandas, pyarrow and datasets read as strings and json.loads takes apart; so the
// file's schema stays flat and the same for every environment.
type ExportRow struct {
	TraceID          string     `parquet:"trace_id"`
	JobID            string     `parquet:"job_id"`
	TaskID           *string    `parquet:"task_id,optional"`
	TaskName         string     `parquet:"task_name"`
	TaskVersionID    *string    `parquet:"task_version_id,optional"`
	Digest           string     `parquet:"environment_digest"`
	GroupID          string     `parquet:"group_id"`
	ModelID          *string    `parquet:"model_id,optional"`
	ModelName        string     `parquet:"model_name"`
	Status           string     `parquet:"status"`
	StopReason       string     `parquet:"stop_reason"`
	Error            string     `parquet:"error"`
	IsValid          bool       `parquet:"is_valid"`
	Reward           *float64   `parquet:"reward,optional"`
	EvaluationResult string     `parquet:"evaluation_result,json"`
	Tries            int64      `parquet:"tries"`
	StartTime        *time.Time `parquet:"start_time,optional,timestamp(microsecond)"`
	EndTime          *time.Time `parquet:"end_time,optional,timestamp(microsecond)"`
	Messages         string     `parquet:"messages,json"`
	Tools            string     `parquet:"tools,json"`
	Steps            int64      `parquet:"steps"`
	PromptTokens     int64      `parquet:"prompt_tokens"`
	CompletionTokens int64      `parquet:"completion_tokens"`
	ModelCalls       string     `parquet:"model_calls,json"`
}

// exportRow is an export line as a Parquet row.
func exportRow(l *ExportLine) (ExportRow, error) {
	str := func(id *uuid.UUID) *string {
		if id == nil {
			return nil
		}
		s := id.String()
		return &s
	}
	r := ExportRow{TraceID: l.TraceID.String(), JobID: l.JobID.String(), TaskID: str(l.TaskID), TaskName: l.TaskName, TaskVersionID: str(l.TaskVersionID),
		Digest: l.Digest, GroupID: l.GroupID, ModelID: str(l.ModelID), ModelName: l.ModelName, Status: l.Status, StopReason: l.StopReason,
		Error: l.Error, IsValid: l.IsValid, Reward: l.Reward, Tries: int64(l.Tries), StartTime: l.StartTime, EndTime: l.EndTime,
		Steps: int64(l.Steps), PromptTokens: int64(l.Usage.PromptTokens), CompletionTokens: int64(l.Usage.CompletionTokens)}
	for _, f := range []struct {
		to *string
		v  any
	}{{&r.EvaluationResult, l.EvaluationResult}, {&r.Messages, l.Messages}, {&r.Tools, l.Tools}, {&r.ModelCalls, l.ModelCalls}} {
		b, err := json.Marshal(f.v)
		if err != nil {
			return r, err
		}
		*f.to = string(b)
	}
	return r, nil
}

// abortExport ends an export that cannot go on with the connection cut, not with the end of the
// answer: a stream that ends cleanly reads as complete, while one cut off is seen as such and
// resumed from its last cursor (proctor export, the Python client).
func abortExport() {
	panic(http.ErrAbortHandler)
}

// exportLine is one attempt's line.
func (s *Server) exportLine(ctx context.Context, a *rollouts.ExportedAttempt) (*ExportLine, error) {
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
	calls, err := s.modelCalls(ctx, t.ID, conv)
	if err != nil {
		return nil, err
	}
	return &ExportLine{
		Cursor: exportCursor(t.CreatedAt, t.ID), TraceID: t.ID, JobID: t.JobID, TaskID: t.TaskID, TaskName: a.TaskName, TaskVersionID: t.TaskVersionID,
		Digest: a.Digest, GroupID: t.GroupID, ModelID: t.ModelID, ModelName: a.ModelName, Status: t.Status, StopReason: t.StopReason,
		Error: t.Error, IsValid: t.IsValid, Reward: t.Reward, EvaluationResult: objectOf(t.EvaluationResult), Tries: t.Attempt,
		StartTime: t.StartTime, EndTime: t.EndTime, Messages: conv.Messages, Tools: conv.Tools, Steps: conv.Steps,
		Usage:      ExportUsage{PromptTokens: conv.Usage.InputTokens, CompletionTokens: conv.Usage.OutputTokens},
		ModelCalls: calls,
	}, nil
}

// modelCalls are the kept tokens of the conversation's model calls, in order: only those its
// assistant events name (its last try's), read attempt by attempt.
func (s *Server) modelCalls(ctx context.Context, traceID uuid.UUID, conv *trajectory.Conversation) ([]ExportModelCall, error) {
	out := []ExportModelCall{}
	if len(conv.Kept) == 0 {
		return out, nil
	}
	refs := make([]uuid.UUID, len(conv.Kept))
	for i, k := range conv.Kept {
		refs[i] = k.TokensRef
	}
	kept, err := s.llms.ModelCallTokensOf(ctx, traceID, refs)
	if err != nil {
		return nil, err
	}
	for _, k := range conv.Kept {
		t, ok := kept[k.TokensRef]
		if !ok {
			continue
		}
		c := ExportModelCall{MessageIndex: k.MessageIndex, PromptTokenIDs: rawOrNull(t.PromptTokenIDs), CompletionTokenIDs: rawOrNull(t.CompletionTokenIDs),
			Logprobs: rawOrNull(t.Logprobs), Sampling: rawOrNull(t.Sampling)}
		if p, ok := flatArrayLen(t.PromptTokenIDs); ok {
			if n, ok := flatArrayLen(t.CompletionTokenIDs); ok {
				c.LossMask = make([]int, p+n)
				for i := p; i < p+n; i++ {
					c.LossMask[i] = 1
				}
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// flatArrayLen counts the elements of a JSON array of numbers (token ids) without decoding them;
// ok is false for anything else.
func flatArrayLen(s string) (int, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return 0, false
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	if inner == "" {
		return 0, true
	}
	if strings.ContainsAny(inner, "[]{}\"") {
		return 0, false
	}
	return strings.Count(inner, ",") + 1, true
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

func parseExportCursor(s string) (rollouts.ExportCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return rollouts.ExportCursor{}, err
	}
	ts, id, _ := strings.Cut(string(b), " ")
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return rollouts.ExportCursor{}, err
	}
	u, err := uuid.Parse(id)
	return rollouts.ExportCursor{CreatedAt: t, ID: u}, err
}
