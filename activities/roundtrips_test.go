package activities

import (
	"context"
	"testing"

	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
)

// startEnvironmentQueries bounds the statements a first try's StartEnvironment runs against the
// store (19 before the run was read in LoadRun and a worker log line became one statement; 15
// before LoadRun became one join, the launch environment one union and BeginTry one update that
// returns where the log goes on): the run, the member's secrets with the environment's
// variables, the trace turning initializing, the instance (a check for the try's, the row, the
// trace's instance id), a worker log line, the opening events (their seq, read as late as it
// can be, and the rows) and the trace turning running.
const startEnvironmentQueries = 10

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
		if n := statements.N(); n > startEnvironmentQueries {
			t.Errorf("StartEnvironment ran %d statements, want at most %d:\n%s", n, startEnvironmentQueries, statements)
		} else {
			t.Logf("StartEnvironment ran %d statements", n)
		}
	})
}
