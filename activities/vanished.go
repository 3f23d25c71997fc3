package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows/names"
)

// WorkflowDescriber tells how a workflow stands: the Temporal client, on workers.
type WorkflowDescriber interface {
	DescribeWorkflowExecution(ctx context.Context, workflowID, runID string) (*workflowservice.DescribeWorkflowExecutionResponse, error)
}

// EndVanishedInput names attempts that may have ended without recording it.
type EndVanishedInput struct {
	TraceIDs []uuid.UUID `json:"trace_ids"`
}

// EndVanishedResult lists the attempts that are over: those whose traces had ended, and those
// EndVanished ended (also in Vanished).
type EndVanishedResult struct {
	Ended    []uuid.UUID `json:"ended"`
	Vanished []uuid.UUID `json:"vanished,omitempty"`
}

// EndVanished ends every attempt of in whose trace is still open while its Rollout workflow is
// not running: terminated or timed out through Temporal's own API, failed, or gone. Such an
// attempt would otherwise read running for ever, hold its job open and be billed "up to now"; it
// ends error ("terminated outside Proctor", or cancelled if it was being cancelled), its instances
// end priced to this moment, and the host that runs its sandbox stops it (SweepEndedSandboxes).
// An attempt whose workflow cannot be described now (an outage) is left for the next call.
// Without a Workflows describer (a test's worker) only the store is read.
func (a *Activities) EndVanished(ctx context.Context, in EndVanishedInput) (EndVanishedResult, error) {
	open, err := a.rollouts().OpenTraceIDs(ctx, in.TraceIDs)
	if err != nil {
		return EndVanishedResult{}, err
	}
	still := map[uuid.UUID]bool{}
	for _, id := range open {
		still[id] = true
	}
	res := EndVanishedResult{Ended: []uuid.UUID{}}
	for _, id := range in.TraceIDs {
		if !still[id] {
			res.Ended = append(res.Ended, id)
			continue
		}
		if a.Workflows == nil {
			continue
		}
		how, gone, err := a.rolloutGone(ctx, id)
		if err != nil {
			a.log().WarnContext(ctx, "describe an attempt's workflow", "trace", id, "error", err)
			continue
		}
		if !gone {
			continue
		}
		err = a.FinishTrace(ctx, FinishTraceInput{TraceID: id, Status: models.TraceError, StopReason: models.StopError,
			Error: "terminated outside Proctor: its workflow " + how})
		if err != nil {
			return res, err
		}
		res.Ended, res.Vanished = append(res.Ended, id), append(res.Vanished, id)
	}
	return res, nil
}

// rolloutGone describes an attempt's Rollout: gone is true, with how it went, when it is not
// running.
func (a *Activities) rolloutGone(ctx context.Context, traceID uuid.UUID) (how string, gone bool, err error) {
	d, err := a.Workflows.DescribeWorkflowExecution(ctx, names.RolloutWorkflowID(traceID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "is gone", true, nil
	}
	if err != nil {
		return "", false, err
	}
	switch st := d.GetWorkflowExecutionInfo().GetStatus(); st {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return "", false, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return "was terminated", true, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return "timed out", true, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return "failed", true, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return "was cancelled before it recorded its end", true, nil
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return "completed without recording its end", true, nil
	default:
		return fmt.Sprintf("is %s", st), true, nil
	}
}

// SweepEndedSandboxes stops the sandboxes this worker runs for attempts that are over: whose
// Rollouts vanished (EndVanished ends those first, and their sandboxes stop at once), or whose
// traces ended while their sandboxes still run here on two sweeps in a row (an attempt's own
// teardown runs before its end is written, so one that is still running a sweep later was
// forgotten: its workflow never came back to this host). It answers how many it stopped. A host
// runs it every SweepEvery.
func (a *Activities) SweepEndedSandboxes(ctx context.Context) (int, error) {
	if a.Envs == nil {
		return 0, nil
	}
	running := a.Envs.Running()
	seen := map[uuid.UUID]bool{}
	var ids []uuid.UUID
	for _, try := range running {
		if !seen[try.TraceID] {
			seen[try.TraceID] = true
			ids = append(ids, try.TraceID)
		}
	}
	ended := EndVanishedResult{}
	if len(ids) > 0 {
		var err error
		if ended, err = a.EndVanished(ctx, EndVanishedInput{TraceIDs: ids}); err != nil {
			return 0, err
		}
	}
	over, vanished := map[uuid.UUID]bool{}, map[uuid.UUID]bool{}
	for _, id := range ended.Ended {
		over[id] = true
	}
	for _, id := range ended.Vanished {
		vanished[id] = true
	}
	stop := a.Envs.overAgain(running, over, vanished)
	n := 0
	for _, try := range stop {
		le := a.Envs.take(try.TraceID, try.Attempt)
		if le == nil {
			continue // its own teardown took it meanwhile
		}
		a.workerLog(ctx, try.TraceID, "try %d: the attempt is over, and its sandbox %s was still running here: stopping it", try.Attempt, le.sb.ID())
		if err := a.stopEnv(ctx, try.TraceID, le); err != nil {
			a.log().WarnContext(ctx, "stop the sandbox of an attempt that is over", "trace", try.TraceID, "error", err)
		}
		n++
	}
	return n, nil
}

// SweepEvery is how often a host stops the sandboxes of attempts that are over.
const SweepEvery = 30 * time.Second
