package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
)

// ReplayModelName is the model name a replay's answers carry.
const ReplayModelName = "replay"

// NewReplay returns the model that answers a conversation with recorded answers, in order: the
// i-th step gets answers[i] (its tool calls, with their ids, as recorded), whatever the tool
// results before it said. Once every answer was given it says it is done. Replayed against a new
// build of an environment, it shows what the build changes for an agent that acts exactly as
// before (a replay check).
//
// Like the oracle it keeps no state: the step is the number of assistant messages already in
// the request, so a conversation rebuilt after a crash continues where it was.
func NewReplay(answers []Message) Model { return &replay{answers: answers} }

type replay struct{ answers []Message }

func (r *replay) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("replay step: %w", err)
	}
	made, _ := req.answered()
	if made >= len(r.answers) {
		return &StepResult{Message: Message{Role: RoleAssistant, Content: fmt.Sprintf("Done: replayed all %d recorded answers.", len(r.answers))},
			Done: true, Model: ReplayModelName, StopReason: "end_turn"}, nil
	}
	ans := r.answers[made]
	ans.Role = RoleAssistant
	// Copies, so that whoever edits the answer's calls does not edit the record.
	ans.ToolCalls = slices.Clone(ans.ToolCalls)
	for i := range ans.ToolCalls {
		ans.ToolCalls[i].Arguments = maps.Clone(ans.ToolCalls[i].Arguments)
	}
	reason := "tool_use"
	if len(ans.ToolCalls) == 0 {
		reason = "end_turn"
	}
	return &StepResult{Message: ans, Done: len(ans.ToolCalls) == 0, Model: ReplayModelName, StopReason: reason}, nil
}
