// Package temporal wires Proctor to Temporal: the client, the task-queue names, and the workers that
// run the workflows and activities. The embedded development server lives in the devserver
// subpackage so that only the binary links the Temporal server.
//
// It may import workflows and activities.
package temporal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/proctorhq/proctor/activities"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/workflows"
	"github.com/proctorhq/proctor/workflows/names"
)

// DefaultQueues are the queues a CPU host's worker polls: builds included, so that one worker
// does everything (a deployment moves builds to hosts of their own with --queues).
var DefaultQueues = []string{names.QueueWorkflows, names.QueueSandboxesCPU, names.QueueBuilds}

// Client is a Temporal client bound to one namespace.
type Client struct {
	client.Client
	Namespace string
	// MaxTries is passed to every attempt it starts; 0 leaves the workflow's default (3).
	MaxTries int
	// StepsPerRun is passed to every attempt it starts; 0 leaves the workflow's default (500).
	StepsPerRun int
}

// Dial connects to the frontend at address, retrying until ctx ends: a server started a moment
// ago may not accept connections yet. With keys (nil: none), payloads are encrypted (see Codec).
func Dial(ctx context.Context, address, namespace string, logger *slog.Logger, keys Sealer) (*Client, error) {
	return DialObserved(ctx, address, namespace, logger, keys, Observe{})
}

// Observe is what a client reports to: the SDK's own metrics, and a tracing interceptor that
// carries the caller's trace into the workflows it starts and their activities (nil: none of
// either). Workers made from the client use the interceptor too.
type Observe struct {
	Metrics client.MetricsHandler
	Tracing interceptor.Interceptor
}

// DialObserved is Dial with the SDK's metrics and tracing.
func DialObserved(ctx context.Context, address, namespace string, logger *slog.Logger, keys Sealer, o Observe) (*Client, error) {
	if logger == nil {
		logger = slog.Default()
	}
	var interceptors []interceptor.ClientInterceptor
	if o.Tracing != nil {
		interceptors = append(interceptors, o.Tracing)
	}
	var lastErr error
	for {
		c, err := client.DialContext(ctx, client.Options{
			HostPort:  address,
			Namespace: namespace,
			Logger:    sdklog.NewStructuredLogger(logger.With("component", "temporal-client")),
			// With a secrets key every payload at rest in Temporal is encrypted (see Codec).
			DataConverter:  DataConverter(keys),
			MetricsHandler: o.Metrics,
			Interceptors:   interceptors,
		})
		if err == nil {
			return &Client{Client: c, Namespace: namespace}, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dial temporal at %s: %w", address, errors.Join(ctx.Err(), lastErr))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// CheckHealth asks the frontend whether it serves and whether the namespace exists.
func (c *Client) CheckHealth(ctx context.Context) error {
	if _, err := c.Client.CheckHealth(ctx, &client.CheckHealthRequest{}); err != nil {
		return fmt.Errorf("temporal health: %w", err)
	}
	if _, err := c.Client.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: c.Namespace}); err != nil {
		return fmt.Errorf("temporal namespace %q: %w", c.Namespace, err)
	}
	return nil
}

// Workers are the running workers of one process, one per task queue.
type Workers struct {
	workers []worker.Worker
}

// StartWorkers starts one worker per queue. The workflow queue's worker registers every workflow;
// every worker registers the activities, so that a workflow can reach any queue. A process that
// polls a sandbox queue also polls its own host queue (acts.HostQueue, made here when unset),
// where the activities of the sandboxes it started are sent.
//
// stopTimeout is how long Stop lets running activities finish before it cancels them.
func StartWorkers(c *Client, acts *activities.Activities, queues []string, stopTimeout time.Duration) (*Workers, error) {
	ws := &Workers{}
	if acts.Workflows == nil {
		acts.Workflows = c
	}
	queues = slices.Clone(queues)
	for _, q := range queues {
		if q != names.QueueWorkflows && !names.IsHostQueue(q) {
			if acts.HostQueue == "" {
				host, _ := os.Hostname()
				acts.HostQueue = names.HostQueue(host)
			}
			queues = append(queues, acts.HostQueue)
			break
		}
	}
	for _, q := range queues {
		w := worker.New(c.Client, q, worker.Options{WorkerStopTimeout: stopTimeout})
		if q == names.QueueWorkflows {
			RegisterWorkflows(w)
		}
		w.RegisterActivity(acts)
		if err := w.Start(); err != nil {
			ws.Stop()
			return nil, fmt.Errorf("start worker on %s: %w", q, err)
		}
		ws.workers = append(ws.workers, w)
	}
	return ws, nil
}

// RegisterWorkflows registers every workflow of the platform on w.
func RegisterWorkflows(w worker.Registry) {
	w.RegisterWorkflow(workflows.Ping)
	w.RegisterWorkflow(workflows.Rollout)
	w.RegisterWorkflow(workflows.RunList)
	w.RegisterWorkflow(workflows.CancelJob)
	w.RegisterWorkflow(workflows.Build)
	w.RegisterWorkflow(workflows.DiscoverScenarios)
	w.RegisterWorkflow(workflows.LimitAlerts)
	w.RegisterWorkflow(workflows.Certify)
	w.RegisterWorkflow(workflows.ReplayCheck)
}

// Stop stops every worker at once: each polls no more, and waits for its running activities to
// finish (up to the stop timeout, after which they are cancelled).
func (ws *Workers) Stop() {
	var wg sync.WaitGroup
	for _, w := range ws.workers {
		wg.Go(w.Stop)
	}
	wg.Wait()
	ws.workers = nil
}

// Ping runs the Ping workflow over queues and waits for its answer.
func (c *Client) Ping(ctx context.Context, queues []string) (workflows.PingResult, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		TaskQueue:                names.QueueWorkflows,
		WorkflowExecutionTimeout: time.Minute,
	}, workflows.Ping, workflows.PingInput{Queues: queues})
	if err != nil {
		return workflows.PingResult{}, fmt.Errorf("start ping: %w", err)
	}
	var res workflows.PingResult
	if err := run.Get(ctx, &res); err != nil {
		return workflows.PingResult{}, fmt.Errorf("ping %v: %w", queues, err)
	}
	return res, nil
}

