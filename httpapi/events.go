package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
)

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

type eventsOutput struct {
	Body struct {
		Events    []TraceEvent `json:"events" nullable:"false"`
		LatestSeq int          `json:"latest_seq" doc:"The highest seq written so far (-1 before any)"`
		Status    string       `json:"status"`
		Reward    *float64     `json:"reward"`
	}
}

// registerTraceEvents registers the read of a trace's trajectory.
func (s *Server) registerTraceEvents() {
	tags := []string{"Traces"}
	huma.Register(s.v2, op(huma.Operation{
		OperationID: "get-trace-events", Method: http.MethodGet, Path: "/trace/{trace_id}/events", Tags: tags, Summary: "A trace's trajectory",
		Description: "Events ordered by seq. Follow a live attempt by passing the last latest_seq as since_seq.", Errors: []int{http.StatusNotFound},
	}, authOptional), s.getTraceEvents)
}

type eventsInput struct {
	TraceID           uuid.UUID `path:"trace_id"`
	SinceSeq          int       `query:"since_seq" default:"-1" minimum:"-1" doc:"Only events after this seq; pass the last latest_seq to follow a live attempt"`
	IncludeSuperseded bool      `query:"include_superseded" default:"false" doc:"Also the events of failed tries"`
}

// getTraceEvents serves GET /v2/trace/{trace_id}/events: a trace's trajectory.
func (s *Server) getTraceEvents(ctx context.Context, in *eventsInput) (*eventsOutput, error) {
	t, err := s.rollouts.GetTrace(ctx, callerFrom(ctx), in.TraceID)
	if err != nil {
		return nil, storeError(err, "trace")
	}
	// The latest seq is read before the events, so that an event written in between is
	// returned by the next poll rather than skipped.
	latest, err := s.rollouts.LatestSeq(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	evs, err := s.rollouts.TraceEvents(ctx, t.ID, in.SinceSeq, in.IncludeSuperseded)
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
