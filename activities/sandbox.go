package activities

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/billing"
	"github.com/proctorhq/proctor/models/credentials"
)

// TryInput names one try of an attempt.
type TryInput struct {
	TraceID uuid.UUID `json:"trace_id"`
	Attempt int       `json:"attempt"`
}

// StartEnvironmentInput names the try whose sandbox to start.
type StartEnvironmentInput = TryInput

// StartEnvironmentResult says where the try's sandbox lives.
type StartEnvironmentResult struct {
	// HostQueue is the task queue of the worker that holds the sandbox: every later sandbox
	// activity of the try goes there.
	HostQueue string `json:"host_queue"`
	// Tools counts the tools the agent is offered.
	Tools int `json:"tools"`
}

// StartEnvironment provisions a sandbox, starts the environment's MCP server in it, initializes
// it, renders the task's prompt and runs its setup. It writes the opening events of the try. On
// any failure it stops what it started, so a failed start leaves nothing behind for a teardown.
func (a *Activities) StartEnvironment(ctx context.Context, in StartEnvironmentInput) (StartEnvironmentResult, error) {
	if a.Sandboxes == nil || a.Envs == nil || a.HostQueue == "" {
		return StartEnvironmentResult{}, errors.New("this worker runs no sandboxes")
	}
	stop := keepAlive(ctx)
	defer stop()
	r, err := a.load(ctx, in.TraceID)
	if err != nil {
		return StartEnvironmentResult{}, err
	}
	spec, err := a.imageSpec(ctx, r.build)
	if err != nil {
		return StartEnvironmentResult{}, err
	}
	try, err := a.rollouts().BeginTry(ctx, in.TraceID, in.Attempt, time.Now().UTC(), a.launchFor(r))
	var envErr *models.LaunchEnvError
	switch {
	case errors.As(err, &envErr):
		return StartEnvironmentResult{}, envError("the environment's variables and secrets: %v", envErr.Err)
	case err != nil:
		return StartEnvironmentResult{}, err
	}
	spec.Env = try.Env
	if m := r.timeoutMultiplier; m > 0 && m != 1 {
		// The environment scales its own times by it (the shell server: a Harbor task's
		// verifier and healthcheck).
		spec.Env = maps.Clone(spec.Env)
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[TimeoutMultiplierEnv] = strconv.FormatFloat(m, 'g', -1, 64)
	}
	// What the try records (its events, its environment's log) never shows the launching
	// member's secrets that its environment holds.
	redact := newRedactor(try.Secrets)
	if !try.Began {
		// Cancelled (or cancelling) before its sandbox started: nothing to run.
		// Benign: a cancel that came first is normal, not an error of this worker.
		return StartEnvironmentResult{}, temporal.NewApplicationErrorWithOptions("the trace was closed before its sandbox started", ErrTraceClosed,
			temporal.ApplicationErrorOptions{NonRetryable: true, Category: temporal.ApplicationErrorCategoryBenign})
	}
	run, startup, res := r.runtime()
	logs := a.newLogSink(in.TraceID, try.EnvLogSeq, redact)
	spec.ID, spec.Resources, spec.OnLog, spec.Network = fmt.Sprintf("%s-%d", in.TraceID, in.Attempt), res, logs.add, r.network()
	gaps := a.unenforced(res)
	if len(gaps) > 0 && a.RefuseUnenforcedLimits {
		logs.close(context.WithoutCancel(ctx))
		return StartEnvironmentResult{}, envError("this worker refuses the attempt: it declares limits its sandboxes cannot enforce here (%s); "+
			"run it where they hold, or on a worker that runs it without them (--sandbox-unenforced-limits warn)", strings.Join(gaps, "; "))
	}
	for _, g := range gaps {
		logs.add(sandbox.LogLine{Stream: LogStreamProctor, Line: "limit not enforced on this host: " + g, Time: time.Now()})
	}
	eg, err := a.egressFor(r, logs, "egress")
	if err != nil {
		logs.close(context.WithoutCancel(ctx))
		return StartEnvironmentResult{}, err
	}
	if eg != nil {
		eg.listen(&spec)
	}
	sb, err := a.startSandbox(ctx, spec)
	if err != nil {
		eg.close()
		logs.close(context.WithoutCancel(ctx))
		if eg != nil && errors.Is(err, sandbox.ErrNoListen) {
			return StartEnvironmentResult{}, noEgressHere(err)
		}
		return StartEnvironmentResult{}, err
	}
	// The instance is recorded once the sandbox holds its slot: a start the host had no room
	// for leaves no row.
	what := strings.Join(spec.Command, " ")
	if spec.RootFS != "" || spec.Image != nil {
		what = r.build.ImageName + " " + what
	}
	started := fmt.Sprintf("try %d: sandbox %s started on %s (%s; %s)", in.Attempt, sb.ID(), a.HostQueue, what, eg.what(r))
	if len(gaps) > 0 {
		started += "; limits not enforced on this host: " + strings.Join(gaps, "; ")
	}
	a.log().InfoContext(ctx, started, "trace", in.TraceID)
	inst, err := a.startInstance(ctx, r, in, spec.ID, res, &models.RuntimeLimits{RunTimeoutS: &run, StartupTimeoutS: &startup}, started)
	if err != nil {
		sb.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // the start failed already
		eg.close()
		logs.close(context.WithoutCancel(ctx))
		return StartEnvironmentResult{}, err
	}
	le := &liveEnv{attempt: in.Attempt, sb: sb, logs: logs, instance: inst, egress: eg, redact: redact}
	tools, err := a.openEnvironment(ctx, in, r, le)
	if err != nil {
		a.stopEnv(context.WithoutCancel(ctx), in.TraceID, le)
		return StartEnvironmentResult{}, err
	}
	if activity.IsActivity(ctx) {
		le.startedBy = activity.GetInfo(ctx).Attempt
	}
	if stale := a.Envs.put(in.TraceID, le); stale != nil {
		a.stopEnv(context.WithoutCancel(ctx), in.TraceID, stale) //nolint:errcheck // logged by stopEnv; the other start stands
	}
	return StartEnvironmentResult{HostQueue: a.HostQueue, Tools: tools}, nil
}

