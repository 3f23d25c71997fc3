package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

// limitAlertRounds is how many checks a run makes before it continues as new, bounding history.
const limitAlertRounds = 200

// LimitAlertsInput says how often to check.
type LimitAlertsInput struct {
	Interval time.Duration `json:"interval"`
}

// LimitAlerts checks the alert limits every Interval, for ever: each check records and mails
// the alerts that are due (activities.CheckLimitAlerts, whose records make a mail go out once
// per limit per period whatever restarts). A failed check is retried at the next round.
func LimitAlerts(ctx workflow.Context, in LimitAlertsInput) error {
	if in.Interval <= 0 {
		in.Interval = time.Minute
	}
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	for range limitAlertRounds {
		if err := workflow.ExecuteActivity(actx, a.CheckLimitAlerts).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("spending alerts: check failed; next round retries", "error", err)
		}
		if err := workflow.Sleep(ctx, in.Interval); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, LimitAlerts, in)
}
