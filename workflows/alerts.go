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

// LimitAlerts is the deployment's mail round, every Interval, for ever: it records and mails the
// spending alerts that are due (activities.CheckLimitAlerts, whose records make a mail go out
// once per limit per period whatever restarts), then the @mentions not yet mailed
// (activities.SendMentionMails, marked once sent). A failed step is retried at the next round.
func LimitAlerts(ctx workflow.Context, in LimitAlertsInput) error {
	if in.Interval <= 0 {
		in.Interval = time.Minute
	}
	var a *activities.Activities
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	// Runs that began before mentions were mailed replay as they ran.
	mentions := workflow.GetVersion(ctx, "mention-mails", workflow.DefaultVersion, 1) == 1
	for range limitAlertRounds {
		if err := workflow.ExecuteActivity(actx, a.CheckLimitAlerts).Get(ctx, nil); err != nil {
			workflow.GetLogger(ctx).Warn("spending alerts: check failed; next round retries", "error", err)
		}
		if mentions {
			if err := workflow.ExecuteActivity(actx, a.SendMentionMails).Get(ctx, nil); err != nil {
				workflow.GetLogger(ctx).Warn("mention mails: sending failed; next round retries", "error", err)
			}
		}
		if err := workflow.Sleep(ctx, in.Interval); err != nil {
			return err
		}
	}
	return workflow.NewContinueAsNewError(ctx, LimitAlerts, in)
}
