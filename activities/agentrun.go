package activities

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agentport"
	"github.com/proctorhq/proctor/internal/egress"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
)

// ErrAgent is the application error type of a brought agent that failed (it exited with an
// error, or could not be started from its image): the attempt ends as error, reward 0, and is
// never retried as infrastructure.
const ErrAgent = "AgentError"

func agentError(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrAgent, nil)
}

// RunAgentInput names the try whose brought agent to run, and when its run must end
// (run_timeout_s from the start of the try).
type RunAgentInput struct {
	TraceID  uuid.UUID `json:"trace_id"`
	Attempt  int       `json:"attempt"`
	Deadline time.Time `json:"deadline"`
}

// RunAgentResult is why the agent's run ended, for Evaluate.
type RunAgentResult struct {
	StopReason string `json:"stop_reason"`
	// Steps counts the model calls the agent made.
	Steps int `json:"steps"`
}

// agentStderrTail is how much of a failed agent's stderr its error quotes.
const agentStderrTail = 20

// RunAgent runs a try's brought agent beside its environment, on the environment's host: it
// opens the try's agent port (the environment over MCP, the launch's model over the providers'
// APIs, behind a key for this try only), starts the agent's image in a sandbox of its own with
// the port's URLs, key and the task's prompt (the port listening inside the agent's own network
// namespace, so that the agent reaches it and nothing else, unless the task allows the network),
// and waits for it to exit, to ask for a model call
// past max_steps or one its job's budget refuses (ErrBudget), or for the deadline; then stops it and closes the port (the key dies with
// it). Every model call and tool call the agent makes through the port is recorded as the
// built-in loop records its own, in the order they happen. An agent that exits with an error
// ends the attempt as error (ErrAgent), with its exit status and the tail of its stderr.
func (a *Activities) RunAgent(ctx context.Context, in RunAgentInput) (RunAgentResult, error) {
	le := a.envOf(in.TraceID, in.Attempt)
	if le == nil {
		return RunAgentResult{}, fmt.Errorf("run agent: the environment of trace %s try %d is not live on this worker", in.TraceID, in.Attempt)
	}
	stop := keepAlive(ctx)
	defer stop()
	r, err := a.load(ctx, in.TraceID)
	if err != nil {
		return RunAgentResult{}, err
	}
	if r.agent == nil {
		return RunAgentResult{}, envError("the trace runs no brought agent")
	}
	if r.model == nil {
		return RunAgentResult{}, temporal.NewNonRetryableApplicationError("the trace names no model for its agent", ErrModel, nil)
	}
	seq, err := a.nextSeq(ctx, in.TraceID)
	if err != nil {
		return RunAgentResult{}, err
	}
	rec := &agentRecorder{a: a, try: TryInput{TraceID: in.TraceID, Attempt: in.Attempt}, le: le, r: r, next: seq, gw: a.gateway()}
	// A task that allows the network lets the agent out through the egress proxy on its port.
	eg, err := a.egressFor(r, le.logs, "agent:egress")
	if err != nil {
		return RunAgentResult{}, err
	}
	defer eg.close()
	cfg := agentport.Config{Tools: le.tools, Instructions: le.env.Instructions(), Models: []string{r.model.ModelName},
		MaxSteps: r.trace.MaxSteps, Handler: rec, Logger: a.log()}
	if eg != nil {
		cfg.Egress = eg.proxy
	}
	port, err := agentport.New(cfg)
	if err != nil {
		return RunAgentResult{}, err
	}
	defer port.Close() //nolint:errcheck // the key dies with the port either way

	run := &agentRun{a: a, in: in, le: le, r: r, port: port, egress: eg, tail: newLineTail(agentStderrTail)}
	if err := run.prepare(ctx); err != nil {
		return RunAgentResult{}, err
	}
	if err := run.start(ctx); err != nil {
		return RunAgentResult{}, err
	}
	defer run.sb.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // stopped below on every path; this is for panics
	out, runErr := run.wait(ctx)
	if err := run.sb.Stop(context.WithoutCancel(ctx)); err != nil {
		a.log().WarnContext(ctx, "stop the agent's sandbox", "trace", in.TraceID, "error", err)
	}
	out.Steps = port.Steps()
	if runErr != nil {
		if ctx.Err() == nil {
			a.workerLog(ctx, in.TraceID, "try %d: agent stopped after %d model calls: %v", in.Attempt, out.Steps, runErr)
		}
		return out, runErr
	}
	a.workerLog(ctx, in.TraceID, "try %d: agent stopped (%s) after %d model calls", in.Attempt, out.StopReason, out.Steps)
	return out, nil
}

