package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/models"
)

// DiscoverResult is what a build's image serves: the scenarios it lists, in envserver's own
// wire type (the body of scenarios://list), and the lock.
type DiscoverResult struct {
	Scenarios []envserver.ScenarioInfo `json:"scenarios"`
	Lock      models.BuildLock         `json:"lock"`
}

// UnmarshalJSON reads a DiscoverResult, and one that a worker of an earlier version recorded in a
// history still in flight, whose scenarios were models.Scenario rows (keys "ID", "Name",
// "ArgsSchema", "Metadata" {title, prompt, setup, evaluate}).
func (r *DiscoverResult) UnmarshalJSON(b []byte) error {
	var raw struct {
		Scenarios []json.RawMessage `json:"scenarios"`
		Lock      models.BuildLock  `json:"lock"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*r = DiscoverResult{Lock: raw.Lock}
	for _, one := range raw.Scenarios {
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(one, &keys); err != nil {
			return fmt.Errorf("discovered scenario: %w", err)
		}
		var sc envserver.ScenarioInfo
		if _, legacy := keys["ArgsSchema"]; legacy {
			var row struct {
				Name        string          `json:"Name"`
				Description string          `json:"Description"`
				ArgsSchema  json.RawMessage `json:"ArgsSchema"`
				Metadata    struct {
					Title    string          `json:"title"`
					Prompt   string          `json:"prompt"`
					Setup    *envserver.Call `json:"setup"`
					Evaluate *envserver.Call `json:"evaluate"`
				} `json:"Metadata"`
			}
			if err := json.Unmarshal(one, &row); err != nil {
				return fmt.Errorf("discovered scenario: %w", err)
			}
			schema, _ := looseSchema(row.ArgsSchema)
			sc = envserver.ScenarioInfo{Name: row.Name, Title: row.Metadata.Title, Description: row.Description, ArgumentsSchema: schema,
				Prompt: row.Metadata.Prompt, Setup: row.Metadata.Setup, Evaluate: row.Metadata.Evaluate}
		} else {
			var err error
			if sc, _, err = decodeScenario(one); err != nil {
				return fmt.Errorf("discovered scenario: %w", err)
			}
		}
		r.Scenarios = append(r.Scenarios, sc)
	}
	return nil
}

// readScenarioList reads scenarios://list. A scenario whose arguments_schema the schema package
// cannot read (a draft-4 form such as "exclusiveMinimum": true, which environments not built with
// envserver may send) keeps no schema rather than fail the build: its arguments go unchecked at
// upload, and notes say so for the build log.
func readScenarioList(raw []byte) (list envserver.ScenarioList, notes []string, err error) {
	var loose struct {
		Scenarios   []json.RawMessage `json:"scenarios"`
		RequiredEnv []string          `json:"required_env"`
	}
	if err := json.Unmarshal(raw, &loose); err != nil {
		return list, nil, err
	}
	list.RequiredEnv = loose.RequiredEnv
	for _, one := range loose.Scenarios {
		sc, note, err := decodeScenario(one)
		if err != nil {
			return list, nil, err
		}
		if note != "" {
			notes = append(notes, note)
		}
		list.Scenarios = append(list.Scenarios, sc)
	}
	return list, notes, nil
}

// decodeScenario reads one scenario of a list, its arguments_schema leniently (see
// readScenarioList); note says why a schema was left out.
func decodeScenario(one json.RawMessage) (envserver.ScenarioInfo, string, error) {
	var sc struct {
		envserver.ScenarioInfo
		ArgumentsSchema json.RawMessage `json:"arguments_schema"` // shadows the embedded field
	}
	if err := json.Unmarshal(one, &sc); err != nil {
		return envserver.ScenarioInfo{}, "", err
	}
	schema, why := looseSchema(sc.ArgumentsSchema)
	info := sc.ScenarioInfo
	info.ArgumentsSchema = schema
	if why != "" {
		return info, fmt.Sprintf("scenario %q: its arguments_schema is not one this platform reads (%s): its arguments are not checked at upload", info.Name, why), nil
	}
	return info, "", nil
}

// looseSchema reads a JSON schema; one that does not read is nil, and why says what was wrong.
func looseSchema(raw json.RawMessage) (*jsonschema.Schema, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err.Error()
	}
	return &s, ""
}

// DiscoverScenarios starts a build's image in a sandbox, initializes it over MCP and reads what
// it serves: its scenarios, tools, prompts and resources. The lock names the transport discovery
// reached the image over; an image whose command asks for another transport than the platform
// speaks fails the build at once, saying so.
func (a *Activities) DiscoverScenarios(ctx context.Context, in DiscoverInput) (_ DiscoverResult, err error) {
	stop := keepAlive(ctx)
	defer stop()
	defer func() {
		if lines := buildFailureLines(err); lines != nil {
			if lerr := a.registry().AppendBuildLog(context.WithoutCancel(ctx), in.BuildID, lines); lerr != nil {
				a.log().WarnContext(ctx, "build log", "build", in.BuildID, "error", lerr)
			}
		}
	}()
	b, err := a.registry().BuildByID(ctx, in.BuildID)
	if err != nil {
		return DiscoverResult{}, err
	}
	if im := in.Image; im.ImageKey != "" {
		b.Digest, b.ImageKey, b.ImageName, b.RuntimeConfig.Command = im.Digest, im.ImageKey, im.ImageName, im.Command
	}
	if t := commandTransport(b.RuntimeConfig.Command); t != "" && t != models.TransportStdio {
		return DiscoverResult{}, buildFailed("the image's command (%s) serves MCP over %s, and the platform runs an environment over stdio "+
			"(its stdin and stdout): drop --transport %s from the image's ENTRYPOINT or CMD, or pass --transport stdio", strings.Join(b.RuntimeConfig.Command, " "), t, t)
	}
	spec, err := a.imageSpec(ctx, b)
	if err != nil {
		return DiscoverResult{}, err
	}
	spec.ID = "discover-" + b.ID.String()
	// Discovery only lists what the image serves: it changes nothing, on any provider.
	spec.WritableRoot = false
	var stderr []string
	var mu sync.Mutex
	spec.OnLog = func(l sandbox.LogLine) {
		mu.Lock()
		defer mu.Unlock()
		if len(stderr) < 50 {
			stderr = append(stderr, l.Line)
		}
	}
	sb, err := a.Sandboxes.Start(ctx, spec)
	if errors.Is(err, sandbox.ErrInvalidSpec) {
		return DiscoverResult{}, buildFailed("the image cannot run: %v", err)
	}
	if err != nil {
		return DiscoverResult{}, err
	}
	defer sb.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // best effort: the sandbox is ours alone
	cctx, cancel := context.WithTimeout(ctx, discoverInitTimeout)
	defer cancel()
	env, err := agent.Connect(cctx, sb.Stdout(), sb.Stdin(), agent.ConnectOptions{ClientName: "proctor-discover", Logger: a.log()})
	if err != nil {
		// Its stderr is read to its end first (a sandbox that exited at once has not been read
		// yet), and how it exited said.
		sb.Stop(context.WithoutCancel(ctx)) //nolint:errcheck // its exit is read below
		exit := ""
		if e := sb.Err(); e != nil {
			exit = "; " + e.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		if len(stderr) > 0 && strings.HasPrefix(stderr[0], "bwrap: ") {
			// The sandbox never ran the image's command: this host's failure, not the image's.
			return DiscoverResult{}, fmt.Errorf("the sandbox to list the image's scenarios did not start: %s%s", strings.Join(stderr, " | "), exit)
		}
		return DiscoverResult{}, buildFailed("the image did not answer MCP initialize on stdio, the transport the platform runs environments over "+
			"(an image that serves MCP over HTTP must serve it on stdio instead): %v (stderr: %s%s)", err, strings.Join(stderr, " | "), exit)
	}
	defer env.Close()
	// Initialize answered on the sandbox's stdin and stdout: the image serves stdio.
	res := DiscoverResult{Lock: models.BuildLock{Transport: models.TransportStdio}}
	if raw, err := env.ReadResource(cctx, "scenarios://list"); err == nil {
		list, notes, err := readScenarioList(raw)
		if err != nil {
			return DiscoverResult{}, buildFailed("scenarios://list: %v", err)
		}
		if len(notes) > 0 {
			if lerr := a.registry().AppendBuildLog(context.WithoutCancel(ctx), in.BuildID, notes); lerr != nil {
				a.log().WarnContext(ctx, "build log", "build", in.BuildID, "error", lerr)
			}
		}
		res.Scenarios, res.Lock.RequiredEnv = list.Scenarios, list.RequiredEnv
	}
	inv, err := env.Inventory(cctx)
	if err != nil {
		// An environment that ends mid-session says why on its stderr, or in how it ended.
		select {
		case <-sb.Done():
			err = fmt.Errorf("%w; the environment ended: %v", err, sb.Err())
		case <-time.After(time.Second):
		}
		mu.Lock()
		defer mu.Unlock()
		return DiscoverResult{}, buildFailed("list what the image serves: %v (stderr: %s)", err, strings.Join(stderr, " | "))
	}
	lockInventory(&res.Lock, inv)
	if len(res.Scenarios) > 0 {
		if problems := checkScenarioCalls(cctx, env, res.Scenarios, res.Lock); len(problems) > 0 {
			return DiscoverResult{}, buildFailed("the environment's scenarios call its hubs in ways that would fail every attempt:\n  - %s", strings.Join(problems, "\n  - "))
		}
	}
	return res, nil
}

// discoverInitTimeout bounds discovery's MCP session with the image: initialize and the listings.
const discoverInitTimeout = 60 * time.Second

// commandTransport is the transport an environment's command asks for with a --transport flag
// (or -transport, and either with =value, as Go's flag package reads them, envserver.Main's
// among them); empty when it names none.
func commandTransport(argv []string) string {
	for i, arg := range argv {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-"), "=")
		if !strings.HasPrefix(arg, "-") || name != "transport" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(argv) {
			return argv[i+1]
		}
	}
	return ""
}

// lockInventory records in lock what the environment lists: its tools with their schemas and
// roles, its prompts and its resources.
func lockInventory(lock *models.BuildLock, inv agent.Inventory) {
	lock.Tools = make([]models.LockTool, len(inv.Tools))
	for i, t := range inv.Tools {
		lock.Tools[i] = models.LockTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, Role: t.Role}
	}
	lock.Prompts = make([]models.LockPrompt, len(inv.Prompts))
	for i, p := range inv.Prompts {
		lock.Prompts[i] = models.LockPrompt{Name: p.Name, Description: p.Description}
	}
	lock.Resources = make([]models.LockResource, len(inv.Resources))
	for i, r := range inv.Resources {
		lock.Resources[i] = models.LockResource{URI: r.URI, Name: r.Name}
	}
}

// ScenarioRows are the scenario rows a build records of the scenarios its environment lists.
func ScenarioRows(list []envserver.ScenarioInfo) []models.Scenario {
	var out []models.Scenario
	for _, sc := range list {
		row := models.Scenario{Name: sc.Name, Description: sc.Description, ArgsSchema: schemaMap(sc.ArgumentsSchema),
			Metadata: map[string]any{"title": sc.Title, "prompt": sc.Prompt, "setup": sc.Setup, "evaluate": sc.Evaluate}}
		if sc.ArgumentsSchema != nil {
			for _, name := range slices.Sorted(maps.Keys(sc.ArgumentsSchema.Properties)) {
				row.Arguments = append(row.Arguments, map[string]any{"name": name, "schema": schemaMap(sc.ArgumentsSchema.Properties[name])})
			}
		}
		if sc.Setup != nil {
			row.SetupDescription = "setup " + sc.Setup.Name
		}
		out = append(out, row)
	}
	return out
}

// schemaMap is a JSON Schema as the scenario row's open args_schema object holds it.
func schemaMap(s *jsonschema.Schema) map[string]any {
	if s == nil {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