// LogStreamProctor is the stream of the lines the platform adds to an environment's log (the
// environment's own are stderr; its egress's egress).
const LogStreamProctor = "proctor"

// unenforced lists the limits of res this worker's sandboxes would not enforce (see
// sandbox.LimitGaps).
func (a *Activities) unenforced(res sandbox.Resources) []string {
	if g, ok := a.Sandboxes.(sandbox.LimitGaps); ok {
		return g.Unenforced(res)
	}
	return nil
}

// startSandbox starts the try's sandbox, counted by how its start went; a failed start's error
// says whether it is the environment's (not retried), a full host's (retried, on whichever host
// has room) or another.
func (a *Activities) startSandbox(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	queue := ""
	if activity.IsActivity(ctx) {
		queue = activity.GetInfo(ctx).TaskQueue
	}
	sb, err := a.Sandboxes.Start(ctx, spec)
	switch {
	case err == nil:
		a.Metrics.SandboxStarted(a.SandboxProvider, queue)
		return sb, nil
	case errors.Is(err, sandbox.ErrInvalidSpec):
		a.Metrics.SandboxFailed(a.SandboxProvider, queue, "invalid")
		return nil, envError("start the environment: %v", err)
	case errors.Is(err, sandbox.ErrCapacity), errors.Is(err, sandbox.ErrNoGPU):
		// A full host is normal under load: logged by the SDK at debug level rather than as an
		// error.
		a.Metrics.SandboxFailed(a.SandboxProvider, queue, "capacity")
		return nil, temporal.NewApplicationErrorWithOptions(err.Error(), ErrCapacity,
			temporal.ApplicationErrorOptions{Category: temporal.ApplicationErrorCategoryBenign})
	}
	a.Metrics.SandboxFailed(a.SandboxProvider, queue, "error")
	return nil, fmt.Errorf("provision sandbox: %w", err)
}

