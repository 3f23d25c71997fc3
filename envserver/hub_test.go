package envserver

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type seedArgs struct {
	Items []string `json:"items" jsonschema:"the items to seed"`
}

type seeded struct {
	Seeded []string `json:"seeded"`
}

func seedHubServer(t *testing.T) (*Server, *mcp.ClientSession) {
	t.Helper()
	s := New("env", WithLogger(quietLogger()))
	setup := NewHub(SetupHub)
	MustAddTool(setup, "seed", "Seed the items", func(ctx context.Context, in seedArgs) (seeded, error) {
		return seeded{in.Items}, nil
	})
	if err := s.Mount(setup); err != nil {
		t.Fatal(err)
	}
	// Added after mounting: must be dispatchable and listed too.
	MustAddTool(setup, "clear", "Clear everything", func(ctx context.Context, _ struct{}) (seeded, error) {
		return seeded{[]string{}}, nil
	})
	return s, mustConnect(t, s)
}

func TestHubDispatcherIsTheOnlyVisibleTool(t *testing.T) {
	_, cs := seedHubServer(t)
	tools := listToolNames(t, cs)
	if len(tools) != 1 || tools[SetupHub] == nil {
		t.Fatalf("tools/list = %v, want only the setup dispatcher", keys(tools))
	}
	schema, _ := json.Marshal(tools[SetupHub].InputSchema)
	var s struct {
		Properties struct {
			Name struct {
				Enum []string `json:"enum"`
			} `json:"name"`
			Arguments map[string]any `json:"arguments"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Properties.Name.Enum, []string{"seed", "clear"}) || s.Properties.Arguments["type"] != "object" || !slices.Equal(s.Required, []string{"name"}) {
		t.Fatalf("dispatcher schema %s, want name enum [seed clear], arguments an object (no type union), required [name]", schema)
	}
	if role := tools[SetupHub].Meta[MetaRole]; role != "setup" {
		t.Errorf("dispatcher role %v, want setup", role)
	}
}

func TestHubToolsCannotBeCalledDirectly(t *testing.T) {
	_, cs := seedHubServer(t)
	_, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: "seed", Arguments: map[string]any{"items": []string{"a"}}})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("direct call error = %v, want unknown tool", err)
	}
}

func TestHubDispatch(t *testing.T) {
	_, cs := seedHubServer(t)
	tests := []struct {
		name       string
		args       map[string]any
		wantSeeded []string
		wantErr    string // substring of the tool error; "" for success
	}{
		{"arguments as an object", map[string]any{"name": "seed", "arguments": map[string]any{"items": []string{"a", "b"}}}, []string{"a", "b"}, ""},
		{"arguments as a JSON string", map[string]any{"name": "seed", "arguments": `{"items":["c"]}`}, []string{"c"}, ""},
		{"no arguments", map[string]any{"name": "clear"}, []string{}, ""},
		{"empty string arguments", map[string]any{"name": "clear", "arguments": ""}, []string{}, ""},
		{"tool added after mounting", map[string]any{"name": "clear", "arguments": map[string]any{}}, []string{}, ""},
		{"invalid JSON string", map[string]any{"name": "seed", "arguments": `{"items": [`}, nil, "not valid JSON"},
		{"arguments not an object", map[string]any{"name": "seed", "arguments": []int{1}}, nil, "must be a JSON object"},
		{"unknown function", map[string]any{"name": "nuke"}, nil, `has no function "nuke"; available: seed, clear`},
		{"missing name", map[string]any{"arguments": map[string]any{}}, nil, `missing "name"`},
		{"inner arguments invalid", map[string]any{"name": "seed", "arguments": map[string]any{"items": "a"}}, nil, "validating arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := callTool(t, cs, SetupHub, tt.args)
			if tt.wantErr != "" {
				if !res.IsError || !strings.Contains(resultText(res), tt.wantErr) {
					t.Fatalf("result isError=%v %q, want a tool error containing %q", res.IsError, resultText(res), tt.wantErr)
				}
				return
			}
			if res.IsError {
				t.Fatalf("tool error %q", resultText(res))
			}
			if got := structured[seeded](t, res).Seeded; !slices.Equal(got, tt.wantSeeded) {
				t.Fatalf("seeded %v, want %v", got, tt.wantSeeded)
			}
		})
	}
}

func TestHubFunctionsResourceListsTheHiddenTools(t *testing.T) {
	_, cs := seedHubServer(t)
	var got struct {
		Hub       string `json:"hub"`
		Functions []struct {
			Name         string         `json:"name"`
			Description  string         `json:"description"`
			InputSchema  map[string]any `json:"inputSchema"`
			OutputSchema map[string]any `json:"outputSchema"`
		} `json:"functions"`
	}
	readResource(t, cs, "file:///setup/functions", &got)
	if got.Hub != "setup" || len(got.Functions) != 2 {
		t.Fatalf("functions resource %+v, want the setup hub's 2 functions", got)
	}
	f := got.Functions[0]
	if f.Name != "seed" || f.Description != "Seed the items" || f.InputSchema["properties"] == nil || f.OutputSchema == nil {
		t.Fatalf("first function %+v, want seed with its description and schemas", f)
	}
}

func TestHubMountedOnOneServerOnly(t *testing.T) {
	h := NewHub("h")
	if err := New("a", WithLogger(quietLogger())).Mount(h); err != nil {
		t.Fatal(err)
	}
	if err := New("b", WithLogger(quietLogger())).Mount(h); err == nil {
		t.Fatal("a hub mounted on a second server")
	}
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
