package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
)

// Task queues. Workflows and activities that need no sandbox run on QueueWorkflows; sandbox
// activities run on the queue a task's resources pick, so that GPU hosts join by polling their
// own queue without any change to the workflows. (The temporal package re-exports them.)
const (
	QueueWorkflows    = "proctor-workflows"
	QueueSandboxesCPU = "sandboxes-cpu"
)

// GPUQueue is the queue of the hosts that have GPUs of the given type.
func GPUQueue(gpuType string) string { return "sandboxes-gpu-" + gpuType }

// Application error types the Rollout workflow branches on: errors of the environment or of the
// model end the attempt as error (reward 0) and are not retried; everything else that fails a
// sandbox activity (a lost worker, a lost sandbox) restarts the try in a fresh sandbox.
const (
	ErrEnvironment = "EnvironmentError"
	ErrModel       = "ModelError"
)

// Defaults of a task's runtime limits.
const (
	DefaultRunTimeoutS     = 600
	DefaultStartupTimeoutS = 120
)

// RolloutPlan is the control data the Rollout workflow needs; the rest stays in the store.
type RolloutPlan struct {
	// Done is set when the trace already finished: the workflow has nothing to do.
	Done            bool    `json:"done,omitempty"`
	Status          string  `json:"status,omitempty"`
	Attempt         int     `json:"attempt"`
	Queue           string  `json:"queue"`
	StartupTimeoutS float64 `json:"startup_timeout_s"`
	RunTimeoutS     float64 `json:"run_timeout_s"`
	MaxSteps        int     `json:"max_steps"`
}

// TryRef names one try of an attempt.
type TryRef struct {
	TraceID uuid.UUID `json:"trace_id"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason,omitempty"`
}

// StepRef names one step of a try.
type StepRef struct {
	TraceID uuid.UUID `json:"trace_id"`
	Attempt int       `json:"attempt"`
	Step    int       `json:"step"`
}

// Started says what StartEnvironment found.
type Started struct {
	Tools int `json:"tools"`
}

// ModelStepResult says whether the model answered without tool calls.
type ModelStepResult struct {
	Done      bool `json:"done"`
	ToolCalls int  `json:"tool_calls"`
}

// Evaluation is what the evaluate calls gave.
type Evaluation struct {
	Reward *float64       `json:"reward"`
	Result map[string]any `json:"result,omitempty"`
	// Error explains a reward of 0 that no evaluation gave (e.g. the task defines none).
	Error string `json:"error,omitempty"`
}

// FinishTrace is how an attempt ended.
type FinishTrace struct {
	TraceID          uuid.UUID      `json:"trace_id"`
	Status           string         `json:"status"`
	StopReason       string         `json:"stop_reason"`
	Error            string         `json:"error,omitempty"`
	Reward           *float64       `json:"reward,omitempty"`
	EvaluationResult map[string]any `json:"evaluation_result,omitempty"`
}

// JobStatus sets a job's status.
type JobStatus struct {
	JobID  uuid.UUID `json:"job_id"`
	Status string    `json:"status"`
}

// ModelFactory builds the model an attempt runs on; validation is the task's validation calls,
// which the oracle replays.
type ModelFactory func(m *models.LLMModel, validation []map[string]any) (agent.Model, error)

// DefaultModels builds models from the catalog: the oracle, OpenAI-compatible servers and
// Anthropic, with keys read from the environment variable the entry names.
func DefaultModels(m *models.LLMModel, validation []map[string]any) (agent.Model, error) {
	switch m.Adapter {
	case models.AdapterOracle:
		calls, err := agent.ParseValidation(validation)
		if err != nil {
			return nil, err
		}
		return agent.NewOracle(calls), nil
	case models.AdapterOpenAI:
		return agent.NewOpenAI(agent.OpenAIConfig{BaseURL: m.BaseURL, APIKey: os.Getenv(m.APIKeyEnv), Model: m.ModelName})
	case models.AdapterAnthropic:
		return agent.NewAnthropic(agent.AnthropicConfig{BaseURL: m.BaseURL, APIKey: os.Getenv(m.APIKeyEnv), Model: m.ModelName})
	default:
		return nil, fmt.Errorf("model %s: unknown adapter %q", m.ModelName, m.Adapter)
	}
}

