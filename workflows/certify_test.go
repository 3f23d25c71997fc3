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
)

// certifyRecord records the FinishCertification calls, each with how many attempts had ended.
type certifyRecord struct {
	mu       sync.Mutex
	finished []int
}

// runCertify runs Certify over a job of n attempts (real RunList and Rollout children, scripted
// activities), cancelling it at the first model step when cancelAtStep.
func runCertify(t *testing.T, n int, cancelAtStep bool) (*fakeEngine, *certifyRecord, CertifyResult, error) {
	t.Helper()
	f, j := newFakeEngine(), newFakeJob(n)
	env := runListEnv(f, j)
	env.RegisterWorkflow(RunList)
	rec := &certifyRecord{}
	env.OnActivity(a.FinishCertification, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in activities.CertificationInput) (activities.FinishCertificationResult, error) {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			rec.finished = append(rec.finished, f.count("Evaluate")+len(f.finished))
			if cancelAtStep {
				return activities.FinishCertificationResult{Status: models.CertificationFailed}, nil
			}
			return activities.FinishCertificationResult{Status: models.CertificationPassed}, nil
		})
	if cancelAtStep {
		var once sync.Once
		f.modelStep = func(in activities.ModelStepInput) (activities.ModelStepResult, error) {
			once.Do(env.CancelWorkflow)
			return neverDone(in)
		}
	}
	env.ExecuteWorkflow(Certify, CertifyInput{CertificationID: uuid.New(), JobID: uuid.New(), MaxConcurrent: 2})
	var res CertifyResult
	err := env.GetWorkflowError()
	if err == nil {
		err = env.GetWorkflowResult(&res)
	}
	return f, rec, res, err
}

// Certify runs its job's attempts under the job's RunList and records the figures once every
// attempt has ended.
func TestCertifyRecordsItsFiguresOnceItsJobHasRun(t *testing.T) {
	f, rec, res, err := runCertify(t, 6, false)
	if err != nil {
		t.Fatal(err)
	}
	if f.count("StartEnvironment") != 6 || f.count("Evaluate") != 6 {
		t.Fatalf("calls %v: want the job's 6 attempts run", f.calls)
	}
	if len(rec.finished) != 1 || rec.finished[0] != 6 || res.Status != models.CertificationPassed {
		t.Errorf("FinishCertification after %v attempts ended, result %+v: want once, after all 6", rec.finished, res)
	}
}

// A cancelled certification cancels its job's attempts and still records what ran.
func TestACancelledCertificationStillRecordsItsFigures(t *testing.T) {
	f, rec, res, err := runCertify(t, 6, true)
	var canceled *temporal.CanceledError
	if err != nil && !errors.As(err, &canceled) {
		t.Fatal(err)
	}
	if f.count("Teardown") == 0 || f.count("Evaluate") != 0 {
		t.Errorf("calls %v: want the live attempts torn down, none evaluated", f.calls)
	}
	if len(rec.finished) != 1 {
		t.Errorf("FinishCertification ran %d times, want once (result %+v)", len(rec.finished), res)
	}
}
