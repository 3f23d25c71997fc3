package agent

import (
	"context"
	"fmt"
	"maps"
)

// OracleModelName is the model name oracle answers report.
const OracleModelName = "oracle"

// oracle replays a task's validation calls.
type oracle struct {
	calls []Call
}

// NewOracle returns the built-in model that replays validation (a task's validation calls): the
// i-th step asks for the i-th call, one call per step, and once all were made it answers a
// final message (Done). It needs no key and no network, which makes it how a task author
// checks that a task can reach reward 1.0, and how the demo runs offline.
//
// The oracle keeps no state: it finds the next call by counting the tool calls of the
// assistant messages already in the request, so that a conversation rebuilt after a crash
// continues where it was. Tool errors do not stop it; the evaluation will tell.
func NewOracle(validation []Call) Model {
	return &oracle{calls: validation}
}

func (o *oracle) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("oracle step: %w", err)
	}
	_, made := req.answered()
	if made >= len(o.calls) {
		return &StepResult{
			Message:    Message{Role: RoleAssistant, Content: fmt.Sprintf("Done: made all %d validation calls.", len(o.calls))},
			Done:       true,
			Model:      OracleModelName,
			StopReason: "end_turn",
		}, nil
	}
	next := o.calls[made]
	return &StepResult{
		Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{
			// Deterministic ids: the same conversation always gets the same call.
			ID:   fmt.Sprintf("oracle-%d", made+1),
			Name: next.Name,
			// A copy, so that whoever edits the call's arguments does not edit the script.
			Arguments: maps.Clone(next.Arguments),
		}}},
		Model:      OracleModelName,
		StopReason: "tool_use",
	}, nil
}

// IdleModelName is the model name an idle agent's answers carry.
const IdleModelName = "idle"

// NewIdle returns an agent that makes no tool call: it says at once that it is done. A task it
// passes needs no work (certification flags it).
func NewIdle() Model { return idle{} }

type idle struct{}

func (idle) Step(ctx context.Context, _ StepRequest) (*StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("idle step: %w", err)
	}
	return &StepResult{Message: Message{Role: RoleAssistant, Content: "Done: I did nothing."}, Done: true, Model: IdleModelName, StopReason: "end_turn"}, nil
}