// startInstance records the try's sandbox as an instance, priced by this worker's rates, and
// billed to whoever launched the attempt, with workerLog in the attempt's worker log.
func (a *Activities) startInstance(ctx context.Context, r *runFor, in TryInput, sandboxID string, res sandbox.Resources, limits *models.RuntimeLimits, workerLog string) (uuid.UUID, error) {
	who := r.launched
	inst := &models.Instance{TeamID: r.trace.TeamID, TraceID: r.trace.ID, Attempt: in.Attempt, JobID: r.trace.JobID,
		RegistryID: r.version.RegistryID, UserID: who.user, APIKeyID: who.key, HostQueue: a.HostQueue, SandboxID: sandboxID, SandboxProvider: a.SandboxProvider,
		CPU: res.CPU, MemoryMB: res.MemoryMB, GPUCount: res.GPU.Count, GPUType: res.GPU.Type, Limits: limits,
		HourlyRate:      a.Rates.HourlyRate(res.CPU, res.MemoryMB, res.GPU.Count, res.GPU.Type),
		BaselineMinutes: a.Rates.BaselineMinutes}
	if r.build != nil {
		inst.BuildID, inst.RegistryID = &r.build.ID, &r.build.RegistryID
	}
	if err := a.rollouts().StartInstance(ctx, inst, workerLog); err != nil {
		return uuid.Nil, err
	}
	return inst.ID, nil
}

// launchFor is whose environment the sandbox gets: the environment's variables over the
// launching member's unbound secrets, opened here on the sandbox host (never in history).
func (a *Activities) launchFor(r *runFor) *credentials.LaunchFor {
	registry := r.version.RegistryID
	if r.build != nil {
		registry = &r.build.RegistryID
	}
	return &credentials.LaunchFor{Sealer: a.sealer(), RegistryID: registry, TeamID: r.trace.TeamID, Launcher: r.launched.user}
}

// launchedBy is who launched an attempt: the member, and the API key when one was used.
type launchedBy struct {
	user, key *uuid.UUID
}

// sealer is the secrets key as the store takes it: nil when this worker has none.
func (a *Activities) sealer() credentials.Sealer {
	if a.Secrets == nil {
		return nil
	}
	return a.Secrets
}

// gateway is the inference gateway the attempts' model calls go through.
func (a *Activities) gateway() *inference.Gateway {
	return &inference.Gateway{Store: a.Store, Keys: a.sealer(), Models: inference.Factory(a.models()), Logger: a.log(), Metrics: a.Metrics}
}

// gatewayModel is the model r's attempt calls, through the inference gateway: with the
// launching member's own key for the model's provider when they have one bound (see
// credentials.Store.ProviderKey), each call recorded. Self-hosted and other providers never get a
// member's key.
func (a *Activities) gatewayModel(ctx context.Context, r *runFor) (agent.Model, error) {
	if r.model.Adapter == models.AdapterReplay {
		return a.replayModel(ctx, r)
	}
	launcher := r.launched
	m, cred, err := a.gateway().Client(ctx, inference.Call{Model: r.model, TeamID: r.trace.TeamID, UserID: launcher.user, APIKeyID: launcher.key, TraceID: &r.trace.ID,
		Route: billing.RouteAgent, Validation: r.version.Validation})
	if err != nil {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model %s: %v", r.model.ModelName, err), ErrModel, nil)
	}
	if cred != nil {
		a.workerLog(ctx, r.trace.ID, "model %s: using the launching member's own %s key (%s)", r.model.ModelName, r.model.Provider, cred.Source)
	}
	return m, nil
}

