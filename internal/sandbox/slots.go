package sandbox

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// Slots is the bookkeeping of a provider that runs sandboxes elsewhere (a container engine, a
// cluster): at most its capacity at once, none once closed, and the live ones stopped by Close.
type Slots struct {
	max    int
	mu     sync.Mutex
	closed bool
	taken  int
	// live are the started sandboxes, each with whether it is a companion (it holds no slot).
	live     map[Sandbox]bool
	starting sync.WaitGroup
}

// NewSlots bounds a provider to max sandboxes at once.
func NewSlots(max int) *Slots { return &Slots{max: max, live: map[Sandbox]bool{}} }

// Start takes a slot for spec's sandbox (none for a companion), or fails at once with
// ErrCapacity (or ErrClosed), and runs start; the sandbox it returns holds the slot until it
// calls Release. Errors are wrapped with the id.
func (s *Slots) Start(spec Spec, start func() (Sandbox, error)) (Sandbox, error) {
	id, companion := spec.ID, spec.Companion
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: %w", id, ErrClosed)
	case !companion && s.taken >= s.max:
		s.mu.Unlock()
		return nil, fmt.Errorf("sandbox %s: %d of %d running: %w", id, s.taken, s.max, ErrCapacity)
	}
	if !companion {
		s.taken++
	}
	s.starting.Add(1)
	s.mu.Unlock()
	defer s.starting.Done()
	sb, err := start()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if !companion {
			s.taken--
		}
		return nil, fmt.Errorf("sandbox %s: %w", id, err)
	}
	s.live[sb] = companion
	return sb, nil
}

// Release gives back sb's slot; its Stop calls it once.
func (s *Slots) Release(sb Sandbox) {
	s.mu.Lock()
	defer s.mu.Unlock()
	companion, ok := s.live[sb]
	delete(s.live, sb)
	if ok && !companion {
		s.taken--
	}
}

// Running is how many sandboxes hold a slot.
func (s *Slots) Running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.taken
}

// Capacity is the most sandboxes at once.
func (s *Slots) Capacity() int { return s.max }

// Close starts no more, waits for the starts in progress, and stops every live sandbox.
func (s *Slots) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.starting.Wait()
	s.mu.Lock()
	live := slices.Collect(maps.Keys(s.live))
	// Companions first: one may work in its partner's work dir, which the partner's Stop removes.
	slices.SortStableFunc(live, func(a, b Sandbox) int {
		switch ca, cb := s.live[a], s.live[b]; {
		case ca && !cb:
			return -1
		case cb && !ca:
			return 1
		}
		return 0
	})
	s.mu.Unlock()
	var errs []error
	for _, sb := range live {
		errs = append(errs, sb.Stop(ctx))
	}
	return errors.Join(errs...)
}

// CheckImageSpec refuses, with ErrInvalidSpec, a spec an image-running provider (named by
// provider) cannot start: no id or one with a slash, no command, no image, negative resources.
func CheckImageSpec(spec Spec, provider string) error {
	invalid := Invalid
	switch {
	case spec.ID == "" || strings.ContainsAny(spec.ID, "/\x00"):
		return invalid("sandbox id %q: must be non-empty, without a slash", spec.ID)
	case len(spec.Command) == 0 || spec.Command[0] == "":
		return invalid("sandbox %s: no command", spec.ID)
	case spec.Image == nil || spec.Image.Ref == "" || spec.Image.Load == nil:
		return invalid("sandbox %s: the %s provider runs images, and the spec names none", spec.ID, provider)
	case spec.Resources.CPU < 0 || spec.Resources.MemoryMB < 0 || spec.Resources.GPU.Count < 0:
		return invalid("sandbox %s: negative resources %+v", spec.ID, spec.Resources)
	case spec.Dir != "" && !path.IsAbs(spec.Dir):
		return invalid("sandbox %s: working directory %q: not an absolute path", spec.ID, spec.Dir)
	}
	if err := spec.Listen.check(); err != nil {
		return fmt.Errorf("sandbox %s: %w", spec.ID, err)
	}
	return nil
}

// ExitStatus is how a sandbox's command exited, as a provider that runs it elsewhere (a
// container, a pod) reports it: Sandbox.Err wraps it.
type ExitStatus int

func (e ExitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// ExitCode is the status.
func (e ExitStatus) ExitCode() int { return int(e) }

// Lifecycle is the exit and stop bookkeeping of a sandbox that runs elsewhere (a container, a
// pod): Done, Err, the stderr lines, and a Stop that tears down once for every caller. Embed it;
// NewLifecycle makes it.
type Lifecycle struct {
	id       string
	logs     *LogRing
	done     chan struct{} // closed once the environment has exited
	exitErr  error         // set before done is closed
	mu       sync.Mutex
	stopping bool // Stop has begun
	stopOnce sync.Once
	stopped  chan struct{} // closed once Stop's teardown is done
	stopErr  error
}

// NewLifecycle begins the lifecycle of sandbox id.
func NewLifecycle(id string) *Lifecycle {
	return &Lifecycle{id: id, logs: NewLogRing(MaxLogLines), done: make(chan struct{}), stopped: make(chan struct{})}
}

// ID is the sandbox's id.
func (l *Lifecycle) ID() string { return l.id }

// Logs returns every stderr line so far.
func (l *Lifecycle) Logs() []LogLine { return l.logs.All() }

// Stopping says whether Stop has begun.
func (l *Lifecycle) Stopping() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping
}

// LogRing is where the stderr lines go (see ReadLines).
func (l *Lifecycle) LogRing() *LogRing { return l.logs }

// Done is closed once the environment has exited.
func (l *Lifecycle) Done() <-chan struct{} { return l.done }

// Err says why the environment exited, nil while it runs.
func (l *Lifecycle) Err() error {
	select {
	case <-l.done:
		return l.exitErr
	default:
		return nil
	}
}

// Exited records why the environment exited and closes Done: an error that wraps ErrExited, and
// ErrStopped when Stop caused it, else the last stderr lines. where names the sandbox in it.
func (l *Lifecycle) Exited(where string, why error) {
	l.mu.Lock()
	stopping := l.stopping
	l.mu.Unlock()
	if stopping {
		l.exitErr = fmt.Errorf("%s: %w: %w (%w)", where, ErrExited, ErrStopped, why)
	} else {
		if tail := l.logs.Tail(3); len(tail) > 0 {
			why = fmt.Errorf("%w; stderr: %s", why, strings.Join(tail, " | "))
		}
		l.exitErr = fmt.Errorf("%s: %w: %w", where, ErrExited, why)
	}
	close(l.done)
}

// StopOnce runs teardown once, marking the sandbox as stopping first (so that its exit counts as
// stopped); every caller waits for it and gets its error, wrapped with the sandbox's id.
func (l *Lifecycle) StopOnce(teardown func() error) error {
	l.stopOnce.Do(func() {
		defer close(l.stopped)
		l.mu.Lock()
		l.stopping = true
		l.mu.Unlock()
		if err := teardown(); err != nil {
			l.stopErr = fmt.Errorf("sandbox %s: %w", l.id, err)
		}
	})
	<-l.stopped
	return l.stopErr
}

// Invalid is an ErrInvalidSpec that says why.
func Invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidSpec)
}

// GraceWithin is grace, or less when ctx ends sooner.
func GraceWithin(ctx context.Context, grace time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(dl))
	}
	return max(0, grace)
}
