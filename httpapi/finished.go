package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// How the stream of a job's finished attempts reads them: a page at a time, the store polled
// while the job runs (the numbers are in the store, so any server resumes any stream), and a
// comment sent when nothing else was, so that proxies keep the connection.
const (
	finishedPage      = 200
	finishedPoll      = 500 * time.Millisecond
	finishedKeepAlive = 15 * time.Second
)

// registerFinished registers the stream of a job's finished attempts (a Proctor extension).
func (s *Server) registerFinished() {
	o := op(huma.Operation{
		OperationID: "stream-finished-attempts", Method: http.MethodGet, Path: "/jobs/{job_id}/finished", Tags: []string{"Jobs"},
		Summary: "Stream a job's attempts as they end (Proctor extension)",
		Description: "Server-sent events (`text/event-stream`): one `attempt` event for each attempt of the job that has ended, in the " +
			"order they were seen to end, as they end: its trace, task, group, status, stop reason and reward, and whether it was the " +
			"last of its group to end (`group_complete`: every member of the group has ended, whatever its status). Each event's " +
			"`id` is the attempt's number in the job's sequence, the same on every server and after a restart: reconnect with the " +
			"`Last-Event-ID` header (or `after`) set to the last id read, and the stream goes on from there with nothing lost or " +
			"repeated. Once the job has ended and every attempt that ended has been sent, an `end` event says so (and how many never " +
			"ended) and the stream closes; a server that shuts down closes it too, and the client resumes. Jobs built up by " +
			"rollouts/submit have no groups known to be whole: they are a 422.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, authKeyOrSession)
	huma.Register(s.v2, o, s.streamFinished)
	doc := s.api.OpenAPI().Paths["/v2/jobs/{job_id}/finished"].Get
	// The schema is that of one event's data: an attempt event's, or the end event's.
	schemas := s.api.OpenAPI().Components.Schemas
	doc.Responses["200"] = &huma.Response{Description: "`attempt` events (data: FinishedAttemptEvent), then one `end` event (data: FinishedEndEvent)",
		Content: map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{OneOf: []*huma.Schema{
			schemas.Schema(reflect.TypeFor[FinishedAttemptEvent](), true, "FinishedAttemptEvent"),
			schemas.Schema(reflect.TypeFor[FinishedEndEvent](), true, "FinishedEndEvent"),
		}}}}}
}

type finishedInput struct {
	JobID       uuid.UUID `path:"job_id"`
	After       int64     `query:"after" minimum:"0" doc:"resume after the attempt event of this id (Last-Event-ID, when sent, wins)"`
	LastEventID string    `header:"Last-Event-ID" doc:"the id of the last event read: the stream goes on after it"`
}

// FinishedAttemptEvent is the data of an `attempt` event: one ended attempt.
type FinishedAttemptEvent struct {
	Seq           int64      `json:"seq" doc:"the attempt's number in the job's sequence of ended attempts, from 1; the event's id"`
	TraceID       uuid.UUID  `json:"trace_id"`
	TaskID        *uuid.UUID `json:"task_id"`
	TaskVersionID *uuid.UUID `json:"task_version_id"`
	ModelID       *uuid.UUID `json:"model_id"`
	GroupID       string     `json:"group_id"`
	GroupSize     int        `json:"group_size" doc:"the job's attempts in the group (1 without a group)"`
	GroupComplete bool       `json:"group_complete" doc:"true on the last of the group's attempts to end: every one of them has ended"`
	Status        string     `json:"status" enum:"completed,error,cancelled"`
	StopReason    string     `json:"stop_reason"`
	Error         string     `json:"error" doc:"why an attempt that ended in error did"`
	Reward        *float64   `json:"reward"`
	IsValid       bool       `json:"is_valid"`
	EndTime       *time.Time `json:"end_time"`
	RetryOf       *uuid.UUID `json:"retry_of" doc:"the failed attempt this one runs again (POST /v2/jobs/{id}/retry), which has left its group; null for others"`
}

// FinishedEndEvent is the data of the `end` event: the job ended, and every attempt that ended
// was sent.
type FinishedEndEvent struct {
	JobStatus string `json:"job_status"`
	Attempts  int64  `json:"attempts" doc:"the attempts the stream has numbered, all sent"`
	Open      int64  `json:"open" doc:"attempts of the ended job that never ended (one that never started, say): not sent"`
}