// liveEnv is an environment this worker runs for one try of an attempt.
type liveEnv struct {
	sb       sandbox.Sandbox
	env      *agent.Env
	tools    []agent.Tool
	evaluate []agent.Call
	logs     *logSink
}

// Envs holds the environments live on this worker, by trace. Sandbox activities of a try are
// pinned to this worker by a Temporal session, so they find the try's environment here.
type Envs struct {
	mu   sync.Mutex
	byID map[uuid.UUID]*liveEnv
}

// NewEnvs returns an empty registry.
func NewEnvs() *Envs { return &Envs{byID: map[uuid.UUID]*liveEnv{}} }

func (e *Envs) get(id uuid.UUID) *liveEnv {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.byID[id]
}

func (e *Envs) put(id uuid.UUID, le *liveEnv) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byID[id] = le
}

func (e *Envs) take(id uuid.UUID) *liveEnv {
	e.mu.Lock()
	defer e.mu.Unlock()
	le := e.byID[id]
	delete(e.byID, id)
	return le
}

func envError(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrEnvironment, nil)
}

// runFor is everything an activity needs about an attempt, read from the store.
type runFor struct {
	trace   *models.Trace
	version models.TaskVersion
	build   *models.Build
	model   *models.LLMModel
}

func (a *Activities) load(ctx context.Context, traceID uuid.UUID) (*runFor, error) {
	r := &runFor{trace: new(models.Trace)}
	db := a.Store.DB
	if err := db.NewSelect().Model(r.trace).Where("id = ?", traceID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load trace %s: %w", traceID, err)
	}
	if r.trace.TaskVersionID == nil {
		return nil, envError("trace %s has no task version", traceID)
	}
	if err := db.NewSelect().Model(&r.version).Where("id = ?", *r.trace.TaskVersionID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load task version: %w", err)
	}
	if r.version.RegistryID != nil {
		var reg models.Registry
		if err := db.NewSelect().Model(&reg).Where("id = ?", *r.version.RegistryID).Scan(ctx); err != nil {
			return nil, fmt.Errorf("load environment: %w", err)
		}
		if reg.LatestBuildID != nil {
			r.build = new(models.Build)
			if err := db.NewSelect().Model(r.build).Where("id = ?", *reg.LatestBuildID).Scan(ctx); err != nil {
				return nil, fmt.Errorf("load build: %w", err)
			}
		}
	}
	if r.trace.ModelID != nil {
		r.model = new(models.LLMModel)
		if err := db.NewSelect().Model(r.model).Where("id = ?", *r.trace.ModelID).Scan(ctx); err != nil {
			return nil, fmt.Errorf("load model: %w", err)
		}
	}
	return r, nil
}

// network reports whether the runtime config lets the environment reach beyond loopback
// (runtime_config.network: true, the trace's over the task version's).
func (r *runFor) network() bool {
	allow := false
	for _, rc := range []map[string]any{r.version.RuntimeConfig, r.trace.RuntimeConfig} {
		if v, ok := rc["network"].(bool); ok {
			allow = v
		}
	}
	return allow
}

// runtime reads a runtime config's limits and resources, the trace's over the task version's.
func (r *runFor) runtime() (run, startup float64, res sandbox.Resources) {
	run, startup = DefaultRunTimeoutS, DefaultStartupTimeoutS
	for _, rc := range []map[string]any{r.version.RuntimeConfig, r.trace.RuntimeConfig} {
		if lim, ok := rc["limits"].(map[string]any); ok {
			if v, ok := lim["run_timeout_s"].(float64); ok && v > 0 {
				run = v
			}
			if v, ok := lim["startup_timeout_s"].(float64); ok && v > 0 {
				startup = v
			}
		}
		if rs, ok := rc["resources"].(map[string]any); ok {
			if v, ok := rs["cpu"].(float64); ok {
				res.CPU = v
			}
			if v, ok := rs["memory_mb"].(float64); ok {
				res.MemoryMB = int(v)
			}
			if g, ok := rs["gpu"].(map[string]any); ok {
				if v, ok := g["count"].(float64); ok {
					res.GPU.Count = int(v)
				}
				if v, ok := g["type"].(string); ok {
					res.GPU.Type = v
				}
			}
		}
	}
	return run, startup, res
}

