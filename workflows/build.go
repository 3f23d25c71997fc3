package workflows

import (
	"errors"
	"time"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
	"github.com/proctorhq/proctor/workflows/names"
)

// Bounds of a build's steps.
const (
	// buildTimeout bounds compiling and storing the image; a build worker that stops
	// heartbeating for buildHeartbeat is taken for dead and the step is retried elsewhere.
	buildTimeout   = 30 * time.Minute
	buildHeartbeat = HostLostTimeout
	// discoverTimeout bounds starting the image and reading what it serves.
	discoverTimeout = 5 * time.Minute
)

// BuildInput names the build a Build workflow carries out.
type BuildInput struct {
	BuildID uuid.UUID `json:"build_id"`
	// MaxTries is each attempt's RolloutInput.MaxTries in the certification the build may ask
	// for (0: the default).
	MaxTries int `json:"max_tries,omitempty"`
}

// BuildResult is how a build ended, as FinishBuild recorded it.
type BuildResult struct {
	// Status is succeeded, failed or cancelled; Error says why it did not succeed.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Image is the image the build made, when it got that far.
	Image activities.BuildImageResult `json:"image,omitzero"`
	// Certification is the status of the certification the build asked for, once it ended.
	Certification string `json:"certification,omitempty"`
}

// Build carries a triggered build through its pipeline: BuildImage on the builds queue (source,
// builder, stored image), a child workflow that starts the image and discovers what it serves,
// then FinishBuild, which records the outcome, the image and what was discovered in one
// transaction: succeeded, failed (with the reason a user can act on) or cancelled. The build's
// store row is the source of truth; the workflow only moves it along.
func Build(ctx workflow.Context, in BuildInput) (BuildResult, error) {
	var built activities.BuildImageResult
	end := func(status, msg string, found *activities.DiscoverResult) (BuildResult, error) {
		// Recorded even when the workflow was cancelled.
		dctx, _ := workflow.NewDisconnectedContext(ctx)
		fin := activities.FinishBuildInput{BuildID: in.BuildID, Status: status, Error: msg, Image: built}
		if found != nil {
			fin.Scenarios, fin.Lock = found.Scenarios, found.Lock
		}
		out := BuildResult{Error: msg, Image: built}
		err := workflow.ExecuteLocalActivity(storeActivity(dctx), a.FinishBuild, fin).Get(dctx, &out.Status)
		return out, err
	}
	bctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           names.QueueBuilds,
		StartToCloseTimeout: buildTimeout,
		HeartbeatTimeout:    buildHeartbeat,
		WaitForCancellation: true,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrBuildFailed}},
	})
	if err := workflow.ExecuteActivity(bctx, a.BuildImage, activities.BuildInput{BuildID: in.BuildID}).Get(ctx, &built); err != nil {
		return endOnError(ctx, end, "build", err)
	}
	if built.Agent {
		// A brought agent serves no MCP: there is nothing to discover. (Branching on the
		// activity's recorded result keeps older histories, which never carry Agent, replaying.)
		return end(registry.BuildSucceeded, "", &activities.DiscoverResult{Lock: models.BuildLock{Transport: models.TransportNone}})
	}
	var found activities.DiscoverResult
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          names.DiscoverWorkflowID(in.BuildID),
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_TERMINATE,
		WaitForCancellation: true,
	})
	if err := workflow.ExecuteChildWorkflow(cctx, DiscoverScenarios, activities.DiscoverInput{BuildID: in.BuildID, Image: built}).Get(ctx, &found); err != nil {
		return endOnError(ctx, end, "discover scenarios", err)
	}
	out, err := end(registry.BuildSucceeded, "", &found)
	if err != nil || out.Status != registry.BuildSucceeded {
		return out, err
	}
	// Histories from before a build could ask to be certified replay without the step.
	if workflow.GetVersion(ctx, "build-certify", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return out, nil
	}
	// The build stands however its certification ends (the certification records that); a
	// cancel of the workflow is the workflow's.
	if out.Certification, err = certifyBuild(ctx, in); err != nil {
		if temporal.IsCanceledError(err) {
			return out, err
		}
		workflow.GetLogger(ctx).Warn("the build's certification did not finish", "build", in.BuildID, "error", err)
	}
	return out, nil
}

// certifyBuild runs the certification a succeeded build asked for (BuildOptions.Certify) as a
// child Certify workflow, and answers its status ("" when it asked for none, or when it could
// not start: its build log says why).
func certifyBuild(ctx workflow.Context, in BuildInput) (string, error) {
	var started activities.BuildCertificationResult
	if err := workflow.ExecuteLocalActivity(storeActivity(ctx), a.StartBuildCertification, activities.BuildInput{BuildID: in.BuildID}).Get(ctx, &started); err != nil {
		return "", err
	}
	if started.CertificationID == uuid.Nil {
		return "", nil
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:          names.CertifyWorkflowID(started.CertificationID),
		ParentClosePolicy:   enumspb.PARENT_CLOSE_POLICY_REQUEST_CANCEL,
		WaitForCancellation: true,
	})
	var res CertifyResult
	err := workflow.ExecuteChildWorkflow(cctx, Certify, CertifyInput{CertificationID: started.CertificationID, JobID: started.JobID,
		MaxConcurrent: rollouts.CertifyConcurrency, MaxTries: in.MaxTries}).Get(ctx, &res)
	return res.Status, err
}

// endOnError ends a build after a failed step: cancelled when the workflow was cancelled, else
// failed with the step's reason.
func endOnError(ctx workflow.Context, end func(string, string, *activities.DiscoverResult) (BuildResult, error), step string, err error) (BuildResult, error) {
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) || ctx.Err() != nil {
		return end(registry.BuildCancelled, "the build was cancelled", nil)
	}
	var appErr *temporal.ApplicationError
	if errors.As(err, &appErr) && appErr.Type() == activities.ErrBuildFailed {
		return end(registry.BuildFailed, appErr.Message(), nil)
	}
	return end(registry.BuildFailed, step+": "+errorText(err), nil)
}

// DiscoverScenarios starts a build's image in a sandbox on a build host (which has just built
// it, and needs no other host to be up) and reads the scenarios, tools, prompts and resources it
// serves, checking that the scenarios' calls fit them.
func DiscoverScenarios(ctx workflow.Context, in activities.DiscoverInput) (activities.DiscoverResult, error) {
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           names.QueueBuilds,
		StartToCloseTimeout: discoverTimeout,
		HeartbeatTimeout:    HostLostTimeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3,
			NonRetryableErrorTypes: []string{activities.ErrBuildFailed, activities.ErrEnvironment}},
	})
	var res activities.DiscoverResult
	err := workflow.ExecuteActivity(actx, a.DiscoverScenarios, in).Get(ctx, &res)
	return res, err
}