// agentRun is one try's brought agent, from its sandbox's spec to its end.
type agentRun struct {
	a    *Activities
	in   RunAgentInput
	le   *liveEnv
	r    *runFor
	port *agentport.Port
	// egress is the agent's way out to the network, served on its port; nil without.
	egress *egressServer
	tail   *lineTail

	spec         sandbox.Spec
	agentConfig  []byte
	inside       bool
	ownRoot      bool
	confined     bool
	sb           sandbox.Sandbox
	stdoutClosed chan struct{}
}

// prepare makes the agent's sandbox spec: its image (or, deployed inside, the environment's,
// with its own shown read-only), its share of the attempt's resources, and its logs.
func (run *agentRun) prepare(ctx context.Context) error {
	r, in := run.r, run.in
	spec, err := run.a.imageSpec(ctx, r.agent)
	if err != nil {
		return agentError("the agent's build %s cannot run: %v", r.agent.ID, err)
	}
	spec.ID = fmt.Sprintf("%s-%d-agent", in.TraceID, in.Attempt)
	// The environment's sandbox holds the attempt's slot: the agent's takes none, or a full
	// host would keep every attempt's agent waiting on the others' environments.
	spec.Companion = true
	_, _, res := r.runtime()
	spec.Resources = sandbox.Resources{CPU: res.CPU, MemoryMB: res.MemoryMB}
	if run.agentConfig, err = json.Marshal(r.agentConfig()); err != nil {
		return err
	}
	run.inside = r.agent.RuntimeConfig.Inside()
	if run.inside {
		// In the environment's working directory: what it writes there is what the environment
		// (and its evaluation) reads. Where the provider can show another image's files in a
		// sandbox, the agent's sandbox is made from the environment's image, its own shown in it
		// read-only (a pod's agent is an ephemeral container of the environment's pod); else (or
		// where the environment has no image, only a command of the worker's) it runs its own.
		spec.Within, spec.WorkDir = run.le.sb, run.le.sb.WorkDir()
		run.ownRoot = true
		if m, ok := run.a.Sandboxes.(sandbox.Mounter); ok && m.CanMount() && r.agent.ImageKey != "" && r.build != nil && r.build.ImageKey != "" {
			if err := run.a.intoEnvironmentImage(ctx, r, &spec); err != nil {
				return err
			}
			run.ownRoot = false
			// A Harbor task's agent works where the task's tools do: its image's WORKDIR, in
			// the task's own writable root, which the provider shares with it (sandbox.Spec.Within).
			if r.build.Options.ShellServer {
				spec.Dir = image.ShellWorkDir(r.build.RuntimeConfig.Command)
				spec.User = harbor.AgentUser(r.args()) // as the task's own commands run
			}
		}
	}
	spec.OnLog = func(l sandbox.LogLine) {
		run.tail.add(l.Line)
		l.Stream = "agent:" + l.Stream
		run.le.logs.add(l)
	}
	run.spec = spec
	return nil
}

