package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/testenv"
)

var todoItems = map[string]any{"items": []any{"buy milk", "walk the dog"}}

func toolNames(tools []Tool) []string {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	return names
}

func TestToolsHidesTheSetupAndEvaluateHubsOfTheTodoExample(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	tools, err := p.env.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	names := toolNames(tools)
	for _, want := range []string{"add_todo", "list_todos", "complete_todo", "delete_todo"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools %v: want %s among them", names, want)
		}
	}
	for _, hidden := range []string{"setup", "evaluate"} {
		if slices.Contains(names, hidden) {
			t.Errorf("tools %v: the %s dispatcher must be hidden from agents", names, hidden)
		}
	}
	i := slices.Index(names, "add_todo")
	if i < 0 {
		return
	}
	props, _ := tools[i].InputSchema["properties"].(map[string]any)
	if tools[i].InputSchema["type"] != "object" || props["title"] == nil {
		t.Errorf("add_todo input schema = %v, want an object schema with a title property", tools[i].InputSchema)
	}
	if tools[i].Description == "" {
		t.Error("add_todo has no description")
	}
	if !strings.Contains(p.env.Instructions(), "todo list") {
		t.Errorf("instructions = %q, want the environment's", p.env.Instructions())
	}
}

// TestOpenPutsTheEnvironmentsInstructionsFirstInTheSystemPrompt: what an environment tells its
// clients in its initialize result reaches the model, before the task's own system prompt and the
// agent config's addition.
func TestOpenPutsTheEnvironmentsInstructionsFirstInTheSystemPrompt(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	op, err := Open(testContext(t), p.env, Episode{Scenario: "add-todos", Args: map[string]any{"items": []any{"buy milk"}},
		SystemPrompt: "Be brief.", AgentConfig: AgentConfig{SystemPrompt: "Never delete."}})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.TrimSpace(p.env.Instructions()) + "\n\nBe brief.\n\nNever delete."
	if op.System != want || !strings.Contains(op.System, "todo list") {
		t.Errorf("system prompt = %q, want %q", op.System, want)
	}
}

func TestConnectToAnEnvironmentThatExitsAtOnceIsErrEnvClosed(t *testing.T) {
	cmd := exec.Command("sh", "-c", "echo broken >&2; exit 3")
	stdout, stdin := testenv.StartPiped(t, cmd)
	_, err := Connect(testContext(t), stdout, stdin, ConnectOptions{Logger: discardLogger()})
	if !errors.Is(err, ErrEnvClosed) {
		t.Errorf("Connect = %v, want ErrEnvClosed", err)
	}
	if err := cmd.Wait(); err == nil {
		t.Error("the shell exited 0, want 3")
	}
}

func TestScenarioRendersThePromptAndTheResolvedCalls(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	sc, err := p.env.Scenario(testContext(t), "add-todos", todoItems)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Add these todos to my list: buy milk; walk the dog."; sc.Prompt != want {
		t.Errorf("prompt = %q, want %q", sc.Prompt, want)
	}
	wantSetup := []Call{{Hub: "setup", Name: "clear", Arguments: todoItems}}
	wantEvaluate := []Call{{Hub: "evaluate", Name: "todos_exist", Arguments: todoItems}}
	if !reflect.DeepEqual(sc.Setup, wantSetup) {
		t.Errorf("setup = %+v, want %+v", sc.Setup, wantSetup)
	}
	if !reflect.DeepEqual(sc.Evaluate, wantEvaluate) {
		t.Errorf("evaluate = %+v, want %+v", sc.Evaluate, wantEvaluate)
	}
}

func TestScenarioThatDoesNotExistIsAnError(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	if _, err := p.env.Scenario(testContext(t), "no-such-scenario", nil); err == nil {
		t.Fatal("Scenario(no-such-scenario): want an error, got none")
	}
	// The session survives a refused request.
	if _, err := p.env.Tools(testContext(t)); err != nil {
		t.Fatalf("Tools after a refused prompts/get: %v", err)
	}
}

// runTodo runs add-todos by hand with the given visible calls, then evaluates it.
func runTodo(t *testing.T, env *Env, calls []Call) (float64, bool, map[string]any, string) {
	t.Helper()
	ctx := testContext(t)
	sc, err := env.Scenario(ctx, "add-todos", todoItems)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sc.Setup {
		res, err := env.CallHub(ctx, c.Hub, c.Name, c.Arguments)
		if err != nil || res.IsError {
			t.Fatalf("setup %+v: %v %+v", c, err, res)
		}
	}
	for _, c := range calls {
		res, err := env.CallTool(ctx, c.Name, c.Arguments)
		if err != nil || res.IsError {
			t.Fatalf("call %+v: %v %+v", c, err, res)
		}
	}
	if len(sc.Evaluate) != 1 {
		t.Fatalf("evaluate calls = %+v, want one", sc.Evaluate)
	}
	c := sc.Evaluate[0]
	res, err := env.CallHub(ctx, c.Hub, c.Name, c.Arguments)
	if err != nil {
		t.Fatal(err)
	}
	return ExtractReward(res)
}

