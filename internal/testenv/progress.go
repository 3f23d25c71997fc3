package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
)

// StallWindow is how long a wait on the platform may see no progress at all before the test
// fails. Tests run on busy 2-core CI machines, where a step can take many times what it takes on
// a quiet one; what a test checks is that work advances and ends, not how fast, so it fails only
// when nothing has moved for this long. Throughput belongs in benchmarks (`task bench`).
const StallWindow = 2 * time.Minute

// Wait polls check until it reports done. check also returns a fingerprint of the progress it
// sees (counts of attempts by status, the events recorded, a build's log length): the wait fails
// only when the fingerprint stays the same for stall, never on total time. On a stall the failure
// names what was awaited, the last fingerprint, and what diagnose (when not nil) says about the
// unfinished work. It returns the longest quiet period it saw.
//
// When PROCTOR_STALL_REPORT names a file, every wait whose longest quiet period exceeded a tenth
// of its stall window appends a line to it, so that CI can print how close its waits came to
// failing (.ci/run does).
func Wait(t testing.TB, what string, stall time.Duration, check func() (done bool, progress string), diagnose func() string) time.Duration {
	t.Helper()
	began := time.Now()
	last, since := "", time.Now()
	var longest time.Duration
	const quick = 50 * time.Millisecond
	poll := quick
	for first := true; ; first = false {
		done, progress := check()
		now := time.Now()
		if first || progress != last {
			longest = max(longest, now.Sub(since))
			last, since = progress, now
			poll = quick
		}
		if done {
			longest = max(longest, now.Sub(since))
			reportQuiet(t, what, longest, stall, now.Sub(began))
			return longest
		}
		if quiet := now.Sub(since); quiet >= stall {
			reportQuiet(t, what, quiet, stall, now.Sub(began))
			msg := fmt.Sprintf("%s: no progress for %s (stall window %s; waited %s in all); last seen: %s",
				what, quiet.Round(time.Second), stall, now.Sub(began).Round(time.Second), last)
			if diagnose != nil {
				msg += "\n" + diagnose()
			}
			t.Fatal(msg)
		}
		time.Sleep(poll)
		// Back off while nothing moves: a stalled wait should not add load to the machine.
		poll = min(poll*2, 500*time.Millisecond)
	}
}

var stallReport sync.Mutex

// reportQuiet appends a wait's longest quiet period to $PROCTOR_STALL_REPORT when it came
// within a tenth of the stall window or closer.
func reportQuiet(t testing.TB, what string, quiet, stall, total time.Duration) {
	path := os.Getenv("PROCTOR_STALL_REPORT")
	if path == "" || quiet < stall/10 {
		return
	}
	stallReport.Lock()
	defer stallReport.Unlock()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%6.1fs of %s without progress  %s: %s (waited %s)\n", quiet.Seconds(), stall, t.Name(), what, total.Round(time.Second))
}
