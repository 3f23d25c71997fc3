package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The random agent makes randomCalls calls, each of an offered tool with arguments its input
// schema allows (enums, bounds, arrays, nested objects, required properties), the same ones for
// the same conversation, then says it is done.
func TestTheRandomAgentCallsToolsWithArgumentsTheirSchemasAllow(t *testing.T) {
	schemas := map[string]string{
		"add_todo": `{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}`,
		"move":     `{"type":"object","properties":{"direction":{"type":"string","enum":["up","down","left","right"]}},"required":["direction"]}`,
		"place": `{"type":"object","properties":{"x":{"type":"integer","minimum":3,"maximum":5},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2},
			"where":{"type":"object","properties":{"z":{"type":["null","number"],"minimum":16}},"required":["z"]},"ok":{"type":"boolean"}},"required":["x","tags","where","ok"]}`,
	}
	var tools []Tool
	compiled := map[string]*jsonschema.Schema{}
	for name, s := range schemas {
		var doc map[string]any
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, Tool{Name: name, InputSchema: doc})
		c := jsonschema.NewCompiler()
		raw, _ := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err := c.AddResource(name+".json", raw); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile(name + ".json")
		if err != nil {
			t.Fatal(err)
		}
		compiled[name] = sch
	}
	run := func() []ToolCall {
		req := StepRequest{Tools: tools}
		var calls []ToolCall
		for step := 0; ; step++ {
			res, err := NewRandom(1).Step(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if res.Done {
				if step != randomCalls {
					t.Fatalf("done after %d steps, want %d", step, randomCalls)
				}
				return calls
			}
			calls = append(calls, res.Message.ToolCalls...)
			req.Messages = append(req.Messages, res.Message, Message{Role: RoleTool, ToolCallID: res.Message.ToolCalls[0].ID, Content: "ok"})
		}
	}
	first, again := run(), run()
	names := map[string]bool{}
	for i, c := range first {
		b, _ := json.Marshal(c.Arguments)
		inst, _ := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
		if err := compiled[c.Name].Validate(inst); err != nil {
			t.Errorf("call %d %s(%s) does not match its schema: %v", i, c.Name, b, err)
		}
		if b2, _ := json.Marshal(again[i].Arguments); again[i].Name != c.Name || string(b2) != string(b) {
			t.Errorf("call %d differs between two runs: %s(%s), %s(%s)", i, c.Name, b, again[i].Name, b2)
		}
		names[c.Name] = true
	}
	if len(names) < 2 {
		t.Errorf("five calls of %v: the random agent always picks one tool", names)
	}
}