// replayModel answers a replay check's attempt with the answers recorded by the attempt it
// replays.
func (a *Activities) replayModel(ctx context.Context, r *runFor) (agent.Model, error) {
	if r.trace.ReplayOf == nil { // PrepareRollout refused it
		return nil, temporal.NewNonRetryableApplicationError("the replay model answers only a replay check's attempts", ErrModel, nil)
	}
	answers, err := a.rollouts().RecordedAnswers(ctx, *r.trace.ReplayOf)
	if err != nil {
		return nil, err
	}
	return agent.NewReplay(answers), nil
}

// openEnvironment initializes the environment in a started sandbox, runs the task's setup and
// writes the opening events; the trace turns running.
func (a *Activities) openEnvironment(ctx context.Context, in TryInput, r *runFor, le *liveEnv) (int, error) {
	env, err := agent.Connect(ctx, le.sb.Stdout(), le.sb.Stdin(), agent.ConnectOptions{ClientName: "proctor", Logger: a.log()})
	if err != nil {
		return 0, envError("initialize the environment: %v", err)
	}
	le.env = env
	op, err := agent.Open(ctx, env, agent.Episode{Scenario: r.version.Scenario, Args: r.args(), Prompt: r.version.Prompt,
		SystemPrompt: r.version.SystemPrompt, AgentConfig: agentConfig(r.agentConfig())})
	if err != nil {
		return 0, envError("open the task: %v", err)
	}
	le.tools, le.evaluate, le.prompt = op.Tools, op.Evaluate, op.Prompt
	system, prompt, setup := op.System, op.Prompt, op.Setup
	// The store numbers the events as it writes them (see rollouts.Store.OpenTry).
	events := []models.TraceEvent{
		a.event(in, 0, models.EventSystem, system, models.SystemEventData{Tools: le.tools}),
	}
	for _, c := range setup {
		res, err := env.Call(ctx, c)
		if err != nil {
			return 0, envError("setup %s: %v", c.Name, err)
		}
		events = append(events, a.event(in, 0, models.EventSetup, c.Name, models.SetupEventData{Call: c, Result: res}))
		if res.IsError {
			a.rollouts().OpenTry(ctx, in.TraceID, le.redact.events(events), false) //nolint:errcheck // recorded best effort; the error is returned
			return 0, envError("setup %s failed: %s", c.Name, le.redact.text(res.Text))
		}
	}
	events = append(events, a.event(in, 0, models.EventUser, prompt, models.UserEventData{Message: agent.Message{Role: agent.RoleUser, Content: prompt}}))
	if err := a.rollouts().OpenTry(ctx, in.TraceID, le.redact.events(events), true); err != nil {
		return 0, err
	}
	return len(le.tools), nil
}

// TeardownInput names the try whose sandbox to stop.
type TeardownInput = TryInput

// Teardown closes the environment and stops its sandbox; it runs on every path that did not end
// in Evaluate, and is a no-op when nothing is live.
func (a *Activities) Teardown(ctx context.Context, in TeardownInput) error {
	if a.Envs == nil {
		return nil
	}
	le := a.Envs.take(in.TraceID, in.Attempt)
	if le == nil {
		return nil
	}
	return a.stopEnv(ctx, in.TraceID, le)
}

func (a *Activities) stopEnv(ctx context.Context, traceID uuid.UUID, le *liveEnv) error {
	if le.env != nil {
		le.env.Close() //nolint:errcheck // the sandbox stops next either way
	}
	err := le.sb.Stop(ctx)
	le.egress.close()
	if le.instance != uuid.Nil {
		if ierr := a.rollouts().EndInstance(ctx, le.instance, "the sandbox stopped", true); ierr != nil {
			a.log().WarnContext(ctx, "end instance", "trace", traceID, "instance", le.instance, "error", ierr)
		}
	}
	le.logs.close(ctx)
	a.workerLog(ctx, traceID, "try %d: sandbox %s stopped", le.attempt, le.sb.ID())
	return err
}

// keepAlive heartbeats a sandbox activity every few seconds until stopped, so that a long tool
// call is not mistaken for a dead worker, while a worker that really died is noticed within the
// heartbeat timeout.
func keepAlive(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(3 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}