// PrepareRollout reads what the workflow needs to run an attempt and checks it can run at all.
func (a *Activities) PrepareRollout(ctx context.Context, traceID uuid.UUID) (RolloutPlan, error) {
	r, err := a.load(ctx, traceID)
	if err != nil {
		return RolloutPlan{}, err
	}
	if models.Terminal(r.trace.Status) {
		return RolloutPlan{Done: true, Status: r.trace.Status}, nil
	}
	if r.model == nil {
		return RolloutPlan{}, envError("the trace names no model")
	}
	if _, err := a.models()(r.model, r.version.Validation); err != nil {
		return RolloutPlan{}, envError("model %s: %v", r.model.ModelName, err)
	}
	if _, err := buildCommand(r.build); err != nil {
		return RolloutPlan{}, err
	}
	run, startup, res := r.runtime()
	queue := QueueSandboxesCPU
	if res.GPU.Count > 0 {
		queue = GPUQueue(res.GPU.Type)
	}
	a.workerLog(ctx, traceID, "planned: queue %s, run_timeout_s %g, startup_timeout_s %g, max_steps %d", queue, run, startup, r.trace.MaxSteps)
	return RolloutPlan{Attempt: r.trace.Attempt, Queue: queue, StartupTimeoutS: startup, RunTimeoutS: run, MaxSteps: r.trace.MaxSteps}, nil
}

// buildCommand is how a build runs: its runtime config's "command" (argv). Builds of the local
// process provider record the built binary there.
func buildCommand(b *models.Build) ([]string, error) {
	if b == nil {
		return nil, envError("the task's environment has no build to run")
	}
	raw, _ := b.RuntimeConfig["command"].([]any)
	var argv []string
	for _, v := range raw {
		if s, ok := v.(string); ok {
			argv = append(argv, s)
		}
	}
	if len(argv) == 0 {
		return nil, envError("build %s of the environment records no command to run", b.ID)
	}
	return argv, nil
}

func (a *Activities) models() ModelFactory {
	if a.Models != nil {
		return a.Models
	}
	return DefaultModels
}

