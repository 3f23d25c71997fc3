package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// hubFunction is an entry of a hub's functions resource (file:///<hub>/functions, which
// envserver serves for every mounted hub).
type hubFunction struct {
	Name        string         `json:"name"`
	InputSchema map[string]any `json:"inputSchema"`
}

// checkScenarioCalls reads what a build's environment serves to check its scenarios' setup and
// evaluate calls before any attempt makes them: each names a hub the environment serves, a
// function of that hub, and arguments the function takes. It returns one message per problem.
// A hub whose functions the environment does not list (one not built with envserver) is checked
// for existence only.
func checkScenarioCalls(ctx context.Context, env *agent.Env, scenarios []envserver.ScenarioInfo, lock models.BuildLock) []string {
	served := map[string]bool{}
	for _, t := range lock.Tools {
		served[t.Name] = true
	}
	functions := map[string][]hubFunction{}
	for _, sc := range scenarios {
		for _, c := range []*envserver.Call{sc.Setup, sc.Evaluate} {
			if c == nil {
				continue
			}
			hub := c.Tool
			if _, seen := functions[hub]; seen || hub == "" || !served[hub] {
				continue
			}
			functions[hub] = nil
			raw, err := env.ReadResource(ctx, "file:///"+hub+"/functions")
			if err != nil {
				continue
			}
			var list struct {
				Functions []hubFunction `json:"functions"`
			}
			if json.Unmarshal(raw, &list) == nil {
				functions[hub] = list.Functions
			}
		}
	}
	return scenarioCallProblems(scenarios, served, functions)
}

// scenarioCallProblems is checkScenarioCalls' judgement, given the tools the environment serves
// and the functions of its hubs (nil for a hub that does not list them).
func scenarioCallProblems(scenarios []envserver.ScenarioInfo, served map[string]bool, functions map[string][]hubFunction) []string {
	var problems []string
	for _, sc := range scenarios {
		for _, stage := range []struct {
			role string
			call *envserver.Call
		}{{"setup", sc.Setup}, {"evaluate", sc.Evaluate}} {
			if stage.call == nil {
				continue
			}
			hub, name := stage.call.Tool, stage.call.Name
			where := fmt.Sprintf("scenario %q: its %s calls %s %q", sc.Name, stage.role, hub, name)
			if !served[hub] {
				problems = append(problems, fmt.Sprintf("%s, but the environment serves no tool %q (mount the hub)", where, hub))
				continue
			}
			fns := functions[hub]
			if fns == nil {
				continue
			}
			i := slices.IndexFunc(fns, func(f hubFunction) bool { return f.Name == name })
			if i < 0 {
				names := make([]string, len(fns))
				for j, f := range fns {
					names[j] = f.Name
				}
				problems = append(problems, fmt.Sprintf("%s, which the %s hub does not have (its functions: %s)", where, hub, strings.Join(names, ", ")))
				continue
			}
			fn := fns[i].InputSchema
			if explicit := stage.call.Arguments; explicit != nil {
				for _, v := range models.ArgsViolations(fn, explicit) {
					problems = append(problems, fmt.Sprintf("%s with arguments it does not take: %s%s", where, fieldPrefix(v.Location), v.Message))
				}
				continue
			}
			for _, p := range argsMismatch(sc.ArgumentsSchema, fn) {
				problems = append(problems, fmt.Sprintf("%s with the scenario's arguments, but %s", where, p))
			}
		}
	}
	return problems
}

func fieldPrefix(loc string) string {
	if loc == "" {
		return ""
	}
	return loc + ": "
}

// argsMismatch says why a function whose input schema is fn cannot take arguments that
// scenario (the scenario's arguments schema) allows: an argument it refuses (additionalProperties
// false), one it requires that the scenario does not have, or one whose type differs. It checks
// what the schemas state at the top level; what it cannot decide it lets pass.
func argsMismatch(scenario *jsonschema.Schema, fn map[string]any) []string {
	var sProps map[string]*jsonschema.Schema
	if scenario != nil {
		sProps = scenario.Properties
	}
	names := slices.Sorted(maps.Keys(sProps))
	fProps, _ := fn["properties"].(map[string]any)
	var out []string
	if closed, ok := fn["additionalProperties"].(bool); ok && !closed {
		var refused []string
		for _, name := range names {
			if _, ok := fProps[name]; !ok {
				refused = append(refused, name)
			}
		}
		switch {
		case len(refused) > 0 && len(fProps) == 0:
			out = append(out, fmt.Sprintf("the function takes no arguments and the scenario passes %s", strings.Join(refused, ", ")))
		case len(refused) > 0:
			out = append(out, fmt.Sprintf("the function does not take %s", strings.Join(refused, ", ")))
		}
	}
	for _, name := range stringList(fn["required"]) {
		if _, ok := sProps[name]; !ok {
			out = append(out, fmt.Sprintf("the function requires %s, which the scenario's arguments do not have", name))
		}
	}
	for _, name := range names {
		fp, ok := fProps[name].(map[string]any)
		if !ok || sProps[name] == nil {
			continue
		}
		st := sProps[name].Type
		ft, _ := fp["type"].(string)
		if st != "" && ft != "" && st != ft && !(st == "integer" && ft == "number") {
			out = append(out, fmt.Sprintf("%s is %s in the scenario and %s in the function", name, st, ft))
		}
	}
	return out
}

func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