// StartRollout starts the workflow of one attempt; starting it again is not an error, so that a
// launch can be retried.
func (c *Client) StartRollout(ctx context.Context, traceID uuid.UUID) error {
	return c.start(ctx, names.RolloutWorkflowID(traceID), workflows.Rollout, workflows.RolloutInput{TraceID: traceID, MaxTries: c.MaxTries, StepsPerRun: c.StepsPerRun, Revision: workflows.Revision})
}

// StartRunList starts the workflow that runs a job's traces.
func (c *Client) StartRunList(ctx context.Context, jobID uuid.UUID, maxConcurrent int) error {
	return c.start(ctx, names.RunListWorkflowID(jobID), workflows.RunList, workflows.RunListInput{JobID: jobID, MaxConcurrent: maxConcurrent, MaxTries: c.MaxTries, StepsPerRun: c.StepsPerRun, Revision: workflows.Revision})
}

// RetryRunList starts the RunList that runs a job's retried attempts, from their place in its
// launch order (see rollouts.Store.RetryJob). Each retry of a job is a new run of one workflow id,
// which the job's cancel cancels too; a retry while the last one still runs is refused.
func (c *Client) RetryRunList(ctx context.Context, jobID uuid.UUID, maxConcurrent, from int) error {
	id := names.RunListRetryWorkflowID(jobID)
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: id, TaskQueue: names.QueueWorkflows,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// A retry's run still open is an error, not a run to join: it has read its last page.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
	}, workflows.RunList, workflows.RunListInput{JobID: jobID, MaxConcurrent: maxConcurrent, MaxTries: c.MaxTries, StepsPerRun: c.StepsPerRun, Started: from, Revision: workflows.Revision})
	if err != nil {
		return fmt.Errorf("start %s: %w", id, err)
	}
	return nil
}

