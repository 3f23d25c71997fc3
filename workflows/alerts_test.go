package workflows

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

func TestLimitAlertsChecksEveryIntervalAndContinuesAsNew(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	var a *activities.Activities
	calls := 0
	env.OnActivity(a.CheckLimitAlerts, mock.Anything).Return(func(context.Context) (int, error) {
		calls++
		if calls >= 3 && calls <= 5 {
			return 0, errors.New("smtp down") // every try of round 3 fails: the workflow goes on
		}
		return 1, nil
	})
	mentionRounds := 0
	env.OnActivity(a.SendMentionMails, mock.Anything).Return(func(context.Context) (int, error) {
		mentionRounds++
		return 0, nil
	})
	start := env.Now()
	env.ExecuteWorkflow(LimitAlerts, LimitAlertsInput{Interval: 30 * time.Second})
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("the workflow ended with %v, want a continue-as-new", err)
	}
	// The failed round was tried 3 times (the activity's policy), and the next rounds went on.
	if calls != limitAlertRounds+2 {
		t.Errorf("%d checks, want %d rounds and 2 more tries of the failed one", calls, limitAlertRounds)
	}
	// Each round also mails the mentions due, a failed alert check notwithstanding.
	if mentionRounds != limitAlertRounds {
		t.Errorf("%d rounds mailed mentions, want all %d", mentionRounds, limitAlertRounds)
	}
	if took := env.Now().Sub(start); took < limitAlertRounds*30*time.Second {
		t.Errorf("the rounds took %s of workflow time, want at least %d intervals", took, limitAlertRounds)
	}
}