// StartEnvironment provisions a sandbox, starts the environment's MCP server in it, initializes
// it, renders the task's prompt and runs its setup. It writes the opening events of the try.
func (a *Activities) StartEnvironment(ctx context.Context, ref TryRef) (Started, error) {
	if a.Sandboxes == nil || a.Envs == nil {
		return Started{}, errors.New("this worker runs no sandboxes")
	}
	r, err := a.load(ctx, ref.TraceID)
	if err != nil {
		return Started{}, err
	}
	argv, err := buildCommand(r.build)
	if err != nil {
		return Started{}, err
	}
	now := time.Now().UTC()
	if _, err := a.Store.TransitionTrace(ctx, ref.TraceID, models.TraceUpdate{Status: models.TraceInitializing, Attempt: ref.Attempt, StartTime: &now}); err != nil {
		return Started{}, err
	}
	_, _, res := r.runtime()
	logs, err := a.newLogSink(ctx, ref.TraceID)
	if err != nil {
		return Started{}, err
	}
	sb, err := a.Sandboxes.Start(ctx, sandbox.Spec{
		ID: fmt.Sprintf("%s-%d", ref.TraceID, ref.Attempt), Command: argv, Resources: res, OnLog: logs.add, Network: r.network(),
	})
	if err != nil {
		logs.close(context.WithoutCancel(ctx))
		if errors.Is(err, sandbox.ErrInvalidSpec) {
			return Started{}, envError("start the environment: %v", err)
		}
		return Started{}, fmt.Errorf("provision sandbox: %w", err)
	}
	a.workerLog(ctx, ref.TraceID, "try %d: sandbox %s started (%s)", ref.Attempt, sb.ID(), strings.Join(argv, " "))
	le := &liveEnv{sb: sb, logs: logs}
	a.Envs.put(ref.TraceID, le)

	heartbeat(ctx, "initialize")
	env, err := agent.Connect(ctx, sb.Stdout(), sb.Stdin(), agent.ConnectOptions{ClientName: "proctor", Logger: a.log()})
	if err != nil {
		return Started{}, envError("initialize the environment: %v", err)
	}
	le.env = env
	tools, err := env.Tools(ctx)
	if err != nil {
		return Started{}, envError("list tools: %v", err)
	}
	cfg, err := agent.ParseAgentConfig(r.version.AgentConfig)
	if err != nil {
		return Started{}, envError("agent_config: %v", err)
	}
	le.tools = agent.FilterTools(tools, cfg)

	prompt := r.version.Prompt
	var setup []agent.Call
	if r.version.Scenario != "" {
		sc, err := env.Scenario(ctx, r.version.Scenario, r.version.Args)
		if err != nil {
			return Started{}, envError("scenario %s: %v", r.version.Scenario, err)
		}
		prompt, setup, le.evaluate = sc.Prompt, sc.Setup, sc.Evaluate
		if r.version.Prompt != "" {
			prompt = r.version.Prompt
		}
	}
	system := agent.SystemPrompt(r.version.SystemPrompt, cfg)
	seq, err := a.nextSeq(ctx, ref.TraceID)
	if err != nil {
		return Started{}, err
	}
	events := []models.TraceEvent{
		a.event(ref, seq, models.EventSystem, system, map[string]any{"tools": le.tools}),
	}
	seq++
	for _, c := range setup {
		heartbeat(ctx, "setup")
		res, err := env.Call(ctx, c)
		if err != nil {
			return Started{}, envError("setup %s: %v", c.Name, err)
		}
		events = append(events, a.event(ref, seq, models.EventSetup, c.Name, map[string]any{"call": c, "result": res}))
		seq++
		if res.IsError {
			a.Store.AppendTraceEvents(ctx, events) //nolint:errcheck // recorded best effort; the error is returned
			return Started{}, envError("setup %s failed: %s", c.Name, res.Text)
		}
	}
	events = append(events, a.event(ref, seq, models.EventUser, prompt, map[string]any{"message": agent.Message{Role: "user", Content: prompt}}))
	if err := a.Store.AppendTraceEvents(ctx, events); err != nil {
		return Started{}, err
	}
	if _, err := a.Store.TransitionTrace(ctx, ref.TraceID, models.TraceUpdate{Status: models.TraceRunning}); err != nil {
		return Started{}, err
	}
	return Started{Tools: len(le.tools)}, nil
}