func TestTheValidationCallsOfAddTodosEarnRewardOne(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	reward, done, info, reason := runTodo(t, p.env, []Call{
		{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
	})
	if reward != 1 || !done || reason != "" {
		t.Errorf("reward, done, reason = %v, %v, %q; want 1, true, \"\"", reward, done, reason)
	}
	if missing, _ := info["missing"].([]any); len(missing) != 0 {
		t.Errorf("info = %v, want nothing missing", info)
	}
}

func TestAPartialRunEarnsLessThanOne(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	reward, _, info, _ := runTodo(t, p.env, []Call{{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}})
	if reward != 0.5 {
		t.Errorf("reward = %v, want 0.5 (one of two todos)", reward)
	}
	if missing, _ := info["missing"].([]any); !reflect.DeepEqual(missing, []any{"walk the dog"}) {
		t.Errorf("info = %v, want walk the dog missing", info)
	}
}

func TestToolResultsCarryTextStructuredContentAndTheRawResult(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	res, err := p.env.CallTool(testContext(t), "add_todo", map[string]any{"title": "buy milk"})
	if err != nil {
		t.Fatal(err)
	}
	todo, _ := res.Structured["todo"].(map[string]any)
	if res.IsError || todo["title"] != "buy milk" {
		t.Errorf("result = %+v, want the new todo in the structured content", res)
	}
	if !strings.Contains(res.Text, "buy milk") {
		t.Errorf("text = %q, want it to mention the todo", res.Text)
	}
	var raw mcp.CallToolResult
	if err := json.Unmarshal(res.Raw, &raw); err != nil || len(raw.Content) == 0 {
		t.Errorf("raw = %s (%v), want the whole CallToolResult", res.Raw, err)
	}
}

func TestMistakesOfTheCallerAreToolErrorsNotGoErrors(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	ctx := testContext(t)
	tests := []struct {
		name     string
		call     func() (*ToolResult, error)
		wantText string
	}{
		{"a tool that fails", func() (*ToolResult, error) {
			return p.env.CallTool(ctx, "complete_todo", map[string]any{"id": 99})
		}, "no todo with id 99"},
		// The MCP server answers an unknown tool with a JSON-RPC error; the session is fine,
		// and an agent should read the mistake like any other tool error.
		{"an unknown tool", func() (*ToolResult, error) {
			return p.env.CallTool(ctx, "launch_rocket", nil)
		}, "launch_rocket"},
		{"an unknown hub function", func() (*ToolResult, error) {
			return p.env.CallHub(ctx, "setup", "format_disk", nil)
		}, "format_disk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := tt.call()
			if err != nil {
				t.Fatalf("want a tool error, got the Go error %v", err)
			}
			if !res.IsError || !strings.Contains(res.Text, tt.wantText) {
				t.Errorf("result = %+v, want IsError with %q in the text", res, tt.wantText)
			}
			if len(res.Raw) == 0 {
				t.Error("no raw result for the trace")
			}
		})
	}
}

func TestCallAgentToolRefusesToolsTheModelWasNotOffered(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	ctx := testContext(t)
	all, err := p.env.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	visible := FilterTools(all, AgentConfig{DisallowedTools: []string{"delete_*"}})
	tests := []struct {
		name      string
		call      ToolCall
		wantError string
	}{
		{"the evaluate hub, guessed", ToolCall{ID: "1", Name: "evaluate", Arguments: map[string]any{"name": "todos_exist"}}, `unknown tool "evaluate"`},
		{"a disallowed tool", ToolCall{ID: "2", Name: "delete_todo", Arguments: map[string]any{"id": 1}}, `unknown tool "delete_todo"`},
		{"arguments that did not parse", ToolCall{ID: "3", Name: "add_todo", InvalidArguments: `{"title": "buy`}, "must be a JSON object"},
		{"an allowed call", ToolCall{ID: "4", Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := p.env.CallAgentTool(ctx, visible, tt.call)
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantError == "" {
				if res.IsError {
					t.Errorf("result = %+v, want success", res)
				}
				return
			}
			if !res.IsError || !strings.Contains(res.Text, tt.wantError) {
				t.Errorf("result = %+v, want a tool error with %q", res, tt.wantError)
			}
		})
	}
	// None of the refused calls reached the environment: only the allowed add_todo did.
	list, err := p.env.CallTool(ctx, "list_todos", nil)
	if err != nil {
		t.Fatal(err)
	}
	if todos, _ := list.Structured["todos"].([]any); len(todos) != 1 {
		t.Errorf("todos = %v, want only the one allowed add_todo", list.Structured)
	}
}

