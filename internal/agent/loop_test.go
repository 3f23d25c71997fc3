package agent

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestOracleEarnsRewardOneOnTheTodoExample is the rollout in miniature, without Temporal:
// scenario → setup → model steps and tool calls until done → evaluate → reward.
func TestOracleEarnsRewardOneOnTheTodoExample(t *testing.T) {
	tests := []struct {
		name       string
		scenario   string
		validation []Call
		wantReward float64
		wantSteps  int
	}{
		{"add-todos", "add-todos", []Call{
			{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
			{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
		}, 1, 3},
		{"complete-todos", "complete-todos", []Call{
			{Name: "complete_todo", Arguments: map[string]any{"id": 1}},
			{Name: "complete_todo", Arguments: map[string]any{"id": 2}},
		}, 1, 3},
		{"a task whose validation is wrong", "complete-todos", []Call{
			{Name: "complete_todo", Arguments: map[string]any{"id": 1}},
			{Name: "complete_todo", Arguments: map[string]any{"id": 7}},
		}, 0.5, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := startTodo(t, ConnectOptions{Meta: map[string]any{"display_width": 1024, "display_height": 768}})
			validation := tt.validation
			res, err := RunEpisode(testContext(t), p.env, NewOracle(validation), Episode{Scenario: tt.scenario, Args: todoItems, SystemPrompt: "You manage a todo list."})
			if err != nil {
				t.Fatal(err)
			}
			if res.Reward != tt.wantReward || !res.Done || res.StopReason != StopDone || res.Steps != tt.wantSteps {
				t.Errorf("result = reward %v done %v stop %s steps %d (%s); want reward %v, done, stop done, %d steps",
					res.Reward, res.Done, res.StopReason, res.Steps, res.RewardReason, tt.wantReward, tt.wantSteps)
			}
			// prompt, then per call: assistant + tool result, then the final answer.
			if want := 1 + 2*len(validation) + 1; len(res.Messages) != want {
				t.Errorf("%d messages, want %d", len(res.Messages), want)
			}
			if !strings.Contains(res.Messages[0].Content, "buy milk; walk the dog") {
				t.Errorf("first message = %q, want the rendered scenario prompt", res.Messages[0].Content)
			}
		})
	}
}

func TestRunEpisodeOffersOnlyTheToolsTheAgentConfigAllows(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	validation := []Call{{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}}
	res, err := RunEpisode(testContext(t), p.env, NewOracle(validation), Episode{
		Scenario: "add-todos", Args: map[string]any{"items": []any{"buy milk"}},
		AgentConfig: AgentConfig{DisallowedTools: []string{"add_*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reward != 0 {
		t.Errorf("reward = %v, want 0: add_todo was disallowed", res.Reward)
	}
	if tool := res.Messages[2]; tool.Role != RoleTool || !tool.IsError || !strings.Contains(tool.Content, "unknown tool") {
		t.Errorf("tool message = %+v, want the refusal of the disallowed call", tool)
	}
}

func TestRunEpisodeStopsAtMaxStepsAndStillEvaluates(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	validation := []Call{
		{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
	}
	res, err := RunEpisode(testContext(t), p.env, NewOracle(validation), Episode{Scenario: "add-todos", Args: todoItems, MaxSteps: 1})
	if err != nil {
		t.Fatal(err)
	}
	if res.StopReason != StopMaxSteps || res.Steps != 1 || res.Reward != 0.5 {
		t.Errorf("result = stop %s steps %d reward %v; want max_steps after 1 step, reward 0.5", res.StopReason, res.Steps, res.Reward)
	}
}

func TestRunEpisodeWithAFailingSetupIsErrSetupFailed(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	_, err := RunEpisode(testContext(t), p.env, NewOracle(nil), Episode{
		Prompt: "Do nothing.",
		Setup:  []Call{{Hub: SetupHub, Name: "no_such_setup"}},
	})
	if !errors.Is(err, ErrSetupFailed) {
		t.Fatalf("err = %v, want ErrSetupFailed", err)
	}
}

// TestOpenAIAdapterDrivesAnAttemptOnTheTodoExample: a scripted OpenAI-compatible server asks
// for the two add_todo calls, the real environment runs them, the final answer ends the loop.
func TestOpenAIAdapterDrivesAnAttemptOnTheTodoExample(t *testing.T) {
	call := func(id, title string) string {
		return `{"id":"c-` + id + `","object":"chat.completion","created":1,"model":"scripted","choices":[{"index":0,"finish_reason":"tool_calls",
		  "message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_` + id + `","type":"function","function":{"name":"add_todo","arguments":"{\"title\":\"` + title + `\"}"}}]}}],
		  "usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`
	}
	srv := newScriptedServer(t,
		reply{status: 200, body: call("1", "buy milk")},
		reply{status: 200, body: call("2", "walk the dog")},
		reply{status: 200, body: openAIFinalReply})
	model := newTestOpenAI(t, srv)
	p := startTodo(t, ConnectOptions{})
	res, err := RunEpisode(testContext(t), p.env, model, Episode{Scenario: "add-todos", Args: todoItems})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reward != 1 || res.Steps != 3 || res.Usage != (Usage{InputTokens: 110, OutputTokens: 15}) {
		t.Errorf("result = reward %v steps %d usage %+v; want 1, 3, 110/15", res.Reward, res.Steps, res.Usage)
	}
	// The last request opened with the environment's instructions as the system prompt, then
	// carried both results, each answering its call.
	last := srv.requests()[2].body
	if sys := dig(last, "messages", 0); dig(sys, "role") != "system" || !strings.HasPrefix(fmt.Sprint(dig(sys, "content")), "A todo list.") {
		t.Errorf("message 0 = %v, want the environment's instructions as the system prompt", sys)
	}
	for i, id := range []string{"call_1", "call_2"} {
		msg := dig(last, "messages", 3+2*i)
		if dig(msg, "role") != "tool" || dig(msg, "tool_call_id") != id || !strings.Contains(dig(msg, "content").(string), "todo") {
			t.Errorf("message %d = %v, want the tool result of %s", 3+2*i, msg, id)
		}
	}
	// The environment's tools, not the hubs, were offered.
	for _, tool := range dig(last, "tools").([]any) {
		if name := dig(tool, "function", "name"); name == "setup" || name == "evaluate" {
			t.Errorf("the model was offered the %s hub", name)
		}
	}
}