// ModelStep makes one inference call. The conversation is rebuilt from the trace's events, so any
// worker can run it; a retried ModelStep that already wrote its answer returns it without calling
// the model again.
func (a *Activities) ModelStep(ctx context.Context, ref StepRef) (ModelStepResult, error) {
	evs, err := a.Store.TraceEvents(ctx, ref.TraceID, -1, false)
	if err != nil {
		return ModelStepResult{}, err
	}
	var req agent.StepRequest
	for _, e := range evs {
		if e.Attempt != ref.Attempt {
			continue
		}
		switch e.Kind {
		case models.EventSystem:
			req.System = e.Text
			if err := remarshal(e.Data["tools"], &req.Tools); err != nil {
				return ModelStepResult{}, fmt.Errorf("rebuild tools: %w", err)
			}
		case models.EventUser, models.EventAssistant, models.EventToolResult:
			var m agent.Message
			if err := remarshal(e.Data["message"], &m); err != nil {
				return ModelStepResult{}, fmt.Errorf("rebuild conversation at seq %d: %w", e.Seq, err)
			}
			if e.Kind == models.EventAssistant && intOf(e.Data["step"]) == ref.Step {
				return ModelStepResult{Done: len(m.ToolCalls) == 0, ToolCalls: len(m.ToolCalls)}, nil
			}
			req.Messages = append(req.Messages, m)
		}
	}
	r, err := a.load(ctx, ref.TraceID)
	if err != nil {
		return ModelStepResult{}, err
	}
	model, err := a.models()(r.model, r.version.Validation)
	if err != nil {
		return ModelStepResult{}, temporal.NewNonRetryableApplicationError(err.Error(), ErrModel, err)
	}
	started := time.Now().UTC()
	out, err := model.Step(ctx, req)
	if err != nil {
		var apiErr *agent.APIError
		if errors.As(err, &apiErr) && apiErr.Retryable {
			a.workerLog(ctx, ref.TraceID, "model step %d: %v (retrying)", ref.Step, err)
			return ModelStepResult{}, err
		}
		return ModelStepResult{}, temporal.NewNonRetryableApplicationError(fmt.Sprintf("model step %d: %v", ref.Step, err), ErrModel, err)
	}
	seq, err := a.nextSeq(ctx, ref.TraceID)
	if err != nil {
		return ModelStepResult{}, err
	}
	ev := a.event(StepRefTry(ref), seq, models.EventAssistant, out.Message.Content, map[string]any{
		"step": ref.Step, "message": out.Message, "usage": out.Usage, "model": out.Model,
	})
	ev.StartedAt = started
	end := time.Now().UTC()
	ev.EndedAt = &end
	if err := a.Store.AppendTraceEvents(ctx, []models.TraceEvent{ev}); err != nil {
		return ModelStepResult{}, err
	}
	return ModelStepResult{Done: out.Done, ToolCalls: len(out.Message.ToolCalls)}, nil
}

// StepRefTry is the try a step belongs to.
func StepRefTry(s StepRef) TryRef { return TryRef{TraceID: s.TraceID, Attempt: s.Attempt} }

// ToolStep makes the tool calls of one model step in the try's environment and records each
// call and result.
func (a *Activities) ToolStep(ctx context.Context, ref StepRef) error {
	le := a.Envs.get(ref.TraceID)
	if le == nil || le.env == nil {
		return fmt.Errorf("tool step: the environment of trace %s is not live on this worker", ref.TraceID)
	}
	evs, err := a.Store.TraceEvents(ctx, ref.TraceID, -1, false)
	if err != nil {
		return err
	}
	var calls []agent.ToolCall
	done := map[string]bool{}
	for _, e := range evs {
		if e.Attempt != ref.Attempt {
			continue
		}
		if e.Kind == models.EventAssistant && intOf(e.Data["step"]) == ref.Step {
			var m agent.Message
			if err := remarshal(e.Data["message"], &m); err != nil {
				return err
			}
			calls = m.ToolCalls
		}
		if e.Kind == models.EventToolResult {
			if id, _ := e.Data["call_id"].(string); id != "" {
				done[id] = true
			}
		}
	}
	for _, tc := range calls {
		if done[tc.ID] {
			continue
		}
		heartbeat(ctx, tc.Name)
		started := time.Now().UTC()
		res, err := le.env.CallAgentTool(ctx, le.tools, tc)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			select {
			case <-le.sb.Done():
				return envError("tool %s: the environment exited: %v", tc.Name, le.sb.Err())
			default:
			}
			return envError("tool %s: %v", tc.Name, err)
		}
		seq, err := a.nextSeq(ctx, ref.TraceID)
		if err != nil {
			return err
		}
		end := time.Now().UTC()
		call := a.event(StepRefTry(ref), seq, models.EventToolCall, tc.Name, map[string]any{"step": ref.Step, "call_id": tc.ID, "name": tc.Name, "arguments": tc.Arguments})
		call.StartedAt = started
		result := a.event(StepRefTry(ref), seq+1, models.EventToolResult, res.Text, map[string]any{
			"step": ref.Step, "call_id": tc.ID, "name": tc.Name, "is_error": res.IsError, "structured": res.Structured,
			"message": agent.Message{Role: "tool", Content: res.Text, ToolCallID: tc.ID, IsError: res.IsError},
		})
		result.ParentID, result.StartedAt, result.EndedAt = call.ID, started, &end
		if err := a.Store.AppendTraceEvents(ctx, []models.TraceEvent{call, result}); err != nil {
			return err
		}
	}
	return nil
}

