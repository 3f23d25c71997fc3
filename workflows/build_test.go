package workflows

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/workflows/names"
)

// fakeBuilder scripts the build activities and records what ran where.
type fakeBuilder struct {
	mu       sync.Mutex
	queues   map[string][]string
	finished []activities.FinishBuildInput
	// discovered are the images discovery was asked to start.
	discovered []activities.BuildImageResult
	build      func(ctx context.Context) error
	discover   func() (activities.DiscoverResult, error)
	// certification is what StartBuildCertification answers (zero: the build asked for none);
	// certifyAsked counts its calls.
	certification activities.BuildCertificationResult
	certifyAsked  int
}

func newFakeBuilder() *fakeBuilder {
	return &fakeBuilder{
		queues: map[string][]string{},
		build:  func(context.Context) error { return nil },
		discover: func() (activities.DiscoverResult, error) {
			return activities.DiscoverResult{Scenarios: []envserver.ScenarioInfo{{Name: "add-todos"}}, Lock: models.BuildLock{Transport: models.TransportStdio}}, nil
		},
	}
}

func (f *fakeBuilder) register() *testsuite.TestWorkflowEnvironment {
	env := newTestEnv()
	env.RegisterWorkflow(DiscoverScenarios)
	env.RegisterActivity(&activities.Activities{})
	rec := func(ctx context.Context, name string) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.queues[name] = append(f.queues[name], activity.GetInfo(ctx).TaskQueue)
	}
	env.OnActivity(a.BuildImage, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.BuildInput) (activities.BuildImageResult, error) {
			rec(ctx, "BuildImage")
			if err := f.build(ctx); err != nil {
				return activities.BuildImageResult{}, err
			}
			return builtImage, nil
		})
	env.OnActivity(a.DiscoverScenarios, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.DiscoverInput) (activities.DiscoverResult, error) {
			rec(ctx, "DiscoverScenarios")
			f.mu.Lock()
			f.discovered = append(f.discovered, in.Image)
			f.mu.Unlock()
			return f.discover()
		})
	env.OnActivity(a.FinishBuild, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.FinishBuildInput) (string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.finished = append(f.finished, in)
			return in.Status, nil
		})
	env.OnActivity(a.StartBuildCertification, mock.Anything, mock.Anything).Return(
		func(context.Context, activities.BuildInput) (activities.BuildCertificationResult, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.certifyAsked++
			return f.certification, nil
		})
	return env
}

// builtImage is what the scripted BuildImage makes.
var builtImage = activities.BuildImageResult{Digest: "sha256:1", ImageKey: "images/t/b.oci.tar", ImageName: "todo:1", Command: []string{"/env"}}

func (f *fakeBuilder) only(t *testing.T) activities.FinishBuildInput {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.finished) != 1 {
		t.Fatalf("the build was finished %d times: %+v", len(f.finished), f.finished)
	}
	return f.finished[0]
}

func TestBuildSucceedsWithItsDiscoveredScenarios(t *testing.T) {
	f := newFakeBuilder()
	env := f.register()
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	fin := f.only(t)
	if fin.Status != registry.BuildSucceeded || len(fin.Scenarios) != 1 || fin.Lock.Transport != "stdio" {
		t.Errorf("finished = %+v", fin)
	}
	// The image goes from the builder to discovery, which starts it, and to FinishBuild, which
	// records it with the outcome; the workflow's result says what was built.
	if !reflect.DeepEqual(fin.Image, builtImage) || len(f.discovered) != 1 || !reflect.DeepEqual(f.discovered[0], builtImage) {
		t.Errorf("finished with image %+v, discovered %+v; want %+v for both", fin.Image, f.discovered, builtImage)
	}
	var res BuildResult
	if err := env.GetWorkflowResult(&res); err != nil || res.Status != registry.BuildSucceeded || res.Image.Digest != "sha256:1" {
		t.Errorf("the workflow's result = %+v, %v", res, err)
	}
	if q := f.queues["BuildImage"]; len(q) != 1 || q[0] != names.QueueBuilds {
		t.Errorf("BuildImage ran on %v, want the builds queue", q)
	}
	if q := f.queues["DiscoverScenarios"]; len(q) != 1 || q[0] != names.QueueBuilds {
		t.Errorf("DiscoverScenarios ran on %v, want the builds queue", q)
	}
}

func TestABuildThatCannotSucceedFailsAtOnceWithItsReason(t *testing.T) {
	f := newFakeBuilder()
	f.build = func(context.Context) error {
		return temporal.NewNonRetryableApplicationError("the source archive was refused: entry \"../x\" escapes", activities.ErrBuildFailed, nil)
	}
	env := f.register()
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	fin := f.only(t)
	if fin.Status != registry.BuildFailed || fin.Error != "the source archive was refused: entry \"../x\" escapes" || fin.Image.ImageKey != "" {
		t.Errorf("finished = %+v", fin)
	}
	if n := len(f.queues["BuildImage"]); n != 1 {
		t.Errorf("a build that cannot succeed was tried %d times", n)
	}
	if len(f.queues["DiscoverScenarios"]) != 0 {
		t.Error("a failed build was discovered")
	}
}

