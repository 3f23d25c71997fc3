package activities

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// liveEnv is an environment this worker runs for one try of an attempt.
type liveEnv struct {
	attempt int
	// startedBy is the attempt of the StartEnvironment activity that started it.
	startedBy int32
	sb        sandbox.Sandbox
	env       *agent.Env
	tools     []agent.Tool
	evaluate  []agent.Call
	// prompt is the task's prompt as the try's opening user event holds it.
	prompt   string
	logs     *logSink
	instance uuid.UUID
	// egress is the sandbox's way out to the network, nil when its task allows none.
	egress *egressServer
	// redact takes the launching member's secrets out of what the try records (nil: none).
	redact *redactor
}

// Envs holds the environments live on this worker, by try. The sandbox activities of a try
// after StartEnvironment are sent to this worker's host queue, so they find the try's
// environment here. Keys are tries, not traces: a lost try's teardown may still be on its way
// when the attempt's next try starts on the same host, and each must find its own sandbox.
type Envs struct {
	mu    sync.Mutex
	byTry map[TryInput]*liveEnv
	// over are the tries whose attempts the last sweep found over (see overAgain).
	over map[TryInput]bool
}

// NewEnvs returns an empty registry.
func NewEnvs() *Envs { return &Envs{byTry: map[TryInput]*liveEnv{}} }

// Running lists the attempts (trace and try) whose environments run on this worker now.
func (e *Envs) Running() []TryInput {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]TryInput, 0, len(e.byTry))
	for try := range e.byTry {
		out = append(out, try)
	}
	return out
}

// Len is how many environments run on this worker now.
func (e *Envs) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.byTry)
}

// overAgain takes a sweep's findings about the tries running: over are the traces that ended,
// vanished those whose workflows are gone. It answers the tries to stop: a vanished attempt's at
// once, an ended one's when the sweep before found it over too.
func (e *Envs) overAgain(running []TryInput, over, vanished map[uuid.UUID]bool) (stop []TryInput) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := map[TryInput]bool{}
	for _, try := range running {
		switch {
		case vanished[try.TraceID] || (over[try.TraceID] && e.over[try]):
			stop = append(stop, try)
		case over[try.TraceID]:
			now[try] = true
		}
	}
	e.over = now
	return stop
}

func (e *Envs) get(id uuid.UUID, attempt int) *liveEnv {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byTry[TryInput{TraceID: id, Attempt: attempt}]
}

// put records a try's environment and returns the one to stop: two starts of one try on this
// worker happen when Temporal gave up on the first (its heartbeat was late) and offered it again,
// and the first finished anyway. The later start (the higher activity attempt) is the one the
// workflow heard back from and keeps; the other's sandbox would hold a slot until the worker
// stopped.
func (e *Envs) put(id uuid.UUID, le *liveEnv) (stop *liveEnv) {
	e.mu.Lock()
	defer e.mu.Unlock()
	try := TryInput{TraceID: id, Attempt: le.attempt}
	if old := e.byTry[try]; old != nil && old.startedBy > le.startedBy {
		return le
	}
	stop = e.byTry[try]
	e.byTry[try] = le
	return stop
}

func (e *Envs) take(id uuid.UUID, attempt int) *liveEnv {
	e.mu.Lock()
	defer e.mu.Unlock()
	try := TryInput{TraceID: id, Attempt: attempt}
	le := e.byTry[try]
	delete(e.byTry, try)
	return le
}

func (a *Activities) envOf(traceID uuid.UUID, attempt int) *liveEnv {
	if a.Envs == nil {
		return nil
	}
	le := a.Envs.get(traceID, attempt)
	if le == nil || le.env == nil {
		return nil
	}
	return le
}

// logSink batches an environment's stderr lines into the store.
type logSink struct {
	a       *Activities
	traceID uuid.UUID
	redact  *redactor
	mu      sync.Mutex
	pending []models.TraceLog
	next    int
	stop    chan struct{}
	done    chan struct{}
}

// newLogSink writes the environment log of a trace from seq next on, redacted by redact.
func (a *Activities) newLogSink(traceID uuid.UUID, next int, redact *redactor) *logSink {
	s := &logSink{a: a, traceID: traceID, redact: redact, next: next, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *logSink) add(l sandbox.LogLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, models.TraceLog{TraceID: s.traceID, Source: rollouts.LogEnv, Seq: s.next, Stream: l.Stream, Line: s.redact.text(l.Line), Time: l.Time.UTC()})
	s.next++
}

func (s *logSink) flush(ctx context.Context) {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if err := s.a.rollouts().AppendTraceLogs(ctx, batch); err != nil {
		s.a.log().WarnContext(ctx, "write environment logs", "trace", s.traceID, "error", err)
	}
}

func (s *logSink) loop() {
	defer close(s.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flush(context.Background())
		case <-s.stop:
			return
		}
	}
}

func (s *logSink) close(ctx context.Context) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.flush(ctx)
}
