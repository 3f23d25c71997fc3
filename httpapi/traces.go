package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

// Trace is the record of one attempt (spec: Resources › Trace).
type Trace struct {
	ID                  uuid.UUID      `json:"id"`
	JobID               uuid.UUID      `json:"job_id"`
	TaskID              *uuid.UUID     `json:"task_id"`
	TaskVersionID       *uuid.UUID     `json:"task_version_id"`
	GroupID             string         `json:"group_id"`
	Name                string         `json:"name"`
	Status              string         `json:"status" enum:"pending,initializing,running,completed,error,cancelling,cancelled"`
	CreatedAt           time.Time      `json:"created_at"`
	StartTime           *time.Time     `json:"start_time"`
	EndTime             *time.Time     `json:"end_time"`
	Error               string         `json:"error"`
	InferenceLLMModelID *uuid.UUID     `json:"inference_llm_model_id"`
	InstanceID          *uuid.UUID     `json:"instance_id"`
	Metadata            map[string]any `json:"metadata"`
	Reward              *float64       `json:"reward"`
	StopReason          string         `json:"stop_reason" example:"done"`
	IsValid             bool           `json:"is_valid"`
	Attempt             int            `json:"attempt" doc:"Tries so far: infrastructure failures retry the attempt in a fresh sandbox"`
}

func traceFrom(r *models.TraceRow) Trace {
	return Trace{ID: r.ID, JobID: r.JobID, TaskID: r.TaskID, TaskVersionID: r.TaskVersionID, GroupID: r.GroupID, Name: r.Name,
		Status: r.Status, CreatedAt: r.CreatedAt, StartTime: r.StartTime, EndTime: r.EndTime, Error: forReader(r, r.Error),
		InferenceLLMModelID: r.ModelID, InstanceID: r.InstanceID, Metadata: nonNilMap(r.Metadata), Reward: r.Reward,
		StopReason: r.StopReason, IsValid: r.IsValid, Attempt: r.Attempt}
}

// TraceInfo is a trace with its environment and evaluation (spec: Trace info).
type TraceInfo struct {
	Trace
	ExecutionMode    string    `json:"execution_mode" example:"hosted" doc:"hosted: Proctor's workers ran the environment and the agent"`
	Environment      *TraceEnv `json:"environment" doc:"the environment and build its sandbox runs (before it starts: the environment's latest build); null when its task names none"`
	CanEdit          bool      `json:"can_edit"`
	Description      string    `json:"description"`
	JobName          string    `json:"job_name"`
	EvaluationResult object    `json:"evaluation_result" nullable:"true"`
}

// TraceEvent is one step of a trajectory (spec: Trace event).
type TraceEvent struct {
	ID         string       `json:"id"`
	Seq        int          `json:"seq"`
	Kind       string       `json:"kind" example:"user_message"`
	Text       string       `json:"text"`
	ParentID   string       `json:"parent_id"`
	Data       object       `json:"data" doc:"The step's structured content: tool name and arguments, tool results, usage"`
	Attempt    int          `json:"attempt"`
	StartedAt  time.Time    `json:"started_at"`
	EndedAt    *time.Time   `json:"ended_at"`
	Superseded bool         `json:"superseded,omitempty" doc:"From a failed try of the attempt (only with include_superseded)"`
	Images     []EventImage `json:"images,omitempty" doc:"The images of a tool result, as the model was shown them"`
}

// EventImage is an image of a trace event.
type EventImage struct {
	URL      string `json:"url,omitempty" doc:"Where to GET the image, valid for 15 minutes; absent when the image was not kept"`
	MIMEType string `json:"mime_type" example:"image/png"`
	Size     int    `json:"size" doc:"In bytes"`
	SHA256   string `json:"sha256"`
}

type tracePath struct {
	TraceID uuid.UUID `path:"trace_id"`
}

type traceOutput struct{ Body Trace }

type traceInfoOutput struct{ Body TraceInfo }

type eventsOutput struct {
	Body struct {
		Events    []TraceEvent `json:"events" nullable:"false"`
		LatestSeq int          `json:"latest_seq" doc:"The highest seq written so far (-1 before any)"`
		Status    string       `json:"status"`
		Reward    *float64     `json:"reward"`
	}
}