func TestAnInfrastructureFailureIsRetriedThenFailsTheBuild(t *testing.T) {
	f := newFakeBuilder()
	f.build = func(context.Context) error { return errors.New("bucket unreachable") }
	env := f.register()
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	fin := f.only(t)
	if fin.Status != registry.BuildFailed || fin.Error == "" {
		t.Errorf("finished = %+v", fin)
	}
	if n := len(f.queues["BuildImage"]); n != 3 {
		t.Errorf("an infrastructure failure was tried %d times, want 3", n)
	}
}

func TestACancelledBuildEndsCancelled(t *testing.T) {
	f := newFakeBuilder()
	f.build = func(ctx context.Context) error {
		for {
			activity.RecordHeartbeat(ctx)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	env := f.register()
	env.RegisterDelayedCallback(env.CancelWorkflow, time.Second)
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	fin := f.only(t)
	if fin.Status != registry.BuildCancelled {
		t.Errorf("finished = %+v, want cancelled", fin)
	}
}

// A build that asked to be certified runs its certification as a child Certify workflow once it
// succeeded (recorded first), and its result says how the certification ended; one that did not
// ask runs none, and a failed build is not certified.
func TestABuildRunsTheCertificationItAskedForOnceItSucceeded(t *testing.T) {
	f := newFakeBuilder()
	f.certification = activities.BuildCertificationResult{CertificationID: uuid.New(), JobID: uuid.New()}
	env := f.register()
	var certified []CertifyInput
	env.OnWorkflow(Certify, mock.Anything, mock.Anything).Return(func(_ workflow.Context, in CertifyInput) (CertifyResult, error) {
		if len(f.finished) != 1 {
			t.Errorf("the certification started before the build was recorded: %+v", f.finished)
		}
		certified = append(certified, in)
		return CertifyResult{Status: models.CertificationFlagged}, nil
	})
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New(), MaxTries: 4})
	var res BuildResult
	if err := env.GetWorkflowResult(&res); err != nil || res.Status != registry.BuildSucceeded || res.Certification != models.CertificationFlagged {
		t.Fatalf("the build's result = %+v, %v; want succeeded with its certification flagged", res, err)
	}
	if len(certified) != 1 || certified[0].CertificationID != f.certification.CertificationID || certified[0].JobID != f.certification.JobID ||
		certified[0].MaxTries != 4 {
		t.Errorf("Certify ran with %+v, want once with %+v", certified, f.certification)
	}

	// A certification that fails leaves the build as it was recorded: succeeded.
	f = newFakeBuilder()
	f.certification = activities.BuildCertificationResult{CertificationID: uuid.New(), JobID: uuid.New()}
	env = f.register()
	env.OnWorkflow(Certify, mock.Anything, mock.Anything).Return(CertifyResult{}, errors.New("the store is down"))
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New(), MaxTries: 2})
	res = BuildResult{}
	if err := env.GetWorkflowResult(&res); err != nil || res.Status != registry.BuildSucceeded || res.Certification != "" {
		t.Errorf("a build whose certification failed: %+v, %v; want succeeded", res, err)
	}

	// A certification that ends cancelled (the build's workflow was) ends the build's workflow
	// cancelled; the build's record stays succeeded.
	f = newFakeBuilder()
	f.certification = activities.BuildCertificationResult{CertificationID: uuid.New(), JobID: uuid.New()}
	env = f.register()
	env.OnWorkflow(Certify, mock.Anything, mock.Anything).Return(CertifyResult{}, temporal.NewCanceledError())
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	var canceled *temporal.CanceledError
	if err := env.GetWorkflowError(); !errors.As(err, &canceled) {
		t.Errorf("a build cancelled while its certification ran ended %v, want cancelled", err)
	}

	f = newFakeBuilder()
	env = f.register()
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	res = BuildResult{}
	if err := env.GetWorkflowResult(&res); err != nil || res.Certification != "" || f.certifyAsked != 1 {
		t.Errorf("a build that asked for no certification: %+v, %v, asked %d times", res, err, f.certifyAsked)
	}

	f = newFakeBuilder()
	f.build = func(context.Context) error {
		return temporal.NewNonRetryableApplicationError("no main package", activities.ErrBuildFailed, nil)
	}
	env = f.register()
	env.ExecuteWorkflow(Build, BuildInput{BuildID: uuid.New()})
	res = BuildResult{}
	if err := env.GetWorkflowResult(&res); err != nil || res.Status != registry.BuildFailed || f.certifyAsked != 0 {
		t.Errorf("a failed build: %+v, %v, certification asked %d times", res, err, f.certifyAsked)
	}
}
