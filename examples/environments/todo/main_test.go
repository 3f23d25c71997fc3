package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/proctorhq/proctor/examples/environments/internal/envtest"
)

var (
	items      = []any{"buy milk", "walk the dog"}
	milkAndDog = map[string]any{"items": items}
)

// episodes are the documented validation sequences (and a few that must fall short).
var episodes = []struct {
	name       string
	scenario   string
	steps      []envtest.Step
	wantReward float64
}{
	{"add-todos: adding both earns 1.0", "add-todos", []envtest.Step{
		{Tool: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
		{Tool: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
	}, 1},
	{"add-todos: adding one earns 0.5", "add-todos", []envtest.Step{
		{Tool: "add_todo", Arguments: map[string]any{"title": "Buy Milk "}},
	}, 0.5},
	{"add-todos: doing nothing earns 0", "add-todos", nil, 0},
	{"complete-todos: completing both earns 1.0", "complete-todos", []envtest.Step{
		{Tool: "complete_todo", Arguments: map[string]any{"id": 1}},
		{Tool: "complete_todo", Arguments: map[string]any{"id": 2}},
	}, 1},
	{"complete-todos: deleting instead earns 0", "complete-todos", []envtest.Step{
		{Tool: "delete_todo", Arguments: map[string]any{"id": 1}},
		{Tool: "delete_todo", Arguments: map[string]any{"id": 2}},
	}, 0},
}

func TestEpisodesOverRealTransports(t *testing.T) {
	bin := envtest.Build(t)
	transports := []struct {
		name    string
		connect func(t *testing.T) *mcp.ClientSession
	}{
		{"go client over stdio", func(t *testing.T) *mcp.ClientSession {
			cs, _ := envtest.ConnectStdio(t, bin)
			return cs
		}},
		{"go client over streamable HTTP", func(t *testing.T) *mcp.ClientSession {
			url, _ := envtest.StartHTTP(t, bin, "http")
			return envtest.ConnectHTTP(t, url)
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs := tr.connect(t) // one server for all episodes: setup must reset the state
			for _, ep := range episodes {
				t.Run(ep.name, func(t *testing.T) {
					got := envtest.RunEpisode(t, cs, ep.scenario, milkAndDog, ep.steps)
					if got.Reward != ep.wantReward || !got.Done {
						t.Fatalf("evaluation %+v, want reward %v and done", got, ep.wantReward)
					}
				})
			}
		})
	}
}

func TestAgentSeesOnlyTheVisibleTools(t *testing.T) {
	cs, _ := envtest.ConnectStdio(t, envtest.Build(t))
	res, err := cs.ListTools(envtest.Context(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	want := []string{"add_todo", "complete_todo", "delete_todo", "evaluate", "list_todos", "setup"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	if _, err := cs.CallTool(envtest.Context(t), &mcp.CallToolParams{Name: "seed", Arguments: milkAndDog}); err == nil {
		t.Fatal("a hidden setup function was callable directly")
	}
	live := envtest.ReadJSON[map[string]any](t, cs, "telemetry://live")
	if live["status"] != "running" || live["provider"] != "todo-env" {
		t.Fatalf("telemetry %v, want a running todo-env", live)
	}
}

func TestTypeScriptClient(t *testing.T) {
	bin := envtest.Build(t)
	plan := envtest.TSPlan{
		Calls: []envtest.TSCall{
			{Name: "setup", Arguments: map[string]any{"name": "clear", "arguments": milkAndDog}},
			{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
			{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
			{Name: "list_todos"},
			// A model that sends the arguments as a JSON string still reaches the function.
			{Name: "evaluate", Arguments: map[string]any{"name": "todos_exist", "arguments": `{"items":["buy milk","walk the dog"]}`}},
		},
		Resources: []string{"scenarios://list", "file:///evaluate/functions"},
		Prompts:   []envtest.TSPrompt{{Name: "add-todos", Arguments: map[string]string{"items": `["buy milk","walk the dog"]`}}},
	}
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			p := plan
			if transport == "stdio" {
				p.Stdio = &envtest.TSStdio{Command: bin}
			} else {
				p.HTTP, _ = envtest.StartHTTP(t, bin, "http")
			}
			res := envtest.RunTSClient(t, p)
			if res.ServerInfo.Name != "todo-env" || !strings.Contains(res.Instructions, "todo list") {
				t.Errorf("server info %+v / %q, want todo-env and its instructions", res.ServerInfo, res.Instructions)
			}
			if len(res.Tools) != 6 {
				t.Errorf("%d tools, want 6", len(res.Tools))
			}
			for _, c := range res.Calls {
				if c.IsError {
					t.Errorf("call %s failed: %+v", c.Name, c)
				}
			}
			if todos := res.Calls[3].StructuredContent["todos"].([]any); len(todos) != 2 {
				t.Errorf("list_todos %v, want 2 todos", todos)
			}
			if eval := res.Calls[4].StructuredContent; eval["reward"] != 1.0 || eval["done"] != true {
				t.Errorf("evaluation %v, want reward 1 and done", eval)
			}
			list := envtest.Decode[struct {
				Scenarios []struct {
					Name            string         `json:"name"`
					ArgumentsSchema map[string]any `json:"arguments_schema"`
				} `json:"scenarios"`
			}](t, res.Resources["scenarios://list"])
			if len(list.Scenarios) != 2 || list.Scenarios[0].Name != "add-todos" || list.Scenarios[0].ArgumentsSchema["type"] != "object" {
				t.Errorf("scenarios %+v, want add-todos and complete-todos with schemas", list)
			}
			if len(res.Prompts) != 1 || res.Prompts[0].Messages[0].Content.Text != "Add these todos to my list: buy milk; walk the dog." {
				t.Errorf("prompt %+v, want the rendered add-todos prompt", res.Prompts)
			}
		})
	}
}
