package agent

import (
	"context"
	"errors"
	"fmt"
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
	prompt, setup, evaluate := ep.Prompt, ep.Setup, ep.Evaluate
	if ep.Scenario != "" {
		sc, err := env.Scenario(ctx, ep.Scenario, ep.Args)
		if err != nil {
			return nil, fmt.Errorf("run episode: %w", err)
		}
		prompt = joinParagraphs(sc.Prompt, ep.Prompt)
		if len(setup) == 0 {
			setup = sc.Setup
		}
		if len(evaluate) == 0 {
			evaluate = sc.Evaluate
		}
	}
	for _, c := range setup {
		res, err := env.Call(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("run episode: setup %s %s: %w", c.Hub, c.Name, err)
		}
		if res.IsError {
			return nil, fmt.Errorf("run episode: %w: %s %s: %s", ErrSetupFailed, c.Hub, c.Name, res.Text)
		}
	}

	all, err := env.Tools(ctx)
	if err != nil {
		return nil, fmt.Errorf("run episode: %w", err)
	}
	tools := FilterTools(all, ep.AgentConfig)
	maxSteps := ep.MaxSteps
	if maxSteps <= 0 {
		maxSteps = 50
	}
	out := &EpisodeResult{Messages: []Message{{Role: RoleUser, Content: prompt}}, StopReason: StopMaxSteps}
	req := StepRequest{System: SystemPrompt(ep.SystemPrompt, ep.AgentConfig), Tools: tools, MaxTokens: ep.MaxTokens}
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
			out.Messages = append(out.Messages, Message{Role: RoleTool, Content: res.Text, ToolCallID: tc.ID, IsError: res.IsError})
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