// Evaluate runs the task's evaluate calls and extracts the reward. Without evaluate calls the
// reward is 0 and the result says why.
func (a *Activities) Evaluate(ctx context.Context, ref TryRef) (Evaluation, error) {
	le := a.Envs.get(ref.TraceID)
	if le == nil || le.env == nil {
		return Evaluation{}, fmt.Errorf("evaluate: the environment of trace %s is not live on this worker", ref.TraceID)
	}
	zero := 0.0
	if len(le.evaluate) == 0 {
		return Evaluation{Reward: &zero, Result: map[string]any{"reward": 0.0, "reason": "the task defines no evaluation"}}, nil
	}
	seq, err := a.nextSeq(ctx, ref.TraceID)
	if err != nil {
		return Evaluation{}, err
	}
	var total float64
	var result map[string]any
	var reasons []string
	for _, c := range le.evaluate {
		heartbeat(ctx, "evaluate")
		res, err := le.env.Call(ctx, c)
		if err != nil {
			return Evaluation{}, envError("evaluate %s: %v", c.Name, err)
		}
		reward, done, info, reason := agent.ExtractReward(res)
		total += reward
		result = map[string]any{"reward": reward, "done": done, "info": info, "content": res.Text}
		if reason != "" {
			reasons = append(reasons, reason)
			result["reason"] = reason
		}
		if err := a.Store.AppendTraceEvents(ctx, []models.TraceEvent{a.event(ref, seq, models.EventEvaluate, c.Name, map[string]any{"call": c, "result": res, "reward": reward})}); err != nil {
			return Evaluation{}, err
		}
		seq++
	}
	mean := total / float64(len(le.evaluate))
	result["reward"] = mean
	return Evaluation{Reward: &mean, Result: result, Error: strings.Join(reasons, "; ")}, nil
}

// Teardown closes the environment and stops its sandbox; it runs on every path and is a no-op
// when nothing is live.
func (a *Activities) Teardown(ctx context.Context, ref TryRef) error {
	if a.Envs == nil {
		return nil
	}
	le := a.Envs.take(ref.TraceID)
	if le == nil {
		return nil
	}
	if le.env != nil {
		le.env.Close() //nolint:errcheck // the sandbox stops next either way
	}
	err := le.sb.Stop(ctx)
	le.logs.close(ctx)
	a.workerLog(ctx, ref.TraceID, "try %d: sandbox %s stopped", ref.Attempt, le.sb.ID())
	return err
}

// FinishTrace writes how an attempt ended, and completes a single-run job whose traces all ended.
func (a *Activities) FinishTrace(ctx context.Context, f FinishTrace) error {
	now := time.Now().UTC()
	u := models.TraceUpdate{Status: f.Status, StopReason: f.StopReason, Error: f.Error, Reward: f.Reward, EvaluationResult: f.EvaluationResult, EndTime: &now}
	if f.Status == models.TraceError && f.Reward == nil {
		zero := 0.0
		u.Reward = &zero
	}
	if _, err := a.Store.TransitionTrace(ctx, f.TraceID, u); err != nil {
		return err
	}
	a.workerLog(ctx, f.TraceID, "finished: %s (%s) %s", f.Status, f.StopReason, f.Error)
	return a.Store.SettleSingleRunJob(ctx, f.TraceID)
}

// SupersedeTry marks a failed try's events superseded.
func (a *Activities) SupersedeTry(ctx context.Context, ref TryRef) error {
	a.workerLog(ctx, ref.TraceID, "try %d failed on infrastructure (%s): retrying in a fresh sandbox", ref.Attempt, ref.Reason)
	return a.Store.SupersedeAttempt(ctx, ref.TraceID, ref.Attempt)
}

// JobTraces lists a job's traces in launch order.
func (a *Activities) JobTraces(ctx context.Context, jobID uuid.UUID) ([]uuid.UUID, error) {
	return a.Store.JobTraceIDs(ctx, jobID)
}

