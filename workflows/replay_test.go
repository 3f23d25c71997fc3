package workflows

import (
	"log/slog"
	"path/filepath"
	"testing"

	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
)

// TestRecordedHistoriesReplay replays, under this code, real histories of a two-attempt job (its
// RunList and a child Rollout) and of a single run, as the dev server recorded them:
//   - revision0: recorded by 7af8071, before workflows.Revision, when every run asked
//     workflow.GetVersion for its changes;
//   - revision1: recorded by 66794b0, the first code of Revision 1.
//
// A change to Rollout or RunList that breaks a run in flight fails here. The histories were read
// with the Temporal client, their payloads decrypted with temporal.Codec, and written with
// protojson; when a change needs a new way to keep old runs replaying (a GetVersion, a raised
// Revision), record histories of the code before it into a directory of their own.
func TestRecordedHistoriesReplay(t *testing.T) {
	files, err := filepath.Glob("testdata/histories/*/*.json")
	if err != nil || len(files) != 6 {
		t.Fatalf("histories: %v, %v", files, err)
	}
	logger := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	for _, f := range files {
		t.Run(filepath.Base(filepath.Dir(f))+"/"+filepath.Base(f), func(t *testing.T) {
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflow(Rollout)
			r.RegisterWorkflow(RunList)
			if err := r.ReplayWorkflowHistoryFromJSONFile(logger, f); err != nil {
				t.Fatal(err)
			}
		})
	}
}
