package testenv

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatal ends the waiting goroutine and keeps the message.
type recorder struct {
	testing.TB
	mu    sync.Mutex
	fatal string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatal(args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// wait runs Wait on a recorder in a goroutine of its own (Fatal ends it) and returns what it
// failed with ("" when it returned).
func wait(t *testing.T, stall time.Duration, check func() (bool, string), diagnose func() string) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Wait(r, "the thing", stall, check, diagnose)
	}()
	<-done
	return r.fatal
}

func TestWaitFailsOnlyAfterAStallWindowWithoutProgress(t *testing.T) {
	t.Setenv("PROCTOR_STALL_REPORT", "") // these stalls are on purpose: not for CI's report
	t.Run("steady progress outlasts the window", func(t *testing.T) {
		// Progress every 40 ms for 1.5 s, one and a half times the window: never stalled.
		began := time.Now()
		msg := wait(t, time.Second, func() (bool, string) {
			return time.Since(began) > 1500*time.Millisecond, fmt.Sprint(time.Since(began) / (40 * time.Millisecond))
		}, nil)
		if msg != "" {
			t.Errorf("a wait that kept progressing failed: %s", msg)
		}
	})
	t.Run("a stall fails with what was last seen and the diagnosis", func(t *testing.T) {
		began := time.Now()
		msg := wait(t, 150*time.Millisecond, func() (bool, string) { return false, "3 of 5 done" },
			func() string { return "attempt 4: waiting on host/a" })
		if took := time.Since(began); took < 150*time.Millisecond || took > 10*time.Second {
			t.Errorf("the stall was reported after %s, want just past the 150ms window", took)
		}
		for _, want := range []string{"the thing: no progress for", "3 of 5 done", "attempt 4: waiting on host/a"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the failure %q does not say %q", msg, want)
			}
		}
	})
	t.Run("done at once", func(t *testing.T) {
		if msg := wait(t, time.Millisecond, func() (bool, string) { return true, "" }, nil); msg != "" {
			t.Errorf("a wait that was done failed: %s", msg)
		}
	})
}
