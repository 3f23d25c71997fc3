package activities

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/inference"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/rollouts"
	"github.com/proctorhq/proctor/workflows/names"
)

// Application error types the Rollout workflow branches on: errors of the environment or of the
// model end the attempt as error (reward 0) and are not retried; ErrTraceClosed means the trace
// ended (was cancelled) before its sandbox started; ErrCapacity is a host with no free sandbox
// slot, retried (possibly on another host) until startup_timeout_s. Everything else that fails a
// sandbox activity (a lost worker, a lost sandbox) restarts the try in a fresh sandbox. ErrBudget
// is a model call its job's max_cost_usd refused: the attempt ends cancelled, stop reason budget.
const (
	ErrEnvironment = "EnvironmentError"
	ErrModel       = "ModelError"
	ErrTraceClosed = "TraceClosed"
	ErrCapacity    = "SandboxCapacity"
	ErrBudget      = "BudgetReached"
)

// Defaults of a task's runtime limits.
const (
	DefaultRunTimeoutS     = 600
	DefaultStartupTimeoutS = 120
)

// PrepareRolloutInput names the attempt to plan.
type PrepareRolloutInput struct {
	TraceID uuid.UUID `json:"trace_id"`
}

// PrepareRolloutResult is the control data the Rollout workflow needs; the rest stays in the
// store.
type PrepareRolloutResult struct {
	// Done is set when the trace already finished: the workflow has nothing to do.
	Done   bool   `json:"done,omitempty"`
	Status string `json:"status,omitempty"`
	// Attempt is the last try recorded on the trace (0 before the first).
	Attempt int `json:"attempt"`
	// Queue is where the sandbox starts: names.QueueSandboxesCPU or a names.GPUQueue.
	Queue           string  `json:"queue"`
	StartupTimeoutS float64 `json:"startup_timeout_s"`
	RunTimeoutS     float64 `json:"run_timeout_s"`
	MaxSteps        int     `json:"max_steps"`
	// Agent: the attempt runs a brought agent (RunAgent) instead of the built-in loop.
	Agent bool `json:"agent,omitempty"`
}

// ModelFactory builds the model an attempt runs on (see inference.Factory).
type ModelFactory = inference.Factory

// agentConfig is the part of a task's agent config the agent loop uses.
func agentConfig(c models.AgentConfig) agent.AgentConfig {
	return agent.AgentConfig{AllowedTools: c.AllowedTools, DisallowedTools: c.DisallowedTools, SystemPrompt: c.SystemPrompt}
}

func (a *Activities) models() ModelFactory {
	if a.Models != nil {
		return a.Models
	}
	return inference.DefaultModels
}

func envError(format string, args ...any) error {
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), ErrEnvironment, nil)
}

// TimeoutMultiplierEnv is the variable the sandbox of a job launched with a timeout multiplier
// finds it in (the shell server scales a Harbor task's verifier and healthcheck by it).
const TimeoutMultiplierEnv = harbor.TimeoutMultiplierEnv

// runFor is everything an activity needs about an attempt, read from the store.
type runFor struct {
	trace   *models.Trace
	version models.TaskVersion
	build   *models.Build
	model   *models.LLMModel
	// agent is the brought agent's build the attempt runs; nil for the built-in loop.
	agent *models.Build
	// launched is who launched the attempt's job.
	launched launchedBy
	// budgeted: the job has a ceiling, which each model call checks first.
	budgeted bool
	// timeoutMultiplier scales its times (the job's timeout_multiplier; 1 without).
	timeoutMultiplier float64
}

// args are the scenario's arguments: the launch's, merged over the version's, or the version's.
func (r *runFor) args() map[string]any {
	if r.trace.ScenarioArgs != nil {
		return r.trace.ScenarioArgs
	}
	return r.version.Args
}

// agentConfig is the launch's agent config, merged over the version's, or the version's.
func (r *runFor) agentConfig() models.AgentConfig {
	if r.trace.AgentConfig != nil {
		return *r.trace.AgentConfig
	}
	return r.version.AgentConfig
}

func (a *Activities) load(ctx context.Context, traceID uuid.UUID) (*runFor, error) {
	run, err := a.rollouts().LoadRun(ctx, traceID)
	var imageErr *rollouts.RunImageError
	switch {
	case errors.Is(err, rollouts.ErrNoTaskVersion):
		return nil, envError("trace %s has no task version", traceID)
	case errors.As(err, &imageErr):
		return nil, envError("%v", imageErr)
	case err != nil:
		return nil, err
	}
	return &runFor{trace: &run.Trace, version: run.Version, build: run.Build, model: run.Model, agent: run.Agent,
		launched: launchedBy{user: run.LaunchedBy, key: run.LaunchKey}, budgeted: run.Budgeted, timeoutMultiplier: run.TimeoutMultiplier}, nil
}