type workerLogsOutput struct {
	Body struct {
		TraceID uuid.UUID `json:"trace_id"`
		Logs    string    `json:"logs"`
	}
}

// EnvLogLine is one line the environment wrote.
type EnvLogLine struct {
	Stream string    `json:"stream" example:"stderr"`
	Log    string    `json:"log"`
	Time   time.Time `json:"time"`
	Seq    int       `json:"seq"`
}

type envLogsOutput struct {
	Body struct {
		TraceID       uuid.UUID    `json:"trace_id"`
		Logs          []EnvLogLine `json:"logs" nullable:"false"`
		Count         int          `json:"count"`
		HasMore       bool         `json:"has_more"`
		LastTimestamp int64        `json:"last_timestamp" doc:"Unix milliseconds of the last line returned; pass it as after_timestamp to read on. On an empty page, the request's after_timestamp (0 when it gave none)"`
		StillRunning  bool         `json:"still_running" doc:"The attempt is live: more lines may come"`
	}
}

func (s *Server) registerTraces() {
	tags := []string{"Traces"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace", Method: http.MethodGet, Path: "/trace/{trace_id}", Tags: tags, Summary: "Get a trace",
		Description: "A trace of a published job needs no credentials.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTrace)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-info", Method: http.MethodGet, Path: "/trace/{trace_id}/info", Tags: tags, Summary: "Get a trace with its evaluation",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceInfo)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "update-trace", Method: http.MethodPatch, Path: "/trace/{trace_id}", Tags: tags, Summary: "Rename or describe a trace",
		Errors: []int{http.StatusForbidden, http.StatusNotFound},
	}, authKeyOrSession), s.updateTrace)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-events", Method: http.MethodGet, Path: "/trace/{trace_id}/events", Tags: tags, Summary: "A trace's trajectory",
		Description: "Events ordered by seq. Follow a live attempt by passing the last latest_seq as since_seq.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceEvents)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-logs", Method: http.MethodGet, Path: "/trace/{trace_id}/logs", Tags: tags, Summary: "The worker's log of an attempt",
		Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceLogs)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-env-logs", Method: http.MethodGet, Path: "/trace/{trace_id}/env-logs", Tags: tags, Summary: "The environment's output",
		Description: "What the environment wrote to stderr (stdout is its MCP stream), in the order written. To read every line, pass each page's " +
			"last_timestamp as after_timestamp (a Proctor extension) until has_more is false, and, while still_running, poll on; or pass the " +
			"last line's seq as after_seq. Lines can share a millisecond, so a page never ends inside one: it stops before the first millisecond " +
			"it cannot hold whole (a millisecond of more than limit lines is a page of its own, longer than limit), and a page read by " +
			"after_timestamp while the attempt runs holds back the latest millisecond, whose lines may still be arriving. Either cursor thus " +
			"reads each line once; to follow a live attempt by timestamp from its first line, start with after_timestamp=0.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceEnvLogs)
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "batch-validate-traces", Method: http.MethodPost, Path: "/trace/batch-validate", Tags: tags, Summary: "Mark traces valid or invalid",
		Description: "Applies to the listed traces of the caller's team; others are ignored. Invalid traces do not count toward scores.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, authKeyOrSession), s.batchValidateTraces)
}

// getTrace serves GET /v2/trace/{trace_id}: get a trace.
func (s *Server) getTrace(ctx context.Context, in *tracePath) (*traceOutput, error) {
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return &traceOutput{Body: traceFrom(t)}, nil
}

// getTraceInfo serves GET /v2/trace/{trace_id}/info: get a trace with its evaluation.
func (s *Server) getTraceInfo(ctx context.Context, in *tracePath) (*traceInfoOutput, error) {
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return s.traceInfo(ctx, t)
}

type patchTraceInput struct {
	TraceID uuid.UUID `path:"trace_id"`
	Body    struct {
		Name        *string `json:"name,omitempty" maxLength:"200"`
		Description *string `json:"description,omitempty" maxLength:"10000"`
	}
}

