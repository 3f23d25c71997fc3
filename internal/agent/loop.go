package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrSetupFailed is wrapped by [RunEpisode]'s error when a setup call answers with a tool
// error: the environment could not prepare the task, so there is nothing to evaluate.
var ErrSetupFailed = errors.New("setup failed")

// Episode is one attempt as [RunEpisode] runs it.
type Episode struct {
	// Scenario, when set, is rendered with Args: its prompt is the task, its setup and
	// evaluate calls prepare and score it.
	Scenario string
	Args     map[string]any
	// Prompt is the task when there is no scenario; with one, it is appended to the
	// scenario's prompt.
	Prompt string
	// Setup and Evaluate, when set, replace the scenario's calls.
	Setup, Evaluate []Call
	// SystemPrompt is the task's system prompt; AgentConfig narrows the tools and adds to it.
	SystemPrompt string
	AgentConfig  AgentConfig
	// MaxSteps bounds the model calls; 0 means 50.
	MaxSteps int
	// MaxTokens bounds each answer; 0 leaves it to the model's configuration.
	MaxTokens int
}

// Stop reasons of an episode, as the trace records them.
const (
	StopDone     = "done"
	StopMaxSteps = "max_steps"
)

// EpisodeResult is what an episode did and earned.
type EpisodeResult struct {
	// Messages is the conversation, the prompt first.
	Messages []Message
	// Steps counts the model calls.
	Steps int
	// StopReason is StopDone or StopMaxSteps.
	StopReason string
	// Usage sums the tokens of all steps.
	Usage Usage
	// Reward, Done, Info and RewardReason are [ExtractReward]'s reading of the evaluation:
	// the mean reward of the evaluate calls, done when all say so, the last call's info, and
	// the reasons of those that gave no reward.
	Reward       float64
	Done         bool
	Info         map[string]any
	RewardReason string
	// Evaluations are the results of the evaluate calls, in order.
	Evaluations []*ToolResult
}

// RunEpisode runs one attempt in one process: render the scenario, run setup, let model work
// with the tools the agent config allows until it answers without tool calls or MaxSteps is
// reached, then evaluate. The rollout workflow does the same across activities (each model
// step and each tool step its own, the conversation kept in the trace); RunEpisode is the
// reference for that sequence and what tests and benchmarks run directly.
//
// Errors: a Go error of env or model ends the episode with it; a setup tool error wraps
// [ErrSetupFailed]; tool errors during the loop are the agent's to read; evaluate tool errors
// give reward 0 with the reason.
func RunEpisode(ctx context.Context, env *Env, model Model, ep Episode) (*EpisodeResult, error) {
	op, err := Open(ctx, env, ep)
	if err != nil {
		return nil, fmt.Errorf("run episode: %w", err)
	}
	for _, c := range op.Setup {
		res, err := env.Call(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("run episode: setup %s %s: %w", c.Hub, c.Name, err)
		}
		if res.IsError {
			return nil, fmt.Errorf("run episode: %w: %s %s: %s", ErrSetupFailed, c.Hub, c.Name, res.Text)
		}
	}
	prompt, tools, evaluate := op.Prompt, op.Tools, op.Evaluate
	maxSteps := ep.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 50
	}
	out := &EpisodeResult{Messages: []Message{{Role: RoleUser, Content: prompt}}, StopReason: StopMaxSteps}
	req := StepRequest{System: op.System, Tools: tools, MaxTokens: ep.MaxTokens}
	for out.Steps < maxSteps {
		req.Messages = out.Messages
		step, err := model.Step(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("run episode: step %d: %w", out.Steps+1, err)
		}
		out.Steps++
		out.Usage.InputTokens += step.Usage.InputTokens
		out.Usage.OutputTokens += step.Usage.OutputTokens
		out.Messages = append(out.Messages, step.Message)
		if step.Done {
			out.StopReason = StopDone
			break
		}
		for _, tc := range step.Message.ToolCalls {
			res, err := env.CallAgentTool(ctx, tools, tc)
			if err != nil {
				return nil, fmt.Errorf("run episode: step %d: %w", out.Steps, err)
			}
			out.Messages = append(out.Messages, Message{Role: RoleTool, Content: res.Text, Images: res.Images, ToolCallID: tc.ID, IsError: res.IsError})
		}
	}

	out.Done = len(evaluate) > 0
	var sum float64
	var reasons []string
	for _, c := range evaluate {
		res, err := env.Call(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("run episode: evaluate %s %s: %w", c.Hub, c.Name, err)
		}
		out.Evaluations = append(out.Evaluations, res)
		reward, done, info, reason := ExtractReward(res)
		sum += reward
		out.Done = out.Done && done
		out.Info = info
		if reason != "" {
			reasons = append(reasons, reason)
		}
	}
	if len(evaluate) > 0 {
		out.Reward = sum / float64(len(evaluate))
	} else {
		reasons = append(reasons, "no evaluate call")
	}
	out.RewardReason = joinParagraphs(reasons...)
	return out, nil
}

// Opening is how an attempt opens, before its setup runs: what the model is told and offered,
// and the calls that set the task up and evaluate it.
type Opening struct {
	// System is the system prompt: the environment's instructions (from its initialize
	// result), then the task's, then the agent config's.
	System string
	// Prompt is the first user message: the scenario's prompt, then the task's.
	Prompt string
	// Tools are the environment's tools the agent config offers.
	Tools []Tool
	// Setup and Evaluate are the scenario's calls, or the episode's where it sets them.
	Setup, Evaluate []Call
}

// Open renders an episode's scenario and picks its tools: the preparation that [RunEpisode] and
// the rollout engine's StartEnvironment activity share, so the two cannot disagree on what an
// attempt is told.
func Open(ctx context.Context, env *Env, ep Episode) (*Opening, error) {
	op := &Opening{Prompt: ep.Prompt, Setup: ep.Setup, Evaluate: ep.Evaluate,
		System: joinParagraphs(strings.TrimSpace(env.Instructions()), SystemPrompt(ep.SystemPrompt, ep.AgentConfig))}
	if ep.Scenario != "" {
		sc, err := env.Scenario(ctx, ep.Scenario, ep.Args)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", ep.Scenario, err)
		}
		op.Prompt = joinParagraphs(sc.Prompt, ep.Prompt)
		if len(op.Setup) == 0 {
			op.Setup = sc.Setup
		}
		if len(op.Evaluate) == 0 {
			op.Evaluate = sc.Evaluate
		}
	}
	all, err := env.Tools(ctx)
	if err != nil {
		return nil, err
	}
	op.Tools = FilterTools(all, ep.AgentConfig)
	return op, nil
}

func joinParagraphs(parts ...string) string {
	var out string
	for _, p := range parts {
		switch {
		case p == "":
		case out == "":
			out = p
		default:
			out += "\n\n" + p
		}
	}
	return out
}
