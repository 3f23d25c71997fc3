package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// ToolStepInput names the step whose tool calls to make: the assistant event at AssistantSeq
// holds them.
type ToolStepInput struct {
	TraceID      uuid.UUID `json:"trace_id"`
	Attempt      int       `json:"attempt"`
	Step         int       `json:"step"`
	AssistantSeq int       `json:"assistant_seq"`
}

// ToolStep makes the tool calls of one model step in the try's environment and records each
// call and result. It reads only the step's own events, and skips calls whose result is already
// recorded.
func (a *Activities) ToolStep(ctx context.Context, in ToolStepInput) error {
	le := a.envOf(in.TraceID, in.Attempt)
	if le == nil {
		return fmt.Errorf("tool step: the environment of trace %s try %d is not live on this worker", in.TraceID, in.Attempt)
	}
	stop := keepAlive(ctx)
	defer stop()
	evs, err := a.rollouts().TraceEvents(ctx, in.TraceID, in.AssistantSeq-1, false)
	if err != nil {
		return err
	}
	var calls []agent.ToolCall
	done := map[string]bool{}
	next := in.AssistantSeq + 1
	for _, e := range evs {
		next = max(next, e.Seq+1)
		if e.Attempt != in.Attempt {
			continue
		}
		switch {
		case e.Kind == models.EventAssistant && e.Seq == in.AssistantSeq:
			var d models.AssistantEventData
			if err := e.DecodeData(&d); err != nil {
				return fmt.Errorf("tool step: read the calls at seq %d: %w", e.Seq, err)
			}
			calls = d.Message.ToolCalls
		case e.Kind == models.EventToolResult:
			var d models.ToolResultEventData
			if err := e.DecodeData(&d); err != nil {
				return fmt.Errorf("tool step: read the result at seq %d: %w", e.Seq, err)
			}
			if d.CallID != "" {
				done[d.CallID] = true
			}
		}
	}
	try := TryInput{TraceID: in.TraceID, Attempt: in.Attempt}
	for _, tc := range calls {
		if done[tc.ID] {
			continue
		}
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
		end := time.Now().UTC()
		call, result := a.toolEvents(ctx, try, next, in.Step, tc, res, started, end)
		if err := a.appendTraceEvents(ctx, le, []models.TraceEvent{call, result}); err != nil {
			return err
		}
		next += 2
	}
	return nil
}

// toolEvents are the tool_call and tool_result events (at seq and seq+1) of call tc of step,
// answered res between started and end; the result's images are kept in the bucket.
func (a *Activities) toolEvents(ctx context.Context, try TryInput, seq, step int, tc agent.ToolCall, res *agent.ToolResult, started, end time.Time) (call, result models.TraceEvent) {
	images := a.keepImages(ctx, try.TraceID, res.Images)
	call = a.event(try, seq, models.EventToolCall, tc.Name, models.ToolCallEventData{Step: step, CallID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
	call.StartedAt = started
	result = a.event(try, seq+1, models.EventToolResult, res.Text, models.ToolResultEventData{
		Step: step, CallID: tc.ID, Name: tc.Name, IsError: res.IsError, Refused: res.Refused, Structured: res.Structured, Images: images,
		Message: agent.Message{Role: agent.RoleTool, Content: res.Text, Images: images, ToolCallID: tc.ID, IsError: res.IsError},
	})
	result.ParentID, result.StartedAt, result.EndedAt = call.ID, started, &end
	return call, result
}

// EvaluateInput names the try to evaluate and why its agent loop stopped.
type EvaluateInput struct {
	TraceID    uuid.UUID `json:"trace_id"`
	Attempt    int       `json:"attempt"`
	StopReason string    `json:"stop_reason"`
}

// EvaluateResult is the reward the attempt earned; the evaluation's details are in the store.
type EvaluateResult struct {
	Reward *float64 `json:"reward"`
	// Status is how the attempt ended when not completed: error, when the task's evaluation
	// said the task itself is broken (no reward then). Empty: completed.
	Status string `json:"status,omitempty"`
}

// Evaluate runs the task's evaluate calls, extracts the reward, stops the sandbox and records
// how the attempt ended (completed, with the reward and the evaluation result). Without
// evaluate calls the reward is 0 and the result says why. The sandbox is stopped whatever
// happens, so a Teardown after Evaluate has nothing left to do.
func (a *Activities) Evaluate(ctx context.Context, in EvaluateInput) (EvaluateResult, error) {
	le := a.envOf(in.TraceID, in.Attempt)
	if le == nil {
		return EvaluateResult{}, fmt.Errorf("evaluate: the environment of trace %s try %d is not live on this worker", in.TraceID, in.Attempt)
	}
	stop := keepAlive(ctx)
	defer stop()
	reward, result, reason, fault, err := a.evaluate(ctx, in, le)
	if le := a.Envs.take(in.TraceID, in.Attempt); le != nil {
		a.stopEnv(context.WithoutCancel(ctx), in.TraceID, le) //nolint:errcheck // logged; the attempt's outcome stands
	}
	if err != nil {
		return EvaluateResult{}, err
	}
	// The trace keeps the evaluator's words too: the member's secrets are out of them as out of
	// its events.
	le.redact.evaluation(result)
	fin := FinishTraceInput{TraceID: in.TraceID, Status: models.TraceCompleted, StopReason: in.StopReason, Reward: &reward, EvaluationResult: result,
		Error: le.redact.text(reason)}
	if fault {
		// The task's own evaluation is broken: the attempt has no score (an error, never a
		// silent 0 among the scores), and it is no infrastructure failure to retry.
		fin.Status, fin.Reward = models.TraceError, nil
	}
	if err := a.FinishTrace(ctx, fin); err != nil {
		return EvaluateResult{}, err
	}
	out := EvaluateResult{Reward: fin.Reward}
	if fault {
		out.Status = fin.Status
	}
	return out, nil
}

// evaluate makes the task's evaluate calls: the mean reward, the last result, why a reward could
// not be read, and whether the task's evaluation said it is broken (agent.TaskFault).
func (a *Activities) evaluate(ctx context.Context, in EvaluateInput, le *liveEnv) (float64, *models.EvaluationResult, string, bool, error) {
	if len(le.evaluate) == 0 {
		return 0, &models.EvaluationResult{Reason: "the task defines no evaluation"}, "", false, nil
	}
	seq, err := a.nextSeq(ctx, in.TraceID)
	if err != nil {
		return 0, nil, "", false, err
	}
	fault := false
	try := TryInput{TraceID: in.TraceID, Attempt: in.Attempt}
	var total float64
	var result models.EvaluationResult
	var reasons []string
	for _, c := range le.evaluate {
		res, err := le.env.Call(ctx, c)
		if err != nil {
			return 0, nil, "", false, envError("evaluate %s: %v", c.Name, err)
		}
		fault = fault || agent.TaskFault(res)
		reward, done, info, reason := agent.ExtractReward(res)
		total += reward
		result = models.EvaluationResult{Reward: reward, Done: done, Info: info, Content: res.Text, Reason: reason}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if err := a.appendTraceEvents(ctx, le, []models.TraceEvent{a.event(try, seq, models.EventEvaluate, c.Name, models.EvaluateEventData{Call: c, Result: res, Reward: reward})}); err != nil {
			return 0, nil, "", false, err
		}
		seq++
	}
	result.Reward = total / float64(len(le.evaluate))
	return result.Reward, &result, strings.Join(reasons, "; "), fault, nil
}
