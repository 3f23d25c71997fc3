package activities

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/proctorhq/proctor/envserver"
)

func TestScenarioCallProblems(t *testing.T) {
	schema := func(s string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	const itemsJSON = `{"type":"object","properties":{"items":{"type":"array"},"n":{"type":"integer"}},"required":["items"],"additionalProperties":false}`
	items := schema(itemsJSON)
	// The scenario's arguments schema, as envserver lists it.
	var args jsonschema.Schema
	if err := json.Unmarshal([]byte(itemsJSON), &args); err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{"setup": true, "evaluate": true}
	functions := map[string][]hubFunction{
		"setup": {
			{Name: "seed", InputSchema: items},
			{Name: "reset", InputSchema: schema(`{"type":"object","additionalProperties":false}`)},
			{Name: "load", InputSchema: schema(`{"type":"object","properties":{"items":{"type":"string"},"path":{"type":"string"}},"required":["path"]}`)},
			{Name: "sized", InputSchema: schema(`{"type":"object","properties":{"n":{"type":"number"}},"additionalProperties":false}`)},
		},
		"evaluate": nil, // a hub that does not list its functions: checked for existence only
	}
	call := func(hub, name string, args map[string]any) *envserver.Call {
		return &envserver.Call{Tool: hub, Name: name, Arguments: args}
	}
	for _, tc := range []struct {
		name  string
		setup *envserver.Call
		eval  *envserver.Call
		want  []string // substrings, one per problem; none for a scenario that fits
	}{
		{"fits", call("setup", "seed", nil), call("evaluate", "anything", nil), nil},
		{"no calls", nil, nil, nil},
		{"explicit arguments that fit", call("setup", "sized", map[string]any{"n": 2.5}), nil, nil},
		{"takes no arguments", call("setup", "reset", nil), nil, []string{`its setup calls setup "reset" with the scenario's arguments, but the function takes no arguments and the scenario passes items, n`}},
		{"requires and types", call("setup", "load", nil), nil, []string{"requires path", "items is array in the scenario and string in the function"}},
		{"refuses one", call("setup", "sized", nil), nil, []string{"the function does not take items"}},
		{"no such function", call("setup", "sow", nil), nil, []string{`its setup calls setup "sow", which the setup hub does not have (its functions: seed, reset, load, sized)`}},
		{"no such hub", nil, call("grade", "score", nil), []string{`its evaluate calls grade "score", but the environment serves no tool "grade"`}},
		{"explicit arguments that do not fit", call("setup", "sized", map[string]any{"n": "two"}), nil, []string{`with arguments it does not take: n: `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scenarioCallProblems([]envserver.ScenarioInfo{{Name: "add", ArgumentsSchema: &args, Setup: tc.setup, Evaluate: tc.eval}}, served, functions)
			if len(got) != len(tc.want) {
				t.Fatalf("problems = %q, want %d like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) || !strings.HasPrefix(got[i], `scenario "add": `) {
					t.Errorf("problem %d = %q, want it to name the scenario and say %q", i, got[i], w)
				}
			}
		})
	}
}