// env is the agent's environment, its port at root.
func (run *agentRun) env(root string) map[string]string {
	r := run.r
	e := run.port.Env(root)
	if len(run.spec.Mounts) > 0 {
		e["PROCTOR_AGENT_ROOT"] = sandbox.AgentRootInside
	}
	e["PROCTOR_PROMPT"] = run.le.prompt
	e["PROCTOR_MODEL"] = r.model.ModelName
	e["PROCTOR_MODEL_API"] = r.model.Adapter // which of the two endpoints serves it
	e["PROCTOR_TRACE_ID"] = run.in.TraceID.String()
	e["PROCTOR_AGENT_CONFIG"] = string(run.agentConfig)
	e["PROCTOR_PLACEMENT"] = cmp.Or(r.agent.RuntimeConfig.Placement, models.PlacementBeside)
	return e
}

// start starts the agent's sandbox with its port where the agent reaches it, and its output in
// the try's logs. The agent reaches its port and nothing else: the port listens inside the
// agent's own network namespace, and a task that allows the network lets it out through the
// egress proxy on that port (never onto the worker's network, where the platform's services
// listen). Only a worker whose sandboxes isolate nothing (a process provider without bubblewrap)
// serves the port on its loopback; a worker that cannot make the listener fails the attempt and
// says how to fix it.
func (run *agentRun) start(ctx context.Context) error {
	a, r, in := run.a, run.r, run.in
	_, images := a.Sandboxes.(sandbox.ImageRunner)
	run.confined = !sharesWorkerNetwork(a.Sandboxes)
	var err error
	if run.confined {
		port := portInside
		if run.inside {
			port = portWithin
		}
		url := urlInside(port)
		run.spec.Env = run.env(url)
		if run.egress != nil {
			maps.Copy(run.spec.Env, egress.Env(url))
		}
		run.spec.Listen = &sandbox.Listen{Port: port, Ready: run.port.Serve}
		run.spec.Network = r.network()
		run.sb, err = a.startAgentSandbox(ctx, run.spec, in.Deadline)
		switch {
		case images && errors.Is(err, sandbox.ErrNoListen):
			return envError("this worker cannot give a brought agent in a container or pod its endpoints (%v): "+
				"the container and kubernetes providers need proctor-relay (--agent-relay)", err)
		case errors.Is(err, sandbox.ErrNoListen):
			return envError("this worker cannot confine a brought agent to its endpoints (%v): "+
				"run it as root, or give it proctor-relay (--agent-relay)", err)
		case err != nil:
			return err
		}
	}
	if !run.confined {
		a.workerLog(ctx, in.TraceID, "try %d: this worker isolates nothing (no bubblewrap): the agent shares the worker's network", in.Attempt)
		root, err := run.port.ListenLoopback()
		if err != nil {
			return err
		}
		run.spec.Env, run.spec.Listen, run.spec.Network = run.env(root), nil, true
		if run.sb, err = a.startAgentSandbox(ctx, run.spec, in.Deadline); err != nil {
			return err
		}
	}
	run.sb.Stdin().Close() //nolint:errcheck // the agent reads its task from the environment
	run.stdoutClosed = make(chan struct{})
	go func() {
		defer close(run.stdoutClosed)
		sc := bufio.NewScanner(run.sb.Stdout())
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			run.le.logs.add(sandbox.LogLine{Stream: "agent:stdout", Line: sc.Text(), Time: time.Now()})
		}
	}()
	a.workerLog(ctx, in.TraceID, "try %d: agent %s started %s (sandbox %s, %s)", in.Attempt, r.agent.ImageName, run.where(), run.sb.ID(), run.network())
	return nil
}

// where says where the agent runs, for the worker log.
func (run *agentRun) where() string {
	switch {
	case run.inside && run.ownRoot:
		return "inside the environment, in its working directory, from its own image"
	case run.inside:
		return "inside the environment, in its working directory, from the environment's image (its own at " + sandbox.AgentRootInside + ")"
	}
	return "beside the environment"
}

// network says what the agent reaches, for the worker log.
func (run *agentRun) network() string {
	switch {
	case !run.confined:
		return "on the worker's network"
	case run.egress != nil:
		return "its endpoints inside, and " + run.egress.what(run.r)
	}
	return "confined to its endpoints"
}

