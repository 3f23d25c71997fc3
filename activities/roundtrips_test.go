package activities

import (
	"context"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

// startEnvironmentRoundTrips bounds the units of work a first try's StartEnvironment asks of the
// store, each one statement or one transaction (15 before LoadRun became one join, 7 before the
// try's bookkeeping became three transactions): the run (LoadRun); the trace turning
// initializing with the environment the sandbox launches with (BeginTry); the instance with its
// worker log line (StartInstance); the opening events with the trace turning running (OpenTry).
// startEnvironmentStatements bounds the statements inside them, BEGIN and COMMIT included: the
// run, the trace's update, the member's secrets with the environment's variables, a check for
// the try's running instances, the instance row, the trace's instance id, the log line, the
// events' seq and rows, the trace's update.
const startEnvironmentRoundTrips, startEnvironmentStatements = 4, 16

func TestStartEnvironmentStoreRoundTrips(t *testing.T) {
	storetest.Each(t, func(t *testing.T, s *models.Store) {
		ctx := context.Background()
		e := newEngine(t, s, 4)
		_, ids := e.launch(t, 1)
		statements := storetest.CountStatements(s)
		if _, err := e.acts.StartEnvironment(ctx, StartEnvironmentInput{TraceID: ids[0], Attempt: 1}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.acts.Teardown(context.Background(), TeardownInput{TraceID: ids[0], Attempt: 1}) })
		n, trips := statements.N(), statements.RoundTrips()
		if trips > startEnvironmentRoundTrips || n > startEnvironmentStatements {
			t.Errorf("StartEnvironment made %d round trips of %d statements, want at most %d of %d:\n%s",
				trips, n, startEnvironmentRoundTrips, startEnvironmentStatements, statements)
		} else {
			t.Logf("StartEnvironment made %d round trips of %d statements", trips, n)
		}
	})
}
