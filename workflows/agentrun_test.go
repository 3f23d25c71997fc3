package workflows

import (
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
)

// A brought agent's attempt runs RunAgent on the sandbox's host instead of the model and tool
// steps, then evaluates with the agent's stop reason.
func TestRolloutOfABroughtAgentRunsItOnTheSandboxHost(t *testing.T) {
	f := newFakeEngine()
	f.plan.Agent = true
	var deadline time.Time
	f.runAgent = func(in activities.RunAgentInput) (activities.RunAgentResult, error) {
		deadline = in.Deadline
		return activities.RunAgentResult{StopReason: models.StopMaxSteps, Steps: 30}, nil
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || res.StopReason != models.StopMaxSteps || res.Reward == nil || *res.Reward != 1 {
		t.Fatalf("result = %+v, want completed/max_steps at 1", res)
	}
	if f.count("RunAgent") != 1 || f.count("ModelStep") != 0 || f.count("ToolStep") != 0 {
		t.Fatalf("calls = %v, want one RunAgent and no built-in steps", f.calls)
	}
	if q := f.queues["RunAgent"]; len(q) != 1 || q[0] != "host/a/1" {
		t.Errorf("RunAgent ran on %v, want the sandbox host's queue", q)
	}
	if len(f.evaluated) != 1 || f.evaluated[0].StopReason != models.StopMaxSteps {
		t.Errorf("evaluated %+v, want one evaluation with the agent's stop reason", f.evaluated)
	}
	if deadline.IsZero() {
		t.Error("RunAgent was given no deadline")
	}
}

// An agent that fails is the attempt's error, not infrastructure's: no second try.
func TestRolloutOfAFailingAgentEndsWithoutRetry(t *testing.T) {
	f := newFakeEngine()
	f.plan.Agent = true
	f.runAgent = func(activities.RunAgentInput) (activities.RunAgentResult, error) {
		return activities.RunAgentResult{}, temporal.NewNonRetryableApplicationError("the agent exited with an error (exit status 1)", activities.ErrAgent, nil)
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceError || res.Reward == nil || *res.Reward != 0 {
		t.Fatalf("result = %+v, want error at reward 0", res)
	}
	if f.count("StartEnvironment") != 1 || f.count("Teardown") != 1 || f.count("Evaluate") != 0 {
		t.Fatalf("calls = %v, want one try, torn down, not evaluated", f.calls)
	}
	if len(f.finished) != 1 || f.finished[0].Error == "" {
		t.Errorf("finished %+v, want the agent's error recorded", f.finished)
	}
}

// A host lost while the agent runs restarts the try (both sandboxes) on a fresh one.
func TestRolloutOfABroughtAgentRetriesALostHost(t *testing.T) {
	f := newFakeEngine()
	f.plan.Agent = true
	runs := 0
	f.runAgent = func(activities.RunAgentInput) (activities.RunAgentResult, error) {
		runs++
		if runs == 1 {
			return activities.RunAgentResult{}, errors.New("the worker died")
		}
		return activities.RunAgentResult{StopReason: models.StopDone}, nil
	}
	_, res, err := runRollout(t, f, RolloutInput{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != models.TraceCompleted || f.count("StartEnvironment") != 2 || f.count("RunAgent") != 2 {
		t.Fatalf("result %+v, calls %v: want a second try that completes", res, f.calls)
	}
	if len(f.superseded) != 1 {
		t.Errorf("superseded %v, want the first try", f.superseded)
	}
}

// A model call its job's budget refuses ends the attempt where it is, built-in loop or brought
// agent: cancelled with stop reason budget, unscored, its sandbox torn down, no second try.
func TestRolloutStoppedByItsJobsBudgetEndsCancelledUnscored(t *testing.T) {
	budget := func() error {
		return temporal.NewNonRetryableApplicationError("job j has spent $2 of its max_cost_usd $2", activities.ErrBudget, nil)
	}
	for _, agent := range []bool{false, true} {
		f := newFakeEngine()
		f.plan.Agent = agent
		f.modelStep = func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
			if in.Step == 1 {
				return activities.ModelStepResult{}, budget()
			}
			return neverDone(in)
		}
		f.runAgent = func(activities.RunAgentInput) (activities.RunAgentResult, error) {
			return activities.RunAgentResult{}, budget()
		}
		_, res, err := runRollout(t, f, RolloutInput{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != models.TraceCancelled || res.StopReason != models.StopBudget || res.Reward != nil {
			t.Errorf("agent %v: result = %+v, want cancelled/budget with no reward", agent, res)
		}
		if f.count("StartEnvironment") != 1 || f.count("Teardown") != 1 || f.count("Evaluate") != 0 || len(f.finished) != 1 {
			t.Errorf("agent %v: calls = %v, want one try, torn down, not evaluated, recorded once", agent, f.calls)
		}
	}
}