// network reports whether the runtime config lets the environment reach beyond loopback.
func (r *runFor) network() bool {
	n := r.trace.RuntimeConfig.Network
	return n != nil && *n
}

// agentsInside reports whether the environment takes brought agents inside: its task's runtime
// config says so, or else its build's. A launch's runtime config does not decide it: whoever
// launches is not who vouches for the environment.
func (r *runFor) agentsInside() bool {
	if v := r.version.RuntimeConfig.AgentsInside; v != nil {
		return *v
	}
	return r.build != nil && r.build.RuntimeConfig.AgentsInside != nil && *r.build.RuntimeConfig.AgentsInside
}

// runtime reads the trace's runtime config (its task version's, with the launch's overrides):
// the limits, defaulted and scaled by the job's timeout multiplier, and the resources.
func (r *runFor) runtime() (run, startup float64, res sandbox.Resources) {
	rc := r.trace.RuntimeConfig
	run, startup = DefaultRunTimeoutS, DefaultStartupTimeoutS
	if l := rc.Limits; l != nil {
		if l.RunTimeoutS != nil && *l.RunTimeoutS > 0 {
			run = *l.RunTimeoutS
		}
		if l.StartupTimeoutS != nil && *l.StartupTimeoutS > 0 {
			startup = *l.StartupTimeoutS
		}
	}
	if m := r.timeoutMultiplier; m > 0 && m != 1 {
		run, startup = run*m, startup*m
	}
	if rs := rc.Resources; rs != nil {
		if rs.CPU != nil {
			res.CPU = *rs.CPU
		}
		if rs.MemoryMB != nil {
			res.MemoryMB = *rs.MemoryMB
		}
		if rs.GPU != nil {
			res.GPU.Count, res.GPU.Type = rs.GPU.Count, rs.GPU.Type
		}
	}
	return run, startup, res
}

// PrepareRollout reads what the workflow needs to run an attempt and checks it can run at all.
// It runs as a local activity of the Rollout workflow.
func (a *Activities) PrepareRollout(ctx context.Context, in PrepareRolloutInput) (PrepareRolloutResult, error) {
	r, err := a.load(ctx, in.TraceID)
	if err != nil {
		return PrepareRolloutResult{}, err
	}
	if rollouts.Terminal(r.trace.Status) {
		return PrepareRolloutResult{Done: true, Status: r.trace.Status}, nil
	}
	if r.model == nil {
		return PrepareRolloutResult{}, envError("the trace names no model")
	}
	switch {
	case r.model.Adapter == models.AdapterReplay:
		// Built from the attempt it replays, once the try runs (replayModel).
		if r.trace.ReplayOf == nil {
			return PrepareRolloutResult{}, envError("model %s answers only a replay check's attempts (proctor env check BUILD --against JOB), "+
				"each of which names the attempt it replays", r.model.ModelName)
		}
	default:
		if _, err := a.models()(r.model, r.version.Validation, ""); err != nil {
			return PrepareRolloutResult{}, envError("model %s: %v", r.model.ModelName, err)
		}
	}
	if _, err := buildCommand(r.build); err != nil {
		return PrepareRolloutResult{}, err
	}
	if r.agent != nil {
		if r.model.Builtin() {
			return PrepareRolloutResult{}, envError("a brought agent calls models through the gateway, and the %s answers none: launch it with a catalog model", r.model.BuiltinName())
		}
		if len(r.agent.RuntimeConfig.Command) == 0 {
			return PrepareRolloutResult{}, agentError("build %d of the agent records no command to run", r.agent.Version)
		}
		if r.agent.RuntimeConfig.Inside() && !r.agentsInside() {
			return PrepareRolloutResult{}, envError("the agent runs inside the environment, and the environment does not take agents inside: " +
				"deploy it with runtime_config.agents_inside (proctor env deploy --agents-inside), or set it in the task's runtime_config")
		}
	}
	run, startup, res := r.runtime()
	queue := names.QueueSandboxesCPU
	if res.GPU.Count > 0 {
		queue = names.GPUQueue(res.GPU.Type)
	}
	a.workerLog(ctx, in.TraceID, "planned: queue %s, run_timeout_s %g, startup_timeout_s %g, max_steps %d", queue, run, startup, r.trace.MaxSteps)
	return PrepareRolloutResult{Attempt: r.trace.Attempt, Queue: queue, StartupTimeoutS: startup, RunTimeoutS: run, MaxSteps: r.trace.MaxSteps,
		Agent: r.agent != nil}, nil
}

// buildCommand is how a build runs: its runtime config's "command" (argv). Builds of the local
// process provider record the built binary there.
func buildCommand(b *models.Build) ([]string, error) {
	if b == nil {
		return nil, envError("the task's environment has no build to run")
	}
	argv := b.RuntimeConfig.Command
	if len(argv) == 0 {
		return nil, envError("build %s of the environment records no command to run", b.ID)
	}
	return argv, nil
}
