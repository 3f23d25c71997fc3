package envserver

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type todoArgs struct {
	Items []string `json:"items" jsonschema:"the todos to add"`
	Owner string   `json:"owner,omitempty" jsonschema:"whose list it is"`
}

func scenarioServer(t *testing.T) *Server {
	t.Helper()
	s := New("env", WithLogger(quietLogger()))
	setup, evaluate := NewHub(SetupHub), NewHub(EvaluateHub)
	MustAddTool(setup, "clear", "", func(context.Context, todoArgs) (seeded, error) { return seeded{}, nil })
	MustAddTool(evaluate, "todos_exist", "", func(context.Context, todoArgs) (EvaluationResult, error) {
		return EvaluationResult{Reward: 1, Done: true}, nil
	})
	for _, h := range []*Hub{setup, evaluate} {
		if err := s.Mount(h); err != nil {
			t.Fatal(err)
		}
	}
	err := AddScenario(s, Scenario[todoArgs]{
		Name:        "add-todos",
		Description: "Add the given todos",
		Prompt:      `Add these todos{{if .Owner}} for {{.Owner}}{{end}}: {{join .Items ", "}}.`,
		Setup:       Call{Tool: SetupHub, Name: "clear"},
		Evaluate:    Call{Tool: EvaluateHub, Name: "todos_exist"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScenariosAreListedAsPrompts(t *testing.T) {
	cs := mustConnect(t, scenarioServer(t))
	res, err := cs.ListPrompts(testContext(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Prompts) != 1 || res.Prompts[0].Name != "add-todos" {
		t.Fatalf("prompts %+v, want add-todos", res.Prompts)
	}
	args := res.Prompts[0].Arguments
	if len(args) != 2 || args[0].Name != "items" || !args[0].Required || !strings.Contains(args[0].Description, "JSON-encoded") || args[1].Name != "owner" || args[1].Required {
		t.Fatalf("prompt arguments %+v, want items (required, JSON-encoded) and owner (optional)", args)
	}
}

func TestScenarioPromptRendersTheTemplate(t *testing.T) {
	cs := mustConnect(t, scenarioServer(t))
	tests := []struct {
		name     string
		args     map[string]string
		want     string
		wantErr  string
		wantMeta string
	}{
		{"array argument as JSON", map[string]string{"items": `["milk","eggs"]`}, "Add these todos: milk, eggs.", "", `{"arguments":{"items":["milk","eggs"]},"name":"todos_exist","tool":"evaluate"}`},
		{"string argument as is", map[string]string{"items": `["milk"]`, "owner": "Ada"}, "Add these todos for Ada: milk.", "", `{"arguments":{"items":["milk"],"owner":"Ada"},"name":"todos_exist","tool":"evaluate"}`},
		{"missing required argument", map[string]string{}, "", "invalid arguments", ""},
		{"argument that is not JSON", map[string]string{"items": "milk"}, "", `argument "items" must be JSON`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := cs.GetPrompt(testContext(t), &mcp.GetPromptParams{Name: "add-todos", Arguments: tt.args})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Messages[0].Content.(*mcp.TextContent).Text; got != tt.want {
				t.Fatalf("prompt %q, want %q", got, tt.want)
			}
			if meta, _ := json.Marshal(res.Meta[MetaEvaluate]); string(meta) != tt.wantMeta {
				t.Errorf("evaluate call %s, want %s", meta, tt.wantMeta)
			}
			if res.Meta[MetaSetup] == nil {
				t.Error("no setup call in _meta")
			}
		})
	}
}

func TestScenariosListResourceHasSchemas(t *testing.T) {
	cs := mustConnect(t, scenarioServer(t))
	var list ScenarioList
	readResource(t, cs, ScenariosURI, &list)
	if len(list.Scenarios) != 1 {
		t.Fatalf("scenarios %+v, want 1", list)
	}
	sc := list.Scenarios[0]
	if sc.Name != "add-todos" || sc.ArgumentsSchema == nil || sc.ArgumentsSchema.Properties["items"] == nil ||
		sc.Setup == nil || sc.Setup.Tool != "setup" || sc.Setup.Name != "clear" || sc.Setup.Arguments != nil || sc.Evaluate == nil || sc.Evaluate.Name != "todos_exist" {
		t.Fatalf("scenario %+v, want add-todos with its schema and calls", sc)
	}
	if !strings.Contains(sc.Prompt, "{{join .Items") {
		t.Errorf("prompt %q, want the template", sc.Prompt)
	}
}

func TestRunRejectsScenariosNamingMissingHubFunctions(t *testing.T) {
	tests := []struct {
		name string
		call Call
		want string
	}{
		{"hub not mounted", Call{Tool: "judge", Name: "x"}, `no hub "judge" is mounted`},
		{"function missing", Call{Tool: SetupHub, Name: "nope"}, `hub setup has no function "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("env", WithLogger(quietLogger()))
			if err := s.Mount(NewHub(SetupHub)); err != nil {
				t.Fatal(err)
			}
			if err := AddScenario(s, Scenario[todoArgs]{Name: "sc", Prompt: "p", Setup: tt.call}); err != nil {
				t.Fatal(err)
			}
			err := s.Run(testContext(t), HTTP("127.0.0.1:0"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestRenderScenario(t *testing.T) {
	s := scenarioServer(t)
	r, err := s.RenderScenario("add-todos", map[string]any{"items": []any{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Prompt != "Add these todos: a." || r.Setup.Tool != SetupHub || r.Setup.Arguments["items"] == nil {
		t.Fatalf("rendered %+v", r)
	}
	if _, err := s.RenderScenario("nope", nil); err == nil {
		t.Fatal("rendered an unknown scenario")
	}
}
