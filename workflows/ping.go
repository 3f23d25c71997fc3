// Package workflows holds the Temporal workflow definitions. Workflows are deterministic and do no
// I/O: every side effect is an activity. They carry ids and small control data only; trajectories,
// logs and artifacts live in the database or object storage.
//
// It may import activities (for signatures) and models types only.
package workflows

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
)

// PingInput lists the task queues to reach.
type PingInput struct {
	// Queues each get one Ping activity; the workflow fails unless every one answers.
	Queues []string `json:"queues"`
}

// PingResult has one answer per queue, in input order.
type PingResult struct {
	Answers []activities.PingResult `json:"answers"`
}

// Ping checks that every listed task queue has a live worker, by running one Ping activity on each.
func Ping(ctx workflow.Context, in PingInput) (PingResult, error) {
	var a *activities.Activities
	futures := make([]workflow.Future, len(in.Queues))
	for i, q := range in.Queues {
		actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
			TaskQueue: q,
			// A queue with no worker should fail the check rather than wait forever.
			ScheduleToStartTimeout: 30 * time.Second,
			StartToCloseTimeout:    10 * time.Second,
			RetryPolicy:            &temporal.RetryPolicy{MaximumAttempts: 1},
		})
		futures[i] = workflow.ExecuteActivity(actx, a.Ping, activities.PingInput{Queue: q})
	}
	var out PingResult
	for _, f := range futures {
		var r activities.PingResult
		if err := f.Get(ctx, &r); err != nil {
			return PingResult{}, err
		}
		out.Answers = append(out.Answers, r)
	}
	return out, nil
}
