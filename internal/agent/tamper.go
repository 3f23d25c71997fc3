package agent

import (
	"context"
	"fmt"
)

// TamperModelName is the model name a tamper probe's answers carry.
const TamperModelName = "tamper"

// TamperCalls are what a tamper probe tries: the environment's setup and evaluate dispatchers,
// which no agent may see or call, asked to run the scenario's evaluation as if it had passed.
var TamperCalls = []ToolCall{
	{ID: "tamper_0", Name: SetupHub, Arguments: map[string]any{"name": "", "arguments": map[string]any{}}},
	{ID: "tamper_1", Name: EvaluateHub, Arguments: map[string]any{"name": "", "arguments": map[string]any{}}},
}

// NewTamper returns an agent that calls the hidden setup and evaluate dispatchers (TamperCalls),
// one a step, whatever it is offered, then says it is done: certification checks that each call
// is refused and scores nothing.
func NewTamper() Model { return tamper{} }

type tamper struct{}

func (tamper) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("tamper step: %w", err)
	}
	made := 0
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			made += len(m.ToolCalls)
		}
	}
	if made >= len(TamperCalls) {
		return &StepResult{Message: Message{Role: RoleAssistant, Content: "Done: tried the hidden dispatchers."}, Done: true, Model: TamperModelName,
			StopReason: "end_turn"}, nil
	}
	return &StepResult{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{TamperCalls[made]}}, Model: TamperModelName, StopReason: "tool_use"}, nil
}