// wait waits for the agent's run to end: it exits, asks for a model call past max_steps or one
// its job's budget refuses, reaches the deadline, or its environment ends; it answers why.
func (run *agentRun) wait(ctx context.Context) (RunAgentResult, error) {
	sb, le, port := run.sb, run.le, run.port
	timer := time.NewTimer(time.Until(run.in.Deadline))
	defer timer.Stop()
	var out RunAgentResult
	var runErr error
	select {
	case <-sb.Done():
		out.StopReason = models.StopDone
		// The sandbox's error says why it exited: an exit status 0 carries no exit code;
		// another status, or a signal (the agent killed for its memory, say), does.
		var exit interface {
			error
			ExitCode() int
		}
		switch {
		case errors.Is(sb.Err(), sandbox.ErrLost):
			// Its pod deleted, or the worker's hold on it lost: the host's failure, not the
			// agent's, and the try is made again in fresh sandboxes.
			runErr = fmt.Errorf("the agent's sandbox was lost: %w", sb.Err())
		case errors.As(sb.Err(), &exit) && exit.ExitCode() != 0:
			<-run.stdoutClosed
			runErr = agentError("the agent exited with an error (%s)%s", exit.Error(), run.tail.quote())
		}
	case <-port.LimitReached():
		out.StopReason = models.StopMaxSteps
	case <-port.Stopped(): // the budget: below
	case <-timer.C:
		out.StopReason = models.StopTimeout
	case <-le.sb.Done():
		runErr = envError("the environment exited while the agent ran: %v", le.sb.Err())
		if errors.Is(le.sb.Err(), sandbox.ErrLost) {
			runErr = fmt.Errorf("the environment's sandbox was lost while the agent ran: %w", le.sb.Err())
		}
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	if st := port.Stop(); st != nil && ctx.Err() == nil {
		// The budget stopped it, whatever the agent did after its refused call (it may have
		// exited, with an error or not, before the stop was seen).
		out.StopReason, runErr = "", temporal.NewNonRetryableApplicationError(st.Message, ErrBudget, nil)
	}
	return out, runErr
}

// startAgentSandbox starts the agent's sandbox, waiting for a free slot on a full host until
// the deadline where the provider gives a companion one.
func (a *Activities) startAgentSandbox(ctx context.Context, spec sandbox.Spec, deadline time.Time) (sandbox.Sandbox, error) {
	for {
		sb, err := a.Sandboxes.Start(ctx, spec)
		switch {
		case err == nil:
			return sb, nil
		case errors.Is(err, sandbox.ErrInvalidSpec):
			return nil, agentError("start the agent: %v", err)
		case !errors.Is(err, sandbox.ErrCapacity) || time.Now().After(deadline):
			return nil, fmt.Errorf("start the agent's sandbox: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// intoEnvironmentImage makes spec, the sandbox of an agent deployed to run inside, a sandbox of
// the environment's image: the environment's root file system and tools, the agent's image
// unpacked on this host and shown read-only at sandbox.AgentRootInside, and the agent's command
// run from there by the agent image's own loader (sandbox.AgentCommand), so that a CLI agent's
// shell runs the environment's programs while the agent runs on its own libraries.
func (a *Activities) intoEnvironmentImage(ctx context.Context, r *runFor, spec *sandbox.Spec) error {
	envSpec, err := a.imageSpec(ctx, r.build)
	if err != nil {
		return err
	}
	root, err := a.images().rootFS(ctx, a, r.agent)
	if err != nil {
		return fmt.Errorf("unpack the agent's image: %w", err)
	}
	argv, err := sandbox.AgentCommand(root, sandbox.AgentRootInside, spec.Command)
	if err != nil {
		return agentError("the agent's build %s cannot run inside the environment: %v", r.agent.ID, err)
	}
	// The agent's image as well as its unpacked copy: a pod copies the image's files in.
	spec.Mounts = []sandbox.Mount{{Source: root, Image: spec.Image, Target: sandbox.AgentRootInside}}
	spec.Command, spec.RootFS, spec.Image = argv, envSpec.RootFS, envSpec.Image
	return nil
}
