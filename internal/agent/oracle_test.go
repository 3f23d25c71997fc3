package agent

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

var addTodosValidation = []Call{
	{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
	{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
}

// answer is what a tool step appends after an assistant message with calls.
func answer(msg Message) []Message {
	out := []Message{msg}
	for _, tc := range msg.ToolCalls {
		out = append(out, Message{Role: RoleTool, ToolCallID: tc.ID, Content: "ok"})
	}
	return out
}

func TestOracleReplaysTheValidationCallsInOrderThenIsDone(t *testing.T) {
	oracle := NewOracle(addTodosValidation)
	msgs := []Message{{Role: RoleUser, Content: "Add these todos."}}
	var made []ToolCall
	for step := 1; ; step++ {
		res, err := oracle.Step(context.Background(), StepRequest{Messages: msgs})
		if err != nil {
			t.Fatal(err)
		}
		if res.Message.Role != RoleAssistant || res.Model != OracleModelName {
			t.Errorf("step %d = %+v, want an assistant message from %q", step, res, OracleModelName)
		}
		if res.Done {
			if len(res.Message.ToolCalls) != 0 || res.Message.Content == "" {
				t.Errorf("final step = %+v, want a final message without calls", res)
			}
			break
		}
		if len(res.Message.ToolCalls) != 1 {
			t.Fatalf("step %d asks for %d calls, want one call per step", step, len(res.Message.ToolCalls))
		}
		made = append(made, res.Message.ToolCalls[0])
		msgs = append(msgs, answer(res.Message)...)
		if step > len(addTodosValidation)+1 {
			t.Fatal("the oracle never says it is done")
		}
	}
	want := []ToolCall{
		{ID: "oracle-1", Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{ID: "oracle-2", Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
	}
	if !reflect.DeepEqual(made, want) {
		t.Errorf("calls = %+v, want %+v", made, want)
	}
}

func TestOracleContinuesARebuiltConversationWhereItWas(t *testing.T) {
	calls := append(addTodosValidation, Call{Name: "list_todos"})
	// A conversation rebuilt from the trace after a crash: one call already made, by an
	// oracle in another process.
	msgs := append([]Message{{Role: RoleUser, Content: "Add these todos."}},
		answer(Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "oracle-1", Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}}})...)
	res, err := NewOracle(calls).Step(context.Background(), StepRequest{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	want := ToolCall{ID: "oracle-2", Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}}
	if res.Done || len(res.Message.ToolCalls) != 1 || !reflect.DeepEqual(res.Message.ToolCalls[0], want) {
		t.Errorf("step after 1 call = %+v, want call 2 %+v", res, want)
	}
	// The same request twice gets the same answer: a retried step is harmless.
	again, _ := NewOracle(calls).Step(context.Background(), StepRequest{Messages: msgs})
	if !reflect.DeepEqual(again, res) {
		t.Errorf("a repeated step = %+v, want %+v", again, res)
	}
}

func TestOracleWithoutValidationIsDoneAtOnce(t *testing.T) {
	res, err := NewOracle(nil).Step(context.Background(), StepRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done || len(res.Message.ToolCalls) != 0 {
		t.Errorf("step = %+v, want done without calls", res)
	}
}

func TestOracleCallsAreCopies(t *testing.T) {
	oracle := NewOracle(addTodosValidation)
	res, _ := oracle.Step(context.Background(), StepRequest{})
	res.Message.ToolCalls[0].Arguments["title"] = "changed"
	again, _ := oracle.Step(context.Background(), StepRequest{})
	if got := again.Message.ToolCalls[0].Arguments["title"]; got != "buy milk" {
		t.Errorf("title = %v after a caller edited an earlier answer, want buy milk", got)
	}
}

func TestOracleHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewOracle(addTodosValidation).Step(ctx, StepRequest{}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
