package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
)

// finishRecord records the calls of a check's finishing activity (FinishCertification or
// FinishReplayCheck), each with how many attempts had ended.
type finishRecord struct {
	mu       sync.Mutex
	finished []int
}

func (r *finishRecord) add(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, n)
}

// runCheck runs Certify, or ReplayCheck when replay, over a job of n attempts (real RunList and
// Rollout children, scripted activities), cancelling it at the first model step when
// cancelAtStep; its status is the one its finishing activity returned.
func runCheck(t *testing.T, replay bool, n int, cancelAtStep bool) (*fakeEngine, *finishRecord, string, error) {
	t.Helper()
	f, j := newFakeEngine(), newFakeJob(n)
	env := runListEnv(f, j)
	env.RegisterWorkflow(RunList)
	rec := &finishRecord{}
	status := func(ok, failed string) string {
		rec.add(f.count("Evaluate") + len(f.finished))
		if cancelAtStep {
			return failed
		}
		return ok
	}
	env.OnActivity(a.FinishCertification, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.CertificationInput) (activities.FinishCertificationResult, error) {
			return activities.FinishCertificationResult{Status: status(models.CertificationPassed, models.CertificationFailed)}, nil
		})
	env.OnActivity(a.FinishReplayCheck, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.ReplayCheckInput) (activities.FinishReplayCheckResult, error) {
			return activities.FinishReplayCheckResult{Status: status(rollouts.ReplaySame, rollouts.ReplayFailed)}, nil
		})
	if cancelAtStep {
		var once sync.Once
		f.modelStep = func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
			once.Do(env.CancelWorkflow)
			return neverDone(in)
		}
	}
	if replay {
		env.ExecuteWorkflow(ReplayCheck, ReplayCheckInput{CheckID: uuid.New(), JobID: uuid.New(), MaxConcurrent: 2})
	} else {
		env.ExecuteWorkflow(Certify, CertifyInput{CertificationID: uuid.New(), JobID: uuid.New(), MaxConcurrent: 2})
	}
	var res struct {
		Status string `json:"status"`
	}
	err := env.GetWorkflowError()
	if err == nil {
		err = env.GetWorkflowResult(&res)
	}
	return f, rec, res.Status, err
}

// Certify and ReplayCheck run their job's attempts under the job's RunList and record what ran
// once every attempt has ended.
func TestChecksRecordTheirFiguresOnceTheirJobHasRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		replay bool
		want   string
	}{{"Certify", false, models.CertificationPassed}, {"ReplayCheck", true, rollouts.ReplaySame}} {
		t.Run(tc.name, func(t *testing.T) {
			f, rec, status, err := runCheck(t, tc.replay, 6, false)
			if err != nil {
				t.Fatal(err)
			}
			if f.count("StartEnvironment") != 6 || f.count("Evaluate") != 6 {
				t.Fatalf("calls %v: want the job's 6 attempts run", f.calls)
			}
			if len(rec.finished) != 1 || rec.finished[0] != 6 || status != tc.want {
				t.Errorf("finished after %v attempts ended, status %q: want once, after all 6", rec.finished, status)
			}
		})
	}
}

// A cancelled check cancels its job's attempts and still records what ran.
func TestACancelledCheckStillRecordsWhatRan(t *testing.T) {
	for _, replay := range []bool{false, true} {
		f, rec, status, err := runCheck(t, replay, 6, true)
		var canceled *temporal.CanceledError
		if err != nil && !errors.As(err, &canceled) {
			t.Fatal(err)
		}
		if f.count("Teardown") == 0 || f.count("Evaluate") != 0 {
			t.Errorf("replay %v: calls %v: want the live attempts torn down, none evaluated", replay, f.calls)
		}
		if len(rec.finished) != 1 {
			t.Errorf("replay %v: finished %d times, want once (status %q)", replay, len(rec.finished), status)
		}
	}
}