// StartBuild starts the workflow that builds a triggered build; starting it again is a no-op.
func (c *Client) StartBuild(ctx context.Context, buildID uuid.UUID) error {
	return c.start(ctx, names.BuildWorkflowID(buildID), workflows.Build, workflows.BuildInput{BuildID: buildID, MaxTries: c.MaxTries})
}

// Discover runs a build's image once more and returns the scenarios it declares (the deprecated
// discover-scenarios route); each run is a workflow of its own.
func (c *Client) Discover(ctx context.Context, buildID uuid.UUID) ([]models.Scenario, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: names.DiscoverWorkflowID(buildID) + "/" + uuid.NewString()[:8], TaskQueue: names.QueueWorkflows,
	}, workflows.DiscoverScenarios, activities.DiscoverInput{BuildID: buildID})
	if err != nil {
		return nil, fmt.Errorf("discover %s: %w", buildID, err)
	}
	var res activities.DiscoverResult
	if err := run.Get(ctx, &res); err != nil {
		return nil, fmt.Errorf("discover %s: %w", buildID, err)
	}
	return activities.ScenarioRows(res.Scenarios), nil
}

// CancelBuild asks a build's workflow to cancel; an absent or finished one is not an error.
func (c *Client) CancelBuild(ctx context.Context, buildID uuid.UUID) error {
	err := c.CancelWorkflow(ctx, names.BuildWorkflowID(buildID), "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) && !strings.Contains(err.Error(), "already completed") {
		return fmt.Errorf("cancel build %s: %w", buildID, err)
	}
	return nil
}

// CancelTrace asks an attempt's workflow to cancel; an absent or finished one is not an error.
func (c *Client) CancelTrace(ctx context.Context, traceID uuid.UUID) error {
	err := c.CancelWorkflow(ctx, names.RolloutWorkflowID(traceID), "")
	var nf *serviceerror.NotFound
	if err != nil && !errors.As(err, &nf) && !strings.Contains(err.Error(), "already completed") {
		return fmt.Errorf("cancel trace %s: %w", traceID, err)
	}
	return nil
}

// CancelJob starts the workflow that cancels every live attempt of a job and waits for it.
func (c *Client) CancelJob(ctx context.Context, jobID uuid.UUID) (int, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: names.CancelJobWorkflowID(jobID), TaskQueue: names.QueueWorkflows,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.CancelJob, workflows.CancelJobInput{JobID: jobID})
	if err != nil {
		return 0, fmt.Errorf("cancel job %s: %w", jobID, err)
	}
	var res workflows.CancelJobResult
	if err := run.Get(ctx, &res); err != nil {
		return 0, fmt.Errorf("cancel job %s: %w", jobID, err)
	}
	return res.Cancelled, nil
}

// StartCertification starts the workflow of a certification of a build, which runs its job.
func (c *Client) StartCertification(ctx context.Context, certificationID, jobID uuid.UUID, maxConcurrent int) error {
	return c.start(ctx, names.CertifyWorkflowID(certificationID), workflows.Certify,
		workflows.CertifyInput{CertificationID: certificationID, JobID: jobID, MaxConcurrent: maxConcurrent, MaxTries: c.MaxTries})
}

// StartReplayCheck starts the workflow of a replay check of a build, which runs its job.
func (c *Client) StartReplayCheck(ctx context.Context, checkID, jobID uuid.UUID, maxConcurrent int) error {
	return c.start(ctx, names.ReplayCheckWorkflowID(checkID), workflows.ReplayCheck,
		workflows.ReplayCheckInput{CheckID: checkID, JobID: jobID, MaxConcurrent: maxConcurrent, MaxTries: c.MaxTries})
}