// updateTrace serves PATCH /v2/trace/{trace_id}: rename or describe a trace.
func (s *Server) updateTrace(ctx context.Context, in *patchTraceInput) (*traceInfoOutput, error) {
	t, err := s.store.UpdateTraceText(ctx, callerFrom(ctx), in.TraceID, in.Body.Name, in.Body.Description)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	return s.traceInfo(ctx, t)
}

type eventsInput struct {
	TraceID           uuid.UUID `path:"trace_id"`
	SinceSeq          int       `query:"since_seq" default:"-1" minimum:"-1" doc:"Only events after this seq; pass the last latest_seq to follow a live attempt"`
	IncludeSuperseded bool      `query:"include_superseded" default:"false" doc:"Also the events of failed tries"`
}

// getTraceEvents serves GET /v2/trace/{trace_id}/events: a trace's trajectory.
func (s *Server) getTraceEvents(ctx context.Context, in *eventsInput) (*eventsOutput, error) {
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	// The latest seq is read before the events, so that an event written in between is
	// returned by the next poll rather than skipped.
	latest, err := s.store.LatestSeq(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	evs, err := s.store.TraceEvents(ctx, t.ID, in.SinceSeq, in.IncludeSuperseded)
	if err != nil {
		return nil, err
	}
	out := &eventsOutput{}
	out.Body.Events, out.Body.LatestSeq, out.Body.Status, out.Body.Reward = []TraceEvent{}, latest, t.Status, t.Reward
	for i := range evs {
		if evs[i].Seq > latest {
			break
		}
		ev, err := s.traceEvent(ctx, &evs[i])
		if err != nil {
			return nil, err
		}
		out.Body.Events = append(out.Body.Events, ev)
	}
	return out, nil
}

// traceEvent is a stored event as the API serves it, its images with URLs to GET them.
func (s *Server) traceEvent(ctx context.Context, e *models.TraceEvent) (TraceEvent, error) {
	ev := TraceEvent{ID: e.ID, Seq: e.Seq, Kind: e.Kind, Text: e.Text, ParentID: e.ParentID,
		Data: nonNilObject(e.Data), Attempt: e.Attempt, StartedAt: e.StartedAt, EndedAt: e.EndedAt, Superseded: e.Superseded}
	for _, im := range e.Images() {
		out := EventImage{MIMEType: im.MIMEType, Size: im.Size, SHA256: im.SHA256}
		if im.Key != "" && s.bucket != nil {
			url, err := s.bucket.SignedURL(ctx, im.Key, http.MethodGet, downloadURLTTL)
			if err != nil {
				return ev, fmt.Errorf("sign the URL of image %s: %w", im.Key, err)
			}
			out.URL = url
		}
		ev.Images = append(ev.Images, out)
	}
	return ev, nil
}

// getTraceLogs serves GET /v2/trace/{trace_id}/logs: the worker's log of an attempt.
func (s *Server) getTraceLogs(ctx context.Context, in *tracePath) (*workerLogsOutput, error) {
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	var b strings.Builder
	after := -1
	for {
		lines, more, err := s.store.TraceLogs(ctx, t.ID, models.LogWorker, after, 5000)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			b.WriteString(l.Time.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
			b.WriteString(forReader(t, l.Line))
			b.WriteByte('\n')
			after = l.Seq
		}
		if !more {
			break
		}
	}
	out := &workerLogsOutput{}
	out.Body.TraceID, out.Body.Logs = t.ID, b.String()
	return out, nil
}

type envLogsInput struct {
	TraceID        uuid.UUID `path:"trace_id"`
	AfterSeq       int       `query:"after_seq" default:"-1" minimum:"-1" doc:"Only lines after this seq (the last page's last seq)"`
	AfterTimestamp int64     `query:"after_timestamp" default:"-1" minimum:"-1" doc:"Proctor extension: only lines written after those stamped in this Unix millisecond or earlier: the last page's last_timestamp. Not with after_seq"`
	Limit          int       `query:"limit" minimum:"1" maximum:"5000" default:"1000"`
}

// Resolve refuses two cursors at once.
func (in *envLogsInput) Resolve(huma.Context) []error {
	if in.AfterSeq >= 0 && in.AfterTimestamp >= 0 {
		return []error{&huma.ErrorDetail{Location: "query.after_timestamp", Message: "give after_seq or after_timestamp, not both", Value: in.AfterTimestamp}}
	}
	return nil
}

// getTraceEnvLogs serves GET /v2/trace/{trace_id}/env-logs: the environment's output.
func (s *Server) getTraceEnvLogs(ctx context.Context, in *envLogsInput) (*envLogsOutput, error) {
	t, err := s.store.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	running := !models.Terminal(t.Status)
	cur := models.LogCursor{AfterSeq: in.AfterSeq}
	if in.AfterTimestamp >= 0 {
		cur.AfterMilli = &in.AfterTimestamp
	}
	page, err := s.store.TraceLogPage(ctx, t.ID, models.LogEnv, cur, in.Limit, running && cur.AfterMilli != nil)
	if err != nil {
		return nil, err
	}
	out := &envLogsOutput{}
	out.Body.TraceID, out.Body.Logs, out.Body.Count, out.Body.HasMore = t.ID, []EnvLogLine{}, len(page.Lines), page.HasMore
	out.Body.StillRunning, out.Body.LastTimestamp = running, max(in.AfterTimestamp, 0)
	for _, l := range page.Lines {
		out.Body.Logs = append(out.Body.Logs, EnvLogLine{Stream: l.Stream, Log: l.Line, Time: l.Time, Seq: l.Seq})
		out.Body.LastTimestamp = l.Time.UnixMilli()
	}
	return out, nil
}

type batchValidateInput struct {
	Body struct {
		TraceIDs []uuid.UUID `json:"trace_ids" minItems:"1" maxItems:"10000"`
		IsValid  bool        `json:"is_valid"`
	}
}

// batchValidateTraces serves POST /v2/trace/batch-validate: mark traces valid or invalid.
func (s *Server) batchValidateTraces(ctx context.Context, in *batchValidateInput) (*updatedCount, error) {
	n, err := s.store.SetTracesValidity(ctx, callerFrom(ctx), in.Body.TraceIDs, in.Body.IsValid)
	if err != nil {
		return nil, err
	}
	out := &updatedCount{}
	out.Body.UpdatedCount = n
	return out, nil
}

// TraceEnv is the environment of an attempt (spec: Trace info › environment).
type TraceEnv struct {
	ID            uuid.UUID  `json:"id"`
	Name          string     `json:"name"`
	BuildDigest   *string    `json:"build_digest"`
	BuildID       *uuid.UUID `json:"build_id"`
	BuildVersion  *int       `json:"build_version"`
	CanViewSource bool       `json:"can_view_source" doc:"the build's source can be downloaded (GET /v2/registry/{id}/source-url)"`
	RegistryType  string     `json:"registry_type"`
}

func (s *Server) traceInfo(ctx context.Context, t *models.TraceRow) (*traceInfoOutput, error) {
	out := &traceInfoOutput{Body: TraceInfo{Trace: traceFrom(t), ExecutionMode: "hosted", CanEdit: t.CanEdit, Description: t.Description,
		JobName: t.JobName, EvaluationResult: objectOf(t.EvaluationResult)}}
	env, err := s.store.EnvironmentOfTrace(ctx, callerFrom(ctx), t)
	if err != nil {
		return nil, err
	}
	if env != nil {
		e := &TraceEnv{ID: env.Registry.ID, Name: env.Registry.Name, CanViewSource: env.CanViewSource, RegistryType: env.Registry.RegistryType}
		if b := env.Build; b != nil {
			e.BuildID, e.BuildVersion = &b.ID, &b.Version
			if b.Digest != "" {
				e.BuildDigest = &b.Digest
			}
		}
		out.Body.Environment = e
	}
	return out, nil
}

// RelatedModel is the model of a related trace.
type RelatedModel struct {
	ID           *uuid.UUID `json:"id"`
	Name         string     `json:"name"`
	IconURL      string     `json:"icon_url"`
	ModelName    string     `json:"model_name"`
	ProviderName string     `json:"provider_name"`
}

// RelatedTrace is a row of GET /v2/trace/{trace_id}/related.
type RelatedTrace struct {
	Trace
	JobName string       `json:"job_name"`
	Model   RelatedModel `json:"model"`
}

// FailedSpan is a step of the trajectory that failed.
type FailedSpan struct {
	Seq   int    `json:"seq"`
	Error string `json:"error"`
}

// AnalysisContext is what a person or a model needs to understand an attempt.
type AnalysisContext struct {
	TraceID          uuid.UUID      `json:"trace_id"`
	Status           string         `json:"status"`
	EnvLogs          []EnvLogLine   `json:"env_logs" nullable:"false"`
	WorkerLogs       []string       `json:"worker_logs" nullable:"false"`
	Error            string         `json:"error"`
	EvaluationResult object         `json:"evaluation_result" nullable:"true"`
	FailedSpans      []FailedSpan   `json:"failed_spans" nullable:"false"`
	JobID            uuid.UUID      `json:"job_id"`
	Metadata         map[string]any `json:"metadata"`
	Prompt           string         `json:"prompt"`
	RegistryID       *uuid.UUID     `json:"registry_id"`
	Reward           *float64       `json:"reward"`
	ScenarioArgs     map[string]any `json:"scenario_args"`
	Events           []TraceEvent   `json:"events,omitempty" doc:"The trajectory, ordered by seq, its images with URLs (with include_events)"`
}

// analysisLogLines bounds the logs an analysis bundle carries: the last lines matter most.
const analysisLogLines = 500

func (s *Server) registerTraceAnalysis() {
	tags := []string{"Traces"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-related-traces", Method: http.MethodGet, Path: "/trace/{trace_id}/related", Tags: tags, Summary: "Traces related to one",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, authOptional), s.getRelatedTraces)

	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-analysis-context", Method: http.MethodGet, Path: "/trace/{trace_id}/analysis-context", Tags: tags,
		Summary:     "Everything needed to analyse an attempt",
		Description: "The prompt, the scenario's arguments, the failed steps, the evaluation, the last lines of the environment's and the worker's logs, and the trajectory's events with their images.",
		Errors:      []int{http.StatusNotFound},
	}, authKeyOrSession), s.getTraceAnalysisContext)
}