func TestConnectSendsTheInitializeMetaAndReportsProgress(t *testing.T) {
	var mu sync.Mutex
	var messages []string
	startTodo(t, ConnectOptions{
		Meta: map[string]any{"progressToken": "init-1", "display_width": 1280, "display_height": 720},
		OnProgress: func(progress, total float64, message string) {
			mu.Lock()
			defer mu.Unlock()
			messages = append(messages, message)
		},
	})
	// Progress notifications may be handled just after initialize returns.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(messages)
		mu.Unlock()
		if slices.Contains(got, "todo store ready") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress messages = %q, want the todo example's \"todo store ready\"", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestALostEnvironmentIsErrEnvClosed(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
	_, err := p.env.CallTool(testContext(t), "list_todos", nil)
	if !errors.Is(err, ErrEnvClosed) {
		t.Fatalf("CallTool after the environment died: err = %v, want ErrEnvClosed", err)
	}
}

func TestCloseEndsTheEnvironmentProcess(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	if err := p.env.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the environment is still running 10s after Close")
	}
	if _, err := p.env.Tools(testContext(t)); !errors.Is(err, ErrEnvClosed) {
		t.Errorf("Tools after Close: err = %v, want ErrEnvClosed", err)
	}
	if err := p.env.Close(); err != nil {
		t.Errorf("a second Close: %v, want nil", err)
	}
}

// serveInMemory serves an MCP SDK server over pipes and connects to it, for the cases the
// example environments do not show.
func serveInMemory(t *testing.T, srv *mcp.Server) *Env {
	t.Helper()
	ctx := testContext(t)
	clientR, serverW := io.Pipe()
	serverR, clientW := io.Pipe()
	ss, err := srv.Connect(ctx, &mcp.IOTransport{Reader: serverR, Writer: serverW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	env, err := Connect(ctx, clientR, clientW, ConnectOptions{Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Close() })
	return env
}

func TestToolsHidesDispatchersByRoleOrByLifecycleName(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "roles", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	schema := map[string]any{"type": "object"}
	for _, tool := range []*mcp.Tool{
		{Name: "grader", InputSchema: schema, Meta: mcp.Meta{MetaRole: "evaluate"}},
		{Name: "prepare", InputSchema: schema, Meta: mcp.Meta{MetaRole: "setup"}},
		{Name: "evaluate", InputSchema: schema}, // a non-envserver environment: no meta
		{Name: "browser", InputSchema: schema, Meta: mcp.Meta{MetaRole: "hub"}},
		{Name: "click", InputSchema: schema},
	} {
		srv.AddTool(tool, handler)
	}
	env := serveInMemory(t, srv)
	tools, err := env.Tools(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	names := toolNames(tools)
	slices.Sort(names)
	if want := []string{"browser", "click"}; !reflect.DeepEqual(names, want) {
		t.Errorf("tools = %v, want %v: lifecycle hubs hidden, other hubs kept", names, want)
	}
}

func TestScenarioMetaMayHoldOneCallOrAList(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "prompts", Version: "1"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "multi", Arguments: []*mcp.PromptArgument{{Name: "n"}, {Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{
				Meta: mcp.Meta{
					MetaSetup: []map[string]any{
						{"tool": "setup", "name": "a", "arguments": map[string]any{"n": 1}},
						{"tool": "setup", "name": "b"},
					},
					MetaEvaluate: map[string]any{"tool": "evaluate", "name": "score"},
				},
				// The arguments come back as the server received them.
				Messages: []*mcp.PromptMessage{
					{Role: "user", Content: &mcp.TextContent{Text: "n=" + req.Params.Arguments["n"]}},
					{Role: "user", Content: &mcp.TextContent{Text: "who=" + req.Params.Arguments["who"]}},
				},
			}, nil
		})
	env := serveInMemory(t, srv)
	sc, err := env.Scenario(testContext(t), "multi", map[string]any{"n": 3, "who": "me"})
	if err != nil {
		t.Fatal(err)
	}
	want := &Scenario{
		Prompt:   "n=3\n\nwho=me",
		Setup:    []Call{{Hub: "setup", Name: "a", Arguments: map[string]any{"n": float64(1)}}, {Hub: "setup", Name: "b"}},
		Evaluate: []Call{{Hub: "evaluate", Name: "score"}},
	}
	if !reflect.DeepEqual(sc, want) {
		t.Errorf("scenario = %+v, want %+v (numbers JSON-encoded, strings as they are)", sc, want)
	}
}

func TestReadResourceReturnsTheFirstContent(t *testing.T) {
	p := startTodo(t, ConnectOptions{})
	ctx := testContext(t)
	raw, err := p.env.ReadResource(ctx, "scenarios://list")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Scenarios []struct {
			Name     string         `json:"name"`
			Evaluate map[string]any `json:"evaluate"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("scenarios://list = %s: %v", raw, err)
	}
	var names []string
	for _, sc := range list.Scenarios {
		names = append(names, sc.Name)
	}
	if !reflect.DeepEqual(names, []string{"add-todos", "complete-todos"}) || list.Scenarios[0].Evaluate["tool"] != EvaluateHub {
		t.Errorf("scenarios = %+v, want add-todos and complete-todos evaluated through the evaluate hub", list.Scenarios)
	}
	if _, err := p.env.ReadResource(ctx, "nothing://here"); err == nil {
		t.Error("ReadResource of an unknown resource: want an error")
	}
}
