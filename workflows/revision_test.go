package workflows

import (
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/models"
)

// versionsAsked records every ask of the env's workflows for a change's version (on a server, a
// run's first ask of each records a marker and upserts a search attribute), answering each with
// its newest.
func versionsAsked(env *testsuite.TestWorkflowEnvironment) func() []string {
	var mu sync.Mutex
	var asked []string
	env.OnGetVersion(mock.Anything, workflow.DefaultVersion, 1).Return(func(changeID string, _, max workflow.Version) workflow.Version {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, changeID)
		return max
	}).Maybe()
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(asked)
	}
}

// TestRunsOfTheCurrentRevisionAskForNoVersions: a RunList begun at Revision, and the Rollouts it
// starts, ask for no change's version, so an attempt costs no version marker and no visibility
// write; a run from before Revision asks for the versions of the changes since its own revision (0:
// all five, in the order it always did), and the job runs the same.
func TestRunsOfTheCurrentRevisionAskForNoVersions(t *testing.T) {
	for _, tc := range []struct {
		revision int
		want     []string
	}{
		{Revision, nil},
		{1, []string{"end-vanished"}},
		{0, []string{"reconcile-schedule-kept", "job-budget", "parent-watches-children", "reconcile-timer-kept", "end-vanished"}},
	} {
		f, j := newFakeEngine(), newFakeJob(3)
		env := runListEnv(f, j)
		asked := versionsAsked(env)
		env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2, Revision: tc.revision})
		var res RunListResult
		if err := env.GetWorkflowResult(&res); err != nil {
			t.Fatal(err)
		}
		if res.Started != 3 || f.count("Evaluate") != 3 || j.reconciles != 0 {
			t.Errorf("revision %d: started %d, evaluated %d, reconciled %d times", tc.revision, res.Started, f.count("Evaluate"), j.reconciles)
		}
		if got := asked(); !slices.Equal(got, tc.want) {
			t.Errorf("revision %d: versions asked = %q, want %q", tc.revision, got, tc.want)
		}
	}
}

// TestARolloutOfTheCurrentRevisionAsksForNoVersion: an attempt begun at Revision (by the API or a
// RunList) and one that continues as new ask for no version; one from before asks whether it
// tells its parent, as it did.
func TestARolloutOfTheCurrentRevisionAsksForNoVersion(t *testing.T) {
	for _, tc := range []struct {
		revision int
		want     []string
	}{
		{Revision, nil},
		{0, []string{"rollout-tells-parent"}},
	} {
		var asked func() []string
		_, res, err := runRollout(t, newFakeEngine(), RolloutInput{Revision: tc.revision}, func(env *testsuite.TestWorkflowEnvironment) {
			asked = versionsAsked(env)
		})
		if err != nil || res.Status != models.TraceCompleted {
			t.Fatalf("revision %d: %+v, %v", tc.revision, res, err)
		}
		if got := asked(); !slices.Equal(got, tc.want) {
			t.Errorf("revision %d: versions asked = %q, want %q", tc.revision, got, tc.want)
		}
	}
}
