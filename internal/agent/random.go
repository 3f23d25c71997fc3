package agent

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
)

// RandomModelName is the model name a random agent's answers carry.
const RandomModelName = "random"

// randomCalls is how many tool calls a random agent makes before it says it is done.
const randomCalls = 5

// NewRandom returns an agent that makes randomCalls tool calls, each of a tool it is offered
// picked at random with arguments its input schema allows picked at random, then says it is done.
// Its choices depend on seed, the step and the tools only, so an attempt replays as it ran. A task
// it passes rewards activity, not work (certification flags it).
func NewRandom(seed uint64) Model { return randomAgent{seed: seed} }

type randomAgent struct{ seed uint64 }

func (r randomAgent) Step(ctx context.Context, req StepRequest) (*StepResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("random step: %w", err)
	}
	_, made := req.answered()
	if made >= randomCalls || len(req.Tools) == 0 {
		return &StepResult{Message: Message{Role: RoleAssistant, Content: fmt.Sprintf("Done: made %d random calls.", made)}, Done: true,
			Model: RandomModelName, StopReason: "end_turn"}, nil
	}
	rng := rand.New(rand.NewPCG(r.seed, uint64(made)))
	tools := slices.Clone(req.Tools)
	slices.SortFunc(tools, func(a, b Tool) int { return cmp.Compare(a.Name, b.Name) })
	t := tools[rng.IntN(len(tools))]
	args, _ := randomValue(rng, t.InputSchema, 0).(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	return &StepResult{Message: Message{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: fmt.Sprintf("random_%d", made), Name: t.Name, Arguments: args}}},
		Model: RandomModelName, StopReason: "tool_use"}, nil
}

// randomWords are what a random agent writes where a string is asked for.
var randomWords = []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"}

// randomValue is a value the JSON Schema allows, picked with rng: an enum's or a const's, else one
// of its type (the first non-null one of a list), within minimum/maximum and minItems/maxItems;
// an object gets its required properties and each other one half the time. Deeper than four
// levels, or with a type it cannot make, it answers null.
func randomValue(rng *rand.Rand, schema map[string]any, depth int) any {
	if depth > 4 {
		return nil
	}
	if enum, ok := schema["enum"].([]any); ok && len(enum) > 0 {
		return enum[rng.IntN(len(enum))]
	}
	if c, ok := schema["const"]; ok {
		return c
	}
	typ := schemaType(schema)
	lo, hi := schemaNumber(schema["minimum"], 0), schemaNumber(schema["maximum"], 10)
	if _, bounded := schema["maximum"]; !bounded && hi < lo {
		hi = lo + 10
	}
	switch typ {
	case "string":
		return randomWords[rng.IntN(len(randomWords))]
	case "integer":
		return int64(lo) + rng.Int64N(max(int64(hi)-int64(lo), 0)+1)
	case "number":
		return lo + rng.Float64()*(hi-lo)
	case "boolean":
		return rng.IntN(2) == 1
	case "array":
		items, _ := schema["items"].(map[string]any)
		n := int(schemaNumber(schema["minItems"], 1)) + rng.IntN(2)
		if m, ok := schema["maxItems"]; ok {
			n = min(n, int(schemaNumber(m, 0)))
		}
		out := make([]any, 0, n)
		for range n {
			out = append(out, randomValue(rng, items, depth+1))
		}
		return out
	case "object":
		props, _ := schema["properties"].(map[string]any)
		required := map[string]bool{}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					required[s] = true
				}
			}
		}
		out := map[string]any{}
		names := make([]string, 0, len(props))
		for name := range props {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			if p, ok := props[name].(map[string]any); ok && (required[name] || rng.IntN(2) == 0) {
				out[name] = randomValue(rng, p, depth+1)
			}
		}
		return out
	}
	return nil
}

// schemaType is a schema's type: its "type", the first non-null one of a list of them, or
// object for one with properties and no type.
func schemaType(schema map[string]any) string {
	typ, _ := schema["type"].(string)
	if list, ok := schema["type"].([]any); ok {
		for _, t := range list {
			if s, _ := t.(string); s != "null" && s != "" {
				typ = s
				break
			}
		}
	}
	if typ == "" && schema["properties"] != nil {
		typ = "object"
	}
	return typ
}

// schemaNumber is a JSON number of a schema, or def when it is none.
func schemaNumber(v any, def float64) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case int:
		return float64(n)
	case int64:
		return float64(n)
	}
	return def
}
