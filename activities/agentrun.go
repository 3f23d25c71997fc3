package activities

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/agentport"
	"github.com/proctorhq/proctor/internal/inference"
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

// agentPortInside is the port the agent's port listens on inside a confined agent's sandbox
// (its network namespace is its own: any port is free there).
const agentPortInside = 8417

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
	rec := &agentRecorder{a: a, try: TryInput{TraceID: in.TraceID, Attempt: in.Attempt}, le: le, r: r, next: seq,
		gw: a.gateway()}
	port, err := agentport.New(agentport.Config{Tools: le.tools, Instructions: le.env.Instructions(), Models: []string{r.model.ModelName},
		MaxSteps: r.trace.MaxSteps, Handler: rec, Logger: a.log()})
	if err != nil {
		return RunAgentResult{}, err
	}
	defer port.Close() //nolint:errcheck // the key dies with the port either way

	spec, err := a.imageSpec(ctx, r.agent)
	if err != nil {
		return RunAgentResult{}, agentError("the agent's build %s cannot run: %v", r.agent.ID, err)
	}
	spec.ID = fmt.Sprintf("%s-%d-agent", in.TraceID, in.Attempt)
	// The environment's sandbox holds the attempt's slot: the agent's takes none, or a full
	// host would keep every attempt's agent waiting on the others' environments.
	spec.Companion = true
	_, _, res := r.runtime()
	spec.Resources = sandbox.Resources{CPU: res.CPU, MemoryMB: res.MemoryMB}
	agentConfig, err := json.Marshal(r.agentConfig())
	if err != nil {
		return RunAgentResult{}, err
	}
	env := func(root string) map[string]string {
		e := port.Env(root)
		if len(spec.Mounts) > 0 {
			e["PROCTOR_AGENT_ROOT"] = sandbox.AgentRootInside
		}
		e["PROCTOR_PROMPT"] = le.prompt
		e["PROCTOR_MODEL"] = r.model.ModelName
		e["PROCTOR_MODEL_API"] = r.model.Adapter // which of the two endpoints serves it
		e["PROCTOR_TRACE_ID"] = in.TraceID.String()
		e["PROCTOR_AGENT_CONFIG"] = string(agentConfig)
		e["PROCTOR_PLACEMENT"] = cmp.Or(r.agent.RuntimeConfig.Placement, models.PlacementBeside)
		return e
	}
	_, images := a.Sandboxes.(sandbox.ImageRunner)
	inside := r.agent.RuntimeConfig.Inside()
	ownRoot := false
	if inside {
		// In the environment's working directory: what it writes there is what the environment
		// (and its evaluation) reads. Where the provider can show another image's files in a
		// sandbox, the agent's sandbox is made from the environment's image, its own shown in it
		// read-only (a pod's agent is an ephemeral container of the environment's pod); else (or
		// where the environment has no image, only a command of the worker's) it runs its own.
		spec.Within, spec.WorkDir = le.sb, le.sb.WorkDir()
		ownRoot = true
		if m, ok := a.Sandboxes.(sandbox.Mounter); ok && m.CanMount() && r.agent.ImageKey != "" && r.build != nil && r.build.ImageKey != "" {
			if err := a.intoEnvironmentImage(ctx, r, &spec); err != nil {
				return RunAgentResult{}, err
			}
			ownRoot = false
		}
	}
	tail := newLineTail(agentStderrTail)
	spec.OnLog = func(l sandbox.LogLine) {
		tail.add(l.Line)
		l.Stream = "agent:" + l.Stream
		le.logs.add(l)
	}
	// The agent reaches its port and nothing else: the port listens inside the agent's own
	// network namespace. On the process provider, a task that allows the network gives the agent
	// the worker's, with the port on the worker's loopback; so does a host that cannot make a
	// listener inside. A container or a pod has a namespace of its own either way (the network as
	// the task says), and reaches the worker's loopback never: its port is always inside.
	confined := images || !r.network() && !a.unconfinable.Load()
	var sb sandbox.Sandbox
	if confined {
		spec.Env = env(fmt.Sprintf("http://127.0.0.1:%d", agentPortInside))
		spec.Listen = &sandbox.Listen{Port: agentPortInside, Ready: port.Serve}
		spec.Network = images && r.network()
		sb, err = a.startAgentSandbox(ctx, spec, in.Deadline)
		switch {
		case images && errors.Is(err, sandbox.ErrNoListen):
			return RunAgentResult{}, envError("this worker cannot give a brought agent in a container or pod its endpoints (%v): "+
				"the container and kubernetes providers need proctor-relay (--agent-relay)", err)
		case errors.Is(err, sandbox.ErrNoListen):
			a.log().WarnContext(ctx, "brought agents run on the worker's network: the sandbox provider cannot confine them", "error", err)
			a.unconfinable.Store(true)
			confined = false
		case err != nil:
			return RunAgentResult{}, err
		}
	}
	if !confined {
		if !r.network() {
			a.workerLog(ctx, in.TraceID, "try %d: this host cannot confine the agent to its endpoints: it shares the worker's network", in.Attempt)
		}
		root, err := port.ListenLoopback()
		if err != nil {
			return RunAgentResult{}, err
		}
		spec.Env, spec.Listen, spec.Network = env(root), nil, true
		if sb, err = a.startAgentSandbox(ctx, spec, in.Deadline); err != nil {
			return RunAgentResult{}, err
		}
	}
	defer sb.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // stopped below on every path; this is for panics
	sb.Stdin().Close()                        //nolint:errcheck // the agent reads its task from the environment
	stdoutDone := make(chan struct{})
	go func() {
		defer close(stdoutDone)
		sc := bufio.NewScanner(sb.Stdout())
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			le.logs.add(sandbox.LogLine{Stream: "agent:stdout", Line: sc.Text(), Time: time.Now()})
		}
	}()
	network, where := "confined to its endpoints", "beside the environment"
	switch {
	case !confined:
		network = "on the worker's network"
	case spec.Network:
		network = "its endpoints inside, with the network the task allows"
	}
	switch {
	case inside && ownRoot:
		where = "inside the environment, in its working directory, from its own image"
	case inside:
		where = "inside the environment, in its working directory, from the environment's image (its own at " + sandbox.AgentRootInside + ")"
	}
	a.workerLog(ctx, in.TraceID, "try %d: agent %s started %s (sandbox %s, %s)", in.Attempt, r.agent.ImageName, where, sb.ID(), network)

	timer := time.NewTimer(time.Until(in.Deadline))
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
			<-stdoutDone
			runErr = agentError("the agent exited with an error (%s)%s", exit.Error(), tail.quote())
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
	if err := sb.Stop(context.WithoutCancel(ctx)); err != nil {
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

// agentRecorder makes the calls a brought agent sends through its port and writes them to the
// trace: each model call as an assistant event, each tool call as a tool_call and a tool_result
// event, in the order they are answered.
type agentRecorder struct {
	a   *Activities
	try TryInput
	le  *liveEnv
	r   *runFor
	gw  *inference.Gateway

	mu   sync.Mutex
	next int
	// pending are the tool calls of the latest answer not yet seen through MCP, and step its
	// step: a tool call is recorded under the call id the model gave it when it matches one.
	pending []agent.ToolCall
	step    int
	unnamed int
}

// append writes events at the next seqs, in order.
func (rec *agentRecorder) append(ctx context.Context, evs ...models.TraceEvent) error {
	for i := range evs {
		evs[i].Seq = rec.next
		rec.next++
	}
	return rec.a.Store.AppendTraceEvents(context.WithoutCancel(ctx), evs)
}

// Model relays a model call to the launch's model through the gateway (metered, priced, with
// the launcher's own key when bound) and records the answer.
func (rec *agentRecorder) Model(ctx context.Context, step int, protocol string, body map[string]json.RawMessage, header http.Header, w http.ResponseWriter) error {
	m := rec.r.model
	var name string
	json.Unmarshal(body["model"], &name) //nolint:errcheck // checked below
	if name != m.ModelName && name != m.ID.String() {
		return &agentport.BadRequest{Message: fmt.Sprintf("model %q: this attempt may call %s only", name, m.ModelName)}
	}
	if m.Adapter != protocol {
		return &agentport.BadRequest{Message: fmt.Sprintf("%s is served over the %s API: call it at its base URL", m.ModelName, m.Adapter)}
	}
	// A call its job may no longer pay for is never made, and ends the agent's run.
	if b, err := rec.a.Store.TraceBudget(ctx, rec.try.TraceID); err != nil {
		return err
	} else if b.Reached() {
		return &agentport.Stop{Kind: "budget_exceeded", Message: b.String() + ": this attempt makes no more model calls, and stops"}
	}
	body["model"], _ = json.Marshal(m.ModelName)
	sampling := ""
	if m.TrainingPolicy && protocol == inference.ProtocolOpenAI {
		// A training policy's call is asked for its tokens, as the built-in loop's are: the
		// agent's answer carries them too (fields its SDK leaves alone), and they are kept,
		// streamed or not.
		body["logprobs"], body["return_token_ids"] = json.RawMessage("true"), json.RawMessage("true")
		sampling = samplingOf(body)
	}
	call := inference.Call{Model: m, TeamID: rec.r.trace.TeamID, UserID: rec.r.launched.user, APIKeyID: rec.r.launched.key,
		TraceID: &rec.r.trace.ID, Route: models.RouteAgent}
	started := time.Now().UTC()
	res, err := rec.gw.Relay(ctx, call, inference.RelayRequest{Protocol: protocol, Body: body, Header: header, Capture: true}, w)
	if err != nil {
		return err
	}
	if res.Status >= 300 {
		rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: the provider answered %d", step, res.Status)
		return nil
	}
	out, perr := inference.ParseAnswer(protocol, res.Stream, res.Answer)
	if perr != nil {
		rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: the answer could not be read for the trace: %v", step, perr)
		out = &agent.StepResult{Message: agent.Message{Role: agent.RoleAssistant}}
	}
	var tokensRef *uuid.UUID
	if sampling != "" {
		// Kept even when the agent has hung up: its answer was read to the end, and its event is
		// written all the same. A stream's come in pieces, put together in order.
		tokensOf := agent.OpenAITokensOf
		if res.Stream {
			tokensOf = inference.OpenAIStreamTokens
		}
		if t, terr := tokensOf(res.Answer, sampling); terr != nil {
			rec.a.workerLog(ctx, rec.try.TraceID, "agent model call %d: its tokens could not be read: %v", step, terr)
		} else if tokensRef, terr = rec.a.keepTokens(context.WithoutCancel(ctx), rec.try.TraceID, m.ModelName, t); terr != nil {
			rec.a.log().WarnContext(ctx, "keep an agent's model call's tokens", "trace", rec.try.TraceID, "error", terr)
		}
	}
	ev := rec.a.event(rec.try, 0, models.EventAssistant, out.Message.Content, models.AssistantEventData{
		Step: step, Message: out.Message, Usage: res.Usage, Model: out.Model, TokensRef: tokensRef})
	ev.StartedAt = started
	end := time.Now().UTC()
	ev.EndedAt = &end
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.pending, rec.step = out.Message.ToolCalls, step
	if err := rec.append(ctx, ev); err != nil {
		rec.a.log().WarnContext(ctx, "record an agent's model call", "trace", rec.try.TraceID, "error", err)
	}
	return nil
}

// CallTool makes a tool call the agent sent through MCP in the environment, and records it
// under the call id of the model's matching tool call when there is one.
func (rec *agentRecorder) CallTool(ctx context.Context, name string, args map[string]any) (*agent.ToolResult, error) {
	rec.mu.Lock()
	step, id := rec.step, ""
	for i, tc := range rec.pending {
		if tc.Name == name {
			id = tc.ID
			rec.pending = append(rec.pending[:i:i], rec.pending[i+1:]...)
			break
		}
	}
	if id == "" {
		rec.unnamed++
		id = fmt.Sprintf("mcp-%d", rec.unnamed)
	}
	rec.mu.Unlock()
	started := time.Now().UTC()
	tc := agent.ToolCall{ID: id, Name: name, Arguments: args}
	res, err := rec.le.env.CallAgentTool(ctx, rec.le.tools, tc)
	if err != nil {
		return nil, err
	}
	call, result := rec.a.toolEvents(ctx, rec.try, 0, step, tc, res, started, time.Now().UTC())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if err := rec.append(ctx, call, result); err != nil {
		rec.a.log().WarnContext(ctx, "record an agent's tool call", "trace", rec.try.TraceID, "error", err)
	}
	return res, nil
}

// lineTail keeps the last lines of a stream.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
}

func newLineTail(n int) *lineTail { return &lineTail{max: n} }

func (t *lineTail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// quote is the tail for an error message: "; its stderr ended: …", or "" when it wrote none.
func (t *lineTail) quote() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return ""
	}
	return "; its stderr ended:\n" + strings.Join(t.lines, "\n")
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

// samplingOf is the sampling parameters of a brought agent's chat completion request, as a JSON
// object: every field it set but the conversation, the tools and the model (top_k, min_p, stop,
// n and the like included), and the token fields Proctor added.
func samplingOf(body map[string]json.RawMessage) string {
	out := map[string]json.RawMessage{}
	for k, v := range body {
		switch k {
		case "messages", "tools", "tool_choice", "model", "stream", "stream_options", "user", "metadata":
		default:
			out[k] = v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}
