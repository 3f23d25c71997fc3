package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

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
		if st = strings.TrimSpace(st); st != "" && !slices.Contains(rollouts.TraceStatuses, st) {
			errs = append(errs, &huma.ErrorDetail{Location: "query.status", Value: st,
				Message: "unknown trace status " + st + "; statuses are " + strings.Join(rollouts.TraceStatuses, ", ")})
		}
	}
	return errs
}

// getRelatedTraces serves GET /v2/trace/{trace_id}/related: traces related to one.
func (s *Server) getRelatedTraces(ctx context.Context, in *relatedInput) (*struct{ Body []RelatedTrace }, error) {
	c := callerFrom(ctx)
	anchor, err := s.rollouts.GetTrace(ctx, c, in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	if in.Kind == rollouts.RelatedRecent && c == nil {
		return nil, newAPIError(http.StatusUnauthorized, "kind=recent lists the caller's own traces: send an API key")
	}
	q := rollouts.RelatedQuery{Kind: in.Kind, ScopeToJob: in.ScopeToJob, Ascending: in.Order == "asc", Limit: in.Limit}
	for _, st := range strings.Split(in.Status, ",") {
		if st = strings.TrimSpace(st); st != "" {
			q.Statuses = append(q.Statuses, st)
		}
	}
	rows, err := s.rollouts.RelatedTraces(ctx, c, anchor, q)
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
	t, err := s.rollouts.GetTrace(ctx, c, in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	out := AnalysisContext{TraceID: t.ID, Status: t.Status, Error: forReader(t, t.Error), EvaluationResult: objectOf(t.EvaluationResult), JobID: t.JobID,
		Metadata: nonNilMap(t.Metadata), Reward: t.Reward, EnvLogs: []EnvLogLine{}, WorkerLogs: []string{}, FailedSpans: []FailedSpan{},
		ScenarioArgs: map[string]any{}}
	if t.TaskVersionID != nil {
		if v, err := s.catalog.GetTaskVersion(ctx, c, *t.TaskVersionID); err == nil {
			out.RegistryID, out.ScenarioArgs, out.Prompt = v.RegistryID, nonNilMap(v.Args), v.Prompt
		}
	}
	if t.ScenarioArgs != nil {
		out.ScenarioArgs = t.ScenarioArgs // the launch's, merged over the version's
	}
	evs, err := s.rollouts.TraceEvents(ctx, t.ID, -1, false)
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
			lines, more, err := s.rollouts.TraceLogs(ctx, t.ID, source, after, 5000)
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
		lines, err := tail(rollouts.LogEnv)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out.EnvLogs = append(out.EnvLogs, EnvLogLine{Stream: l.Stream, Log: l.Line, Time: l.Time, Seq: l.Seq})
		}
	}
	if in.IncludeWorkerLogs {
		lines, err := tail(rollouts.LogWorker)
		if err != nil {
			return nil, err
		}
		for _, l := range lines {
			out.WorkerLogs = append(out.WorkerLogs, l.Time.UTC().Format(time.RFC3339Nano)+" "+forReader(t, l.Line))
		}
	}
	return &struct{ Body AnalysisContext }{Body: out}, nil
}