// streamFinished serves GET /v2/jobs/{job_id}/finished.
func (s *Server) streamFinished(ctx context.Context, in *finishedInput) (*huma.StreamResponse, error) {
	job, err := s.rollouts.GetJob(ctx, callerFrom(ctx), in.JobID)
	if err != nil {
		return nil, storeError(err, "job")
	}
	if job.Kind == models.JobRemote {
		// Attempts submitted one by one, to groups the client names, have no group that is ever
		// known to be whole, nor a job that is known to be over.
		return nil, huma.Error422UnprocessableEntity("job " + in.JobID.String() + " is built up by rollouts/submit: its groups are never known to be whole; " +
			"follow a run_list or rollouts/run job, or list this one's traces")
	}
	after := in.After
	if in.LastEventID != "" {
		n, err := strconv.ParseInt(in.LastEventID, 10, 64)
		if err != nil || n < 0 {
			return nil, validation("header.Last-Event-ID", "not an event id of this stream: send the id of the last event read", in.LastEventID)
		}
		after = n
	}
	// The first page is read before the answer starts, so that a failure is an error answer.
	page, err := s.rollouts.FinishedAttempts(ctx, in.JobID, after, finishedPage)
	if err != nil {
		return nil, err
	}
	return &huma.StreamResponse{Body: func(hctx huma.Context) {
		hctx.SetHeader("Content-Type", "text/event-stream")
		hctx.SetHeader("Cache-Control", "no-store")
		hctx.SetHeader("X-Accel-Buffering", "no") // a proxy that buffers answers would hold every event
		w := hctx.BodyWriter().(http.ResponseWriter)
		f := &finishedStream{s: s, jobID: in.JobID, w: w, rc: http.NewResponseController(w), ctx: hctx.Context(), after: after, quiet: time.Now()}
		f.rc.Flush() //nolint:errcheck // the headers now, not with the first event
		f.run(page)
	}}, nil
}

// finishedStream writes one client's stream of a job's finished attempts.
type finishedStream struct {
	s     *Server
	jobID uuid.UUID
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	// after is the last event sent; quiet is when the client was last written to.
	after int64
	quiet time.Time
}

// run sends page, then every attempt as it is numbered, until the job has ended and every
// attempt that ended before it was sent, the client goes away or the server shuts down.
func (f *finishedStream) run(page []rollouts.FinishedAttempt) {
	// ended: the job had ended before the last page was read. That read numbered every attempt
	// that ended before the job did, so once it is sent the stream is over (an attempt still
	// open, one that never started, is counted in the end event, not awaited).
	ended := false
	for {
		// A job runs for as long as it takes: no write deadline of the server's cuts it.
		f.rc.SetWriteDeadline(time.Now().Add(finishedKeepAlive * 4)) //nolint:errcheck // a writer without deadlines
		if !f.send(page) {
			return
		}
		if len(page) < finishedPage {
			var over bool
			if over, ended = f.caughtUp(ended); over {
				return
			}
		}
		var err error
		if page, err = f.s.rollouts.FinishedAttempts(f.ctx, f.jobID, f.after, finishedPage); err != nil {
			if f.ctx.Err() == nil {
				f.s.log.ErrorContext(f.ctx, "finished attempts", "job", f.jobID, "error", err)
			}
			return
		}
	}
}

// send writes a page of attempt events; false when the client went away.
func (f *finishedStream) send(page []rollouts.FinishedAttempt) bool {
	for _, a := range page {
		data, _ := json.Marshal(FinishedAttemptEvent{Seq: a.Seq, TraceID: a.TraceID, TaskID: a.TaskID, TaskVersionID: a.TaskVersionID,
			ModelID: a.ModelID, GroupID: a.GroupID, GroupSize: a.GroupSize, GroupComplete: a.GroupComplete, Status: a.Status,
			StopReason: a.StopReason, Error: a.Error, Reward: a.Reward, IsValid: a.IsValid, EndTime: a.EndTime, RetryOf: a.RetryOf})
		if _, err := fmt.Fprintf(f.w, "id: %d\nevent: attempt\ndata: %s\n\n", a.Seq, data); err != nil {
			return false
		}
		f.after, f.quiet = a.Seq, time.Now()
	}
	if len(page) > 0 {
		f.rc.Flush() //nolint:errcheck
	}
	return true
}

// caughtUp is called once every attempt numbered so far was sent. When the job had ended before
// the last read (ended), it sends the end event and the stream is over; else it says whether the
// job has ended now and, while it runs, waits a poll (a comment line when the stream was quiet
// for finishedKeepAlive). The stream is over too when the client or the server goes away.
func (f *finishedStream) caughtUp(ended bool) (over, nowEnded bool) {
	st, err := f.s.rollouts.JobFinishState(f.ctx, f.jobID)
	if err != nil {
		f.s.log.ErrorContext(f.ctx, "finished attempts", "job", f.jobID, "error", err)
		return true, ended
	}
	if ended {
		data, _ := json.Marshal(FinishedEndEvent{JobStatus: st.Status, Attempts: st.Numbered, Open: int64(st.Attempts) - st.Numbered})
		fmt.Fprintf(f.w, "event: end\ndata: %s\n\n", data) //nolint:errcheck // the stream ends either way
		f.rc.Flush()                                       //nolint:errcheck
		return true, true
	}
	if rollouts.JobEnded(st.Status) {
		return false, true
	}
	if time.Since(f.quiet) >= finishedKeepAlive {
		if _, err := fmt.Fprint(f.w, ": waiting for attempts to end\n\n"); err != nil {
			return true, false
		}
		f.rc.Flush() //nolint:errcheck
		f.quiet = time.Now()
	}
	select {
	case <-f.ctx.Done():
		return true, false
	case <-f.s.streamsEnd:
		return true, false // the server is shutting down: the client resumes from the last id
	case <-time.After(finishedPoll):
	}
	return false, false
}