// ResumeJob tells a job's RunLists (its launch's and its retries') that it was resumed; one that
// is not running (a job never retried, a run that ended) is not an error.
func (c *Client) ResumeJob(ctx context.Context, jobID uuid.UUID) error {
	var errs []error
	for _, id := range []string{names.RunListWorkflowID(jobID), names.RunListRetryWorkflowID(jobID)} {
		err := c.SignalWorkflow(ctx, id, "", names.SignalJobResumed, nil)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("signal %s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// StartLimitAlerts makes sure the deployment's LimitAlerts workflow runs (starting it when none
// does; a running one keeps its interval).
func (c *Client) StartLimitAlerts(ctx context.Context, interval time.Duration) error {
	_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: names.LimitAlertsWorkflowID, TaskQueue: names.QueueWorkflows,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
	}, workflows.LimitAlerts, workflows.LimitAlertsInput{Interval: interval})
	if err != nil {
		return fmt.Errorf("start the spending alerts workflow: %w", err)
	}
	return nil
}

// start starts workflow wf as id with input in, unless a workflow of that id runs already.
//
// The SDK gives one start 10 s, retries included; a frontend that answers slower than that (a
// loaded host, a persistence stall) or sheds load is asked again, for up to startPatience in all,
// and starting twice is harmless: the workflow id is fixed and its conflict policy uses the
// running one.
func (c *Client) start(ctx context.Context, id string, wf any, in any) error {
	giveUp := time.Now().Add(startPatience)
	wait := 250 * time.Millisecond
	for {
		_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
			ID: id, TaskQueue: names.QueueWorkflows,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		}, wf, in)
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if err == nil || errors.As(err, &started) {
			return nil
		}
		if !transient(err) || ctx.Err() != nil || time.Now().Add(wait).After(giveUp) {
			return fmt.Errorf("start %s: %w", id, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start %s: %w", id, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// startPatience bounds how long a start is retried while the frontend is slow or unavailable;
// it stays well inside the API's write timeout, so that a launch answers rather than hangs.
const startPatience = 45 * time.Second

// transient says whether a failed call may succeed if made again: the frontend was unreachable,
// shed load, or did not answer within the call's deadline.
func transient(err error) bool {
	var (
		unavailable *serviceerror.Unavailable
		deadline    *serviceerror.DeadlineExceeded
		exhausted   *serviceerror.ResourceExhausted
	)
	return errors.As(err, &unavailable) || errors.As(err, &deadline) || errors.As(err, &exhausted) ||
		errors.Is(err, context.DeadlineExceeded)
}

// EnsureNamespace registers namespace on the Temporal cluster at address, with the given history
// retention, unless it exists. It says whether it created the namespace, and the retention the
// namespace has.
func EnsureNamespace(ctx context.Context, address, namespace string, retention time.Duration) (created bool, has time.Duration, err error) {
	nc, err := client.NewNamespaceClient(client.Options{HostPort: address})
	if err != nil {
		return false, 0, fmt.Errorf("dial temporal at %s: %w", address, err)
	}
	defer nc.Close()
	desc, err := nc.Describe(ctx, namespace)
	var notFound *serviceerror.NamespaceNotFound
	switch {
	case err == nil:
		return false, desc.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(), nil
	case !errors.As(err, &notFound):
		return false, 0, fmt.Errorf("describe namespace %s: %w", namespace, err)
	}
	err = nc.Register(ctx, &workflowservice.RegisterNamespaceRequest{Namespace: namespace,
		Description: "Proctor: rollouts, builds and spending alerts", WorkflowExecutionRetentionPeriod: durationpb.New(retention)})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return false, 0, fmt.Errorf("register namespace %s: %w", namespace, err)
	}
	created = err == nil
	// A new namespace is usable once the cluster's namespace caches know it (seconds later):
	// wait for that, so that a server started right after this does not find it missing.
	c, err := client.DialContext(ctx, client.Options{HostPort: address, Namespace: namespace})
	if err != nil {
		return created, retention, fmt.Errorf("dial temporal at %s: %w", address, err)
	}
	defer c.Close()
	for {
		_, err := c.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{Namespace: namespace,
			Execution: &commonpb.WorkflowExecution{WorkflowId: "proctor-namespace-probe-" + uuid.NewString()}})
		if !errors.As(err, &notFound) {
			return created, retention, nil // the workflow is missing, as it should be: the namespace is known
		}
		select {
		case <-ctx.Done():
			return created, retention, fmt.Errorf("namespace %s registered but not yet usable: %w", namespace, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}