type relatedInput struct {
	TraceID    uuid.UUID `path:"trace_id"`
	Kind       string    `query:"kind" required:"true" enum:"job,task,recent,discover" doc:"job: same job; task: every version of the same task; recent: the caller's own traces (needs credentials); discover: the most recent visible traces"`
	Limit      int       `query:"limit" minimum:"1" maximum:"500" default:"50"`
	ScopeToJob bool      `query:"scope_to_job" default:"false" doc:"With kind=task, only traces of the same job"`
	Status     string    `query:"status" maxLength:"200" doc:"Comma-separated whitelist of trace statuses"`
	Order      string    `query:"order" enum:"asc,desc" default:"desc" doc:"By created_at"`
}

// Resolve checks the statuses of the comma-separated status filter.
func (in *relatedInput) Resolve(huma.Context) []error {
	var errs []error
	for _, st := range strings.Split(in.Status, ",") {
		if st = strings.TrimSpace(st); st != "" && !slices.Contains(models.TraceStatuses, st) {
			errs = append(errs, &huma.ErrorDetail{Location: "query.status", Value: st,
				Message: "unknown trace status " + st + "; statuses are " + strings.Join(models.TraceStatuses, ", ")})
		}
	}
	return errs
}

// getRelatedTraces serves GET /v2/trace/{trace_id}/related: traces related to one.
func (s *Server) getRelatedTraces(ctx context.Context, in *relatedInput) (*struct{ Body []RelatedTrace }, error) {
	c := callerFrom(ctx)
	anchor, err := s.store.GetTrace(ctx, c, in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	if in.Kind == models.RelatedRecent && c == nil {
		return nil, newAPIError(http.StatusUnauthorized, "kind=recent lists the caller's own traces: send an API key")
	}
	q := models.RelatedQuery{Kind: in.Kind, ScopeToJob: in.ScopeToJob, Ascending: in.Order == "asc", Limit: in.Limit}
	for _, st := range strings.Split(in.Status, ",") {
		if st = strings.TrimSpace(st); st != "" {
			q.Statuses = append(q.Statuses, st)
		}
	}
	rows, err := s.store.RelatedTraces(ctx, c, anchor, q)
	if err != nil {
		return nil, storeErrorIn(err, "query", "trace")
	}
	out := &struct{ Body []RelatedTrace }{Body: []RelatedTrace{}}
	for i := range rows {
		r := &rows[i]
		m := RelatedModel{ID: r.ModelID, Name: deref(r.ModelLabel), ModelName: deref(r.ModelName), ProviderName: deref(r.ModelProvider)}
		out.Body = append(out.Body, RelatedTrace{Trace: traceFrom(&r.TraceRow), JobName: r.JobName, Model: m})
	}
	return out, nil
}

type analysisInput struct {
	TraceID           uuid.UUID `path:"trace_id"`
	IncludeSpans      bool      `query:"include_spans" default:"true"`
	IncludeEnvLogs    bool      `query:"include_env_logs" default:"true"`
	IncludeWorkerLogs bool      `query:"include_worker_logs" default:"true"`
	IncludeEvents     bool      `query:"include_events" default:"true" doc:"The trajectory's events, as GET /v2/trace/{trace_id}/events serves them"`
}

// getTraceAnalysisContext serves GET /v2/trace/{trace_id}/analysis-context: everything needed to analyse an attempt.
func (s *Server) getTraceAnalysisContext(ctx context.Context, in *analysisInput) (*struct{ Body AnalysisContext }, error) {
	c := callerFrom(ctx)
	t, err := s.store.GetTrace(ctx, c, in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	out := AnalysisContext{TraceID: t.ID, Status: t.Status, Error: forReader(t, t.Error), EvaluationResult: objectOf(t.EvaluationResult), JobID: t.JobID,
		Metadata: nonNilMap(t.Metadata), Reward: t.Reward, EnvLogs: []EnvLogLine{}, WorkerLogs: []string{}, FailedSpans: []FailedSpan{},
		ScenarioArgs: map[string]any{}}
	if t.TaskVersionID != nil {
		if v, err := s.store.GetTaskVersion(ctx, c, *t.TaskVersionID); err == nil {
			out.RegistryID, out.ScenarioArgs, out.Prompt = v.RegistryID, nonNilMap(v.Args), v.Prompt
		}
	}
	if t.ScenarioArgs != nil {
		out.ScenarioArgs = t.ScenarioArgs // the launch's, merged over the version's
	}
	evs, err := s.store.TraceEvents(ctx, t.ID, -1, false)
	if err != nil {
		return nil, err
	}
	for i := range evs {
		e := &evs[i]
		if e.Kind == models.EventUser && out.Prompt == "" {
			out.Prompt = e.Text
		}
		if in.IncludeSpans && (e.Failed() || e.Kind == models.EventError) {
			out.FailedSpans = append(out.FailedSpans, FailedSpan{Seq: e.Seq, Error: forReader(t, e.Text)})
		}
		if in.IncludeEvents {
			ev, err := s.traceEvent(ctx, e)
			if err != nil {
				return nil, err
			}
			out.Events = append(out.Events, ev)
		}
	}
	tail := func(source string) ([]models.TraceLog, error) {
		var all []models.TraceLog
		after := -1
		for {
			lines, more, err := s.store.TraceLogs(ctx, t.ID, source, after, 5000)
			if err != nil {
				return nil, err
			}
			all = append(all, lines...)
			if len(all) > analysisLogLines {
				all = all[len(all)-analysisLogLines:]
			}
			if !more || len(lines) == 0 {
				return all, nil
			}
			after = lines[len(lines)-1].Seq
		}
	}
	if in.IncludeEnvLogs {
		lines, err := tail(models.LogEnv)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out.EnvLogs = append(out.EnvLogs, EnvLogLine{Stream: l.Stream, Log: l.Line, Time: l.Time, Seq: l.Seq})
		}
	}
	if in.IncludeWorkerLogs {
		lines, err := tail(models.LogWorker)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out.WorkerLogs = append(out.WorkerLogs, l.Time.UTC().Format(time.RFC3339Nano)+" "+forReader(t, l.Line))
		}
	}
	return &struct{ Body AnalysisContext }{Body: out}, nil
}
