package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models/rollouts"
)

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

// registerTraceLogs registers the reads of an attempt's logs: the worker's and the environment's.
func (s *Server) registerTraceLogs() {
	tags := []string{"Traces"}
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
}

// getTraceLogs serves GET /v2/trace/{trace_id}/logs: the worker's log of an attempt.
func (s *Server) getTraceLogs(ctx context.Context, in *tracePath) (*workerLogsOutput, error) {
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	var b strings.Builder
	after := -1
	for {
		lines, more, err := s.rollouts.TraceLogs(ctx, t.ID, rollouts.LogWorker, after, 5000)
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
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	running := !rollouts.Terminal(t.Status)
	cur := rollouts.LogCursor{AfterSeq: in.AfterSeq}
	if in.AfterTimestamp >= 0 {
		cur.AfterMilli = &in.AfterTimestamp
	}
	page, err := s.rollouts.TraceLogPage(ctx, t.ID, rollouts.LogEnv, cur, in.Limit, running && cur.AfterMilli != nil)
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
