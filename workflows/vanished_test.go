package workflows

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// An attempt whose Rollout is terminated through Temporal's API (its child future ends in error,
// its trace still open) is ended by its RunList, which then completes the job.
func TestARunListEndsAnAttemptTerminatedOutsideProctor(t *testing.T) {
	j := newFakeJob(3)
	killed := j.traces[1]
	j.gone = map[uuid.UUID]bool{killed: true}
	env := newTestEnv()
	j.register(env)
	env.RegisterWorkflow(Rollout)
	env.OnWorkflow(Rollout, mock.Anything, mock.Anything).Return(func(ctx workflow.Context, in RolloutInput) (RolloutResult, error) {
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return RolloutResult{}, err
		}
		if in.TraceID == killed {
			return RolloutResult{}, errors.New("terminated")
		}
		return RolloutResult{Status: models.TraceCompleted}, nil
	})
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 3, Revision: Revision})
	var res RunListResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j.endedVanished, []uuid.UUID{killed}) {
		t.Errorf("ended as vanished: %v, want only the terminated attempt %s", j.endedVanished, killed)
	}
	if !slices.Equal(j.askedVanished, []uuid.UUID{killed}) {
		t.Errorf("asked about %v: the attempts that ended well need no question", j.askedVanished)
	}
	if got := j.statuses[len(j.statuses)-1]; got != models.JobCompleted {
		t.Errorf("job ended %s, want completed", got)
	}
}

// An attempt an earlier run started (the run does not watch it) whose Rollout was terminated
// never signals its end; the reconcile ends it, and the job completes.
func TestARunListReconcilesAnUnwatchedAttemptThatVanished(t *testing.T) {
	j := newFakeJob(1)
	lost := j.traces[0]
	j.gone = map[uuid.UUID]bool{lost: true}
	env := newTestEnv()
	j.register(env)
	// On the test's clock: a run that never notices would wait for ever.
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{WorkflowExecutionTimeout: time.Hour})
	start := env.Now()
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2, Started: 1, Live: []uuid.UUID{lost}, Revision: Revision})
	if err := env.GetWorkflowResult(nil); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(j.endedVanished, []uuid.UUID{lost}) {
		t.Errorf("ended as vanished: %v, want %s", j.endedVanished, lost)
	}
	if took := env.Now().Sub(start); took > 2*reconcileEvery {
		t.Errorf("the job completed %v after its attempt vanished, want within a reconcile (%v)", took, reconcileEvery)
	}
	if got := j.statuses[len(j.statuses)-1]; got != models.JobCompleted {
		t.Errorf("job ended %s, want completed", got)
	}
}

// Cancelling a job one of whose attempts vanished completes at once: the RunList does not wait
// out its bound for an end that will never come.
func TestCancellingAJobWithAVanishedAttemptCompletes(t *testing.T) {
	j := newFakeJob(2)
	lost, alive := j.traces[0], j.traces[1]
	j.gone = map[uuid.UUID]bool{lost: true}
	env := newTestEnv()
	j.register(env)
	env.OnRequestCancelExternalWorkflow(mock.Anything, names.RolloutWorkflowID(lost), mock.Anything).Return(errors.New("workflow not found")).Once()
	env.OnRequestCancelExternalWorkflow(mock.Anything, names.RolloutWorkflowID(alive), mock.Anything).Return(nil).Once()
	// The live attempt ends cancelled a moment after it is asked, and says so.
	env.RegisterDelayedCallback(func() {
		env.CancelWorkflow()
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(names.SignalRolloutDone, alive) }, time.Second)
	}, 10*time.Second)
	start := env.Now()
	env.ExecuteWorkflow(RunList, RunListInput{JobID: uuid.New(), MaxConcurrent: 2, Started: 2, Live: []uuid.UUID{lost, alive}, Revision: Revision})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(j.endedVanished, lost) {
		t.Errorf("ended as vanished: %v, want %s", j.endedVanished, lost)
	}
	if took := env.Now().Sub(start); took > time.Minute {
		t.Errorf("the cancel took %v, want it done once the live attempt ended", took)
	}
	if got := j.statuses[len(j.statuses)-1]; got != models.JobCancelled {
		t.Errorf("job ended %s, want cancelled", got)
	}
}

// CancelJob asks every live attempt to cancel and ends at once those whose Rollouts are gone,
// which would hear no cancel (a single run's attempt, watched by no RunList).
func TestCancelJobEndsTheAttemptsWhoseRolloutsAreGone(t *testing.T) {
	lost, alive := uuid.New(), uuid.New()
	env := newTestEnv()
	env.OnActivity(a.MarkJobCancelling, mock.Anything, mock.Anything).Return(activities.MarkJobCancellingResult{Live: []uuid.UUID{lost, alive}}, nil)
	env.OnRequestCancelExternalWorkflow(mock.Anything, names.RolloutWorkflowID(lost), mock.Anything).Return(errors.New("workflow not found"))
	env.OnRequestCancelExternalWorkflow(mock.Anything, names.RolloutWorkflowID(alive), mock.Anything).Return(nil)
	env.OnRequestCancelExternalWorkflow(mock.Anything, mock.Anything, mock.Anything).Return(errors.New("workflow not found")).Maybe()
	var asked []uuid.UUID
	env.OnActivity(a.EndVanished, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.EndVanishedInput) (activities.EndVanishedResult, error) {
			asked = append(asked, in.TraceIDs...)
			return activities.EndVanishedResult{Ended: []uuid.UUID{lost}, Vanished: []uuid.UUID{lost}}, nil
		})
	env.ExecuteWorkflow(CancelJob, CancelJobInput{JobID: uuid.New()})
	var res CancelJobResult
	if err := env.GetWorkflowResult(&res); err != nil {
		t.Fatal(err)
	}
	if res.Cancelled != 2 || !slices.Equal(asked, []uuid.UUID{lost, alive}) {
		t.Errorf("cancelled %d, asked EndVanished about %v; want 2, both live attempts", res.Cancelled, asked)
	}
}
