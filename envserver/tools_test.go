package envserver

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type addArgs struct {
	A int `json:"a" jsonschema:"first addend"`
	B int `json:"b,omitempty" jsonschema:"second addend"`
}

type sum struct {
	Sum int `json:"sum"`
}

func add(ctx context.Context, in addArgs) (sum, error) { return sum{in.A + in.B}, nil }

func TestAddToolReturnsTheFunctionUnchanged(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	got, err := AddTool(s, "add", "Add two numbers", add)
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(got).Pointer() != reflect.ValueOf(ToolFunc[addArgs, sum](add)).Pointer() {
		t.Fatal("AddTool returned a different function")
	}
	// The returned function composes: still an ordinary Go function.
	if r, _ := got(context.Background(), addArgs{A: 2, B: 3}); r.Sum != 5 {
		t.Fatalf("returned function computed %d, want 5", r.Sum)
	}
	hub := NewHub("math")
	if again := MustAddTool(hub, "add", "Add two numbers", got); reflect.ValueOf(again).Pointer() != reflect.ValueOf(got).Pointer() {
		t.Fatal("MustAddTool returned a different function")
	}
}

func TestTypedToolsDeriveSchemasAndValidate(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	MustAddTool(s, "add", "Add two numbers", add)
	cs := mustConnect(t, s)
	tool := listToolNames(t, cs)["add"]
	if tool == nil {
		t.Fatal("add is not listed")
	}
	in, _ := json.Marshal(tool.InputSchema)
	out, _ := json.Marshal(tool.OutputSchema)
	if !strings.Contains(string(in), `"first addend"`) || !strings.Contains(string(in), `"required":["a"]`) {
		t.Errorf("input schema %s lacks the description or the required property", in)
	}
	if !strings.Contains(string(out), `"sum"`) {
		t.Errorf("output schema %s lacks sum", out)
	}
	tests := []struct {
		name    string
		args    any
		wantErr string
		wantSum int
	}{
		{"valid arguments", map[string]any{"a": 2, "b": 40}, "", 42},
		{"optional argument omitted", map[string]any{"a": 2}, "", 2},
		{"missing required argument", map[string]any{"b": 1}, "validating arguments", 0},
		{"wrong type", map[string]any{"a": "two"}, "validating arguments", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, cs, "add", tt.args)
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("result %+v %q, want a tool error with %q", res, resultText(res), tt.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error %q", resultText(res))
			}
			if got := structured[sum](t, res).Sum; got != tt.wantSum {
				t.Fatalf("sum %d, want %d", got, tt.wantSum)
			}
			if resultText(res) != `{"sum":`+jsonInt(tt.wantSum)+`}` {
				t.Errorf("text content %q, want the JSON of the output", resultText(res))
			}
		})
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestToolErrorsReachTheAgentAsToolErrors(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	MustAddTool(s, "fail", "Always fails", func(ctx context.Context, _ struct{}) (sum, error) {
		return sum{}, errors.New("the disk is full")
	})
	res := callTool(t, mustConnect(t, s), "fail", map[string]any{})
	if !res.IsError || resultText(res) != "the disk is full" {
		t.Fatalf("result isError=%v text=%q, want a tool error with the message", res.IsError, resultText(res))
	}
}

// counter is a Tool with its own state, the way a BaseTool subclass would be.
type counter struct {
	*BaseTool
	n int
}

func newCounter() *counter {
	c := &counter{}
	c.BaseTool, _ = NewTool("count", "Count calls", func(ctx context.Context, _ struct{}) (sum, error) {
		c.n++
		return sum{c.n}, nil
	})
	return c
}