// SetJobStatus records a job's status.
func (a *Activities) SetJobStatus(ctx context.Context, s JobStatus) error {
	return a.Store.SetJobStatus(ctx, s.JobID, s.Status)
}

// CancelPendingTraces cancels the traces of a job that never started.
func (a *Activities) CancelPendingTraces(ctx context.Context, jobID uuid.UUID) error {
	_, err := a.Store.CancelPendingTraces(ctx, jobID)
	return err
}

// MarkJobCancelling cancels a job's traces that never started and marks live ones cancelling;
// it returns the live ones, whose workflows must be cancelled.
func (a *Activities) MarkJobCancelling(ctx context.Context, jobID uuid.UUID) ([]uuid.UUID, error) {
	return a.Store.MarkJobCancelling(ctx, jobID)
}

func (a *Activities) event(ref TryRef, seq int, kind, text string, data map[string]any) models.TraceEvent {
	return models.TraceEvent{TraceID: ref.TraceID, Seq: seq, Attempt: ref.Attempt, Kind: kind, Text: text, Data: jsonSafe(data), StartedAt: time.Now().UTC()}
}

func (a *Activities) nextSeq(ctx context.Context, traceID uuid.UUID) (int, error) {
	seq, err := a.Store.LatestSeq(ctx, traceID)
	return seq + 1, err
}

func (a *Activities) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// workerLog appends a line to the attempt's worker log (best effort: a log line never fails an
// activity).
func (a *Activities) workerLog(ctx context.Context, traceID uuid.UUID, format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	a.log().Info(line, "trace", traceID)
	seq, err := a.Store.NextLogSeq(ctx, traceID, models.LogWorker)
	if err == nil {
		err = a.Store.AppendTraceLogs(ctx, []models.TraceLog{{TraceID: traceID, Source: models.LogWorker, Seq: seq, Stream: "worker", Line: line, Time: time.Now().UTC()}})
	}
	if err != nil {
		a.log().Warn("write worker log", "trace", traceID, "error", err)
	}
}

// logSink batches an environment's stderr lines into the store.
type logSink struct {
	a       *Activities
	traceID uuid.UUID
	mu      sync.Mutex
	pending []models.TraceLog
	next    int
	stop    chan struct{}
	done    chan struct{}
}

func (a *Activities) newLogSink(ctx context.Context, traceID uuid.UUID) (*logSink, error) {
	next, err := a.Store.NextLogSeq(ctx, traceID, models.LogEnv)
	if err != nil {
		return nil, err
	}
	s := &logSink{a: a, traceID: traceID, next: next, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *logSink) add(l sandbox.LogLine) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, models.TraceLog{TraceID: s.traceID, Source: models.LogEnv, Seq: s.next, Stream: l.Stream, Line: l.Line, Time: l.Time.UTC()})
	s.next++
}

func (s *logSink) flush(ctx context.Context) {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if err := s.a.Store.AppendTraceLogs(ctx, batch); err != nil {
		s.a.log().Warn("write environment logs", "trace", s.traceID, "error", err)
	}
}

func (s *logSink) loop() {
	defer close(s.done)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.flush(context.Background())
		case <-s.stop:
			return
		}
	}
}

func (s *logSink) close(ctx context.Context) {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
	s.flush(ctx)
}

func heartbeat(ctx context.Context, detail string) {
	if activity.IsActivity(ctx) {
		activity.RecordHeartbeat(ctx, detail)
	}
}

// remarshal converts a JSON-decoded value into a typed one.
func remarshal(in any, out any) error {
	if in == nil {
		return nil
	}
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// jsonSafe round-trips event data through JSON so that what is stored is what is read back.
func jsonSafe(m map[string]any) map[string]any {
	b, err := json.Marshal(m)
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	var out map[string]any
	json.Unmarshal(b, &out) //nolint:errcheck // our own output
	return out
}

func intOf(v any) int {
	switch n := v.(type) {
	case float64:
		return int(n)
	case int:
		return n
	case json.Number:
		i, _ := n.Int64()
		return int(i)
	}
	return -1
}
