package activities

import (
	"slices"
	"testing"

	"github.com/google/uuid"
)

// A sandbox whose attempt vanished stops at the first sweep; one whose trace merely reads ended
// stops only if the next sweep finds it still running (its own teardown comes first).
func TestASweepStopsASandboxOnceItsAttemptIsSurelyOver(t *testing.T) {
	e := NewEnvs()
	vanished, ended, live := TryInput{TraceID: uuid.New(), Attempt: 1}, TryInput{TraceID: uuid.New(), Attempt: 1}, TryInput{TraceID: uuid.New(), Attempt: 2}
	running := []TryInput{vanished, ended, live}
	over := map[uuid.UUID]bool{vanished.TraceID: true, ended.TraceID: true}
	gone := map[uuid.UUID]bool{vanished.TraceID: true}
	if stop := e.overAgain(running, over, gone); !slices.Equal(stop, []TryInput{vanished}) {
		t.Errorf("first sweep stops %v, want only the vanished attempt's", stop)
	}
	if stop := e.overAgain([]TryInput{ended, live}, over, nil); !slices.Equal(stop, []TryInput{ended}) {
		t.Errorf("second sweep stops %v, want the ended attempt's, still running", stop)
	}
	// A try the sweep before did not find over waits one sweep more.
	next := TryInput{TraceID: ended.TraceID, Attempt: 2}
	if stop := e.overAgain([]TryInput{next, live}, over, nil); len(stop) != 0 {
		t.Errorf("a new try's first sweep stops %v, want none", stop)
	}
}