func TestAddToolAcceptsToolValuesAndRawSDKTools(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	if err := s.AddTool(newCounter()); err != nil {
		t.Fatalf("add Tool value: %v", err)
	}
	raw := &mcp.Tool{
		Name:        "raw",
		Description: "A raw SDK tool",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"string"}}}`),
		Meta:        mcp.Meta{"custom": "kept"},
	}
	var gotArgs string
	err := s.AddRawTool(raw, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		gotArgs = string(req.Params.Arguments)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "raw ok"}}}, nil
	})
	if err != nil {
		t.Fatalf("add raw tool: %v", err)
	}
	cs := mustConnect(t, s)
	tools := listToolNames(t, cs)
	if tools["raw"] == nil || tools["raw"].Meta["custom"] != "kept" {
		t.Fatalf("raw tool listed as %+v, want it as registered", tools["raw"])
	}
	callTool(t, cs, "count", map[string]any{})
	if n := structured[sum](t, callTool(t, cs, "count", map[string]any{})).Sum; n != 2 {
		t.Errorf("counter state %d after two calls, want 2", n)
	}
	res := callTool(t, cs, "raw", map[string]any{"x": 1}) // not validated: added as is
	if resultText(res) != "raw ok" || gotArgs != `{"x":1}` {
		t.Errorf("raw tool got %s and answered %q, want the arguments untouched", gotArgs, resultText(res))
	}
}

func TestToolNamesAreValidated(t *testing.T) {
	long := strings.Repeat("a", 129)
	tests := []struct {
		name    string
		tool    string
		wantErr bool
	}{
		{"letters digits dash underscore", "add_todo-2", false},
		{"128 characters", long[:128], false},
		{"empty", "", true},
		{"129 characters", long, true},
		{"dot", "todo.add", true},
		{"space", "add todo", true},
		{"slash", "setup/seed", true},
		{"non-ASCII", "añadir", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New("env", WithLogger(quietLogger()))
			_, err := AddTool(s, tt.tool, "", add)
			if (err != nil) != tt.wantErr {
				t.Fatalf("AddTool(%q) error = %v, want error: %v", tt.tool, err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidName) {
				t.Errorf("error %v does not wrap ErrInvalidName", err)
			}
			herr := NewHub("h").AddTool(mustTool(t, tt.tool))
			if (herr != nil) != tt.wantErr {
				t.Errorf("Hub.AddTool(%q) error = %v, want error: %v", tt.tool, herr, tt.wantErr)
			}
			if merr := New("other", WithLogger(quietLogger())).Mount(NewHub(tt.tool)); (merr != nil) != tt.wantErr {
				t.Errorf("Mount(hub %q) error = %v, want error: %v", tt.tool, merr, tt.wantErr)
			}
		})
	}
}

// mustTool builds a Tool even under an invalid name, to test what registries do with it.
func mustTool(t *testing.T, name string) Tool {
	t.Helper()
	return RawTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
}

func TestDuplicatesAreRejectedAtRegistration(t *testing.T) {
	tests := []struct {
		name  string
		setup func(s *Server) error // the second registration, whose error is checked
	}{
		{"tool twice", func(s *Server) error {
			MustAddTool(s, "x", "", add)
			_, err := AddTool(s, "x", "", add)
			return err
		}},
		{"hub named like a tool", func(s *Server) error {
			MustAddTool(s, "x", "", add)
			return s.Mount(NewHub("x"))
		}},
		{"tool named like a hub", func(s *Server) error {
			if err := s.Mount(NewHub("x")); err != nil {
				return err
			}
			_, err := AddTool(s, "x", "", add)
			return err
		}},
		{"hub mounted twice", func(s *Server) error {
			if err := s.Mount(NewHub("x")); err != nil {
				return err
			}
			return s.Mount(NewHub("x"))
		}},
		{"tool twice in a hub", func(s *Server) error {
			h := NewHub("h")
			MustAddTool(h, "x", "", add)
			_, err := AddTool(h, "x", "", add)
			return err
		}},
		{"scenario twice", func(s *Server) error {
			if err := AddScenario(s, Scenario[addArgs]{Name: "sc", Prompt: "p"}); err != nil {
				return err
			}
			return AddScenario(s, Scenario[addArgs]{Name: "sc", Prompt: "p"})
		}},
		{"resource twice", func(s *Server) error {
			fn := func(context.Context) (any, error) { return "x", nil }
			if err := s.Resource("telemetry://live", "", fn); err != nil {
				return err
			}
			return s.Resource("telemetry://live", "", fn)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.setup(New("env", WithLogger(quietLogger())))
			if !errors.Is(err, ErrDuplicate) {
				t.Fatalf("error = %v, want ErrDuplicate", err)
			}
		})
	}
}

func TestBadDefinitionsAreErrorsNotPanics(t *testing.T) {
	noop := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
	tests := []struct {
		name string
		add  func(s *Server) error
	}{
		{"raw tool without input schema", func(s *Server) error { return s.AddRawTool(&mcp.Tool{Name: "a"}, noop) }},
		{"raw tool with non-object schema", func(s *Server) error {
			return s.AddRawTool(&mcp.Tool{Name: "a", InputSchema: map[string]any{"type": "string"}}, noop)
		}},
		{"typed tool with non-object input", func(s *Server) error {
			_, err := AddTool(s, "a", "", func(context.Context, int) (sum, error) { return sum{}, nil })
			return err
		}},
		{"typed tool with non-object output", func(s *Server) error {
			_, err := AddTool(s, "a", "", func(context.Context, addArgs) ([]int, error) { return nil, nil })
			return err
		}},
		{"nil tool", func(s *Server) error { return s.AddTool(nil) }},
		{"resource without scheme", func(s *Server) error {
			return s.Resource("live", "", func(context.Context) (any, error) { return nil, nil })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.add(New("env", WithLogger(quietLogger()))); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestEvaluateToolsReturnAnEvaluationResult(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	evaluate := NewHub(EvaluateHub)
	MustAddTool(evaluate, "check", "Score the attempt", func(ctx context.Context, in struct {
		Want int `json:"want"`
	}) (EvaluationResult, error) {
		return EvaluationResult{Reward: 0.5, Done: true, Content: "half", Info: map[string]any{"want": in.Want}}, nil
	})
	if err := s.Mount(evaluate); err != nil {
		t.Fatal(err)
	}
	cs := mustConnect(t, s)
	res := callTool(t, cs, EvaluateHub, map[string]any{"name": "check", "arguments": map[string]any{"want": 3}})
	got := structured[map[string]any](t, res)
	if got["reward"] != 0.5 || got["done"] != true || got["content"] != "half" || got["info"].(map[string]any)["want"] != 3.0 {
		t.Fatalf("structured content %v, want {reward: 0.5, done: true, content, info}", got)
	}
	if role := listToolNames(t, cs)[EvaluateHub].Meta[MetaRole]; role != "evaluate" {
		t.Errorf("evaluate dispatcher role %v, want evaluate", role)
	}
}

func TestToolsReachTheEnvironmentState(t *testing.T) {
	type state struct{ items []string }
	st := &state{items: []string{"a"}}
	s := New("env", WithEnv(st), WithLogger(quietLogger()))
	MustAddTool(s, "count", "", func(ctx context.Context, _ struct{}) (sum, error) {
		env, ok := Env[*state](ctx)
		if !ok {
			return sum{}, errors.New("no env")
		}
		return sum{len(env.items)}, nil
	})
	setup := NewHub(SetupHub)
	MustAddTool(setup, "seed", "", func(ctx context.Context, in struct {
		Items []string `json:"items"`
	}) (sum, error) {
		env, ok := Env[*state](ctx)
		if !ok {
			return sum{}, errors.New("no env")
		}
		env.items = in.Items
		return sum{len(env.items)}, nil
	})
	if err := s.Mount(setup); err != nil {
		t.Fatal(err)
	}
	if setup.Env() != st {
		t.Fatalf("hub env %v, want the server's state", setup.Env())
	}
	cs := mustConnect(t, s)
	callTool(t, cs, SetupHub, map[string]any{"name": "seed", "arguments": map[string]any{"items": []string{"x", "y", "z"}}})
	if n := structured[sum](t, callTool(t, cs, "count", map[string]any{})).Sum; n != 3 {
		t.Fatalf("count after seeding = %d, want 3", n)
	}
	other := &state{}
	setup.SetEnv(other)
	callTool(t, cs, SetupHub, map[string]any{"name": "seed", "arguments": map[string]any{"items": []string{"q"}}})
	if len(other.items) != 1 || len(st.items) != 3 {
		t.Fatalf("after SetEnv the hub wrote to %v / %v, want only its own env changed", other.items, st.items)
	}
}

func TestCallRequestGivesTypedToolsTheSession(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	MustAddTool(s, "who", "", func(ctx context.Context, _ struct{}) (map[string]string, error) {
		req := CallRequest(ctx)
		if req == nil || req.Session == nil {
			return nil, errors.New("no request")
		}
		return map[string]string{"client": req.Session.InitializeParams().ClientInfo.Name}, nil
	})
	res := callTool(t, mustConnect(t, s), "who", map[string]any{})
	if got := structured[map[string]string](t, res)["client"]; got != "envserver-test" {
		t.Fatalf("client %q (%s), want envserver-test", got, resultText(res))
	}
}
