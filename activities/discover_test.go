package activities

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.temporal.io/sdk/temporal"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/storetest"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/registry"
)

// TestDiscoveryLocksTheTransportTheImageServes starts real environment processes the way a
// build's discovery does and checks the lock it records: the transport discovery reached the
// environment over, every tool with its schema and role, the resources; and that an image whose
// command asks for another transport fails the build at once, saying why.
func TestDiscoveryLocksTheTransportTheImageServes(t *testing.T) {
	ctx := context.Background()
	s := storetest.Open(t, models.SQLite)
	tm, err := s.CreateTeam(ctx, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	u, m, _ := s.AddMember(ctx, tm.ID, "", "a@example.com", models.RoleOwner)
	c := &models.Caller{TeamID: tm.ID, UserID: u.ID, MembershipID: m.ID, Role: m.Role}
	reg, err := registry.Of(s).CreateRegistry(ctx, c, registry.NewRegistry{Name: "todo"})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	sb, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), MaxSandboxes: 2, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close(context.Background()) })
	acts := &Activities{Store: s, Logger: log, Sandboxes: sb}
	pending := func(command ...string) uuid.UUID {
		t.Helper()
		b, err := registry.Of(s).CreateBuild(ctx, reg.ID, registry.NewBuild{Status: registry.BuildRunning, RuntimeConfig: models.BuildRuntime{Command: command}})
		if err != nil {
			t.Fatal(err)
		}
		return b.ID
	}
	todo := todoBinary(t)

	t.Run("stdio", func(t *testing.T) {
		id := pending(todo)
		res, err := acts.DiscoverScenarios(ctx, DiscoverInput{BuildID: id})
		if err != nil {
			t.Fatal(err)
		}
		if res.Lock.Transport != models.TransportStdio {
			t.Errorf("lock transport = %q, want stdio", res.Lock.Transport)
		}
		roles := map[string]string{}
		for _, tool := range res.Lock.Tools {
			roles[tool.Name] = tool.Role
			if tool.InputSchema["type"] != "object" {
				t.Errorf("tool %s has input schema %v", tool.Name, tool.InputSchema)
			}
		}
		if r, ok := roles["add_todo"]; !ok || r != "" || roles["setup"] != "setup" || roles["evaluate"] != "evaluate" {
			t.Errorf("tool roles = %v, want add_todo without one and the hubs' dispatchers with theirs", roles)
		}
		if !slices.ContainsFunc(res.Lock.Resources, func(r models.LockResource) bool { return r.URI == "telemetry://live" }) {
			t.Errorf("resources = %+v, want telemetry://live among them", res.Lock.Resources)
		}
		i := slices.IndexFunc(res.Scenarios, func(sc envserver.ScenarioInfo) bool { return sc.Setup != nil && sc.ArgumentsSchema != nil })
		if i < 0 {
			t.Fatalf("scenarios = %+v, want ones with a setup call and an arguments schema", res.Scenarios)
		}

		// What discovery found goes through history to FinishBuild, which records it.
		var replayed DiscoverResult
		if b, err := json.Marshal(res); err != nil || json.Unmarshal(b, &replayed) != nil || !reflect.DeepEqual(replayed.Lock, res.Lock) ||
			len(replayed.Scenarios) != len(res.Scenarios) || replayed.Scenarios[i].Setup.Name != res.Scenarios[i].Setup.Name {
			t.Fatalf("through history: %+v, want %+v", replayed, res)
		}
		if _, err := acts.FinishBuild(ctx, FinishBuildInput{BuildID: id, Status: registry.BuildSucceeded, Lock: replayed.Lock, Scenarios: replayed.Scenarios}); err != nil {
			t.Fatal(err)
		}
		row, err := registry.Of(s).GetBuildFor(ctx, c, id)
		if err != nil || !reflect.DeepEqual(row.Lock, res.Lock) {
			t.Errorf("recorded lock = %+v (%v), want %+v", row.Lock, err, res.Lock)
		}
		rows, _ := registry.Of(s).ListScenarios(ctx, id)
		j := slices.IndexFunc(rows, func(sc models.Scenario) bool { return sc.Name == res.Scenarios[i].Name })
		if len(rows) != len(res.Scenarios) || j < 0 || len(rows[j].Arguments) == 0 || rows[j].ArgsSchema["type"] != "object" ||
			rows[j].Metadata["prompt"] != res.Scenarios[i].Prompt || rows[j].SetupDescription != "setup "+res.Scenarios[i].Setup.Name {
			t.Errorf("recorded scenarios = %+v", rows)
		}
	})

	// A command that dies at once: its last words and its exit status, read to their end before
	// the build fails (it exits before its stderr has been read).
	t.Run("dies at once", func(t *testing.T) {
		sh, err := exec.LookPath("sh")
		if err != nil {
			t.Skip("no sh")
		}
		for range 5 {
			_, err := acts.DiscoverScenarios(ctx, DiscoverInput{BuildID: pending(sh, "-c", "echo boom >&2; exit 3")})
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != ErrBuildFailed || !strings.Contains(appErr.Message(), "stderr: boom") ||
				!strings.Contains(appErr.Message(), "exit status 3") {
				t.Fatalf("discovery of a command that exits at once: %v; want the build failed with its stderr and exit status", err)
			}
		}
	})

	for _, command := range [][]string{{todo, "--transport", "http", "--port", "0"}, {todo, "-transport=sse"}} {
		t.Run(strings.Join(command[1:], " "), func(t *testing.T) {
			start := time.Now()
			_, err := acts.DiscoverScenarios(ctx, DiscoverInput{BuildID: pending(command...)})
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != ErrBuildFailed || !strings.Contains(appErr.Message(), "serves MCP over") ||
				!strings.Contains(appErr.Message(), "the platform runs an environment over stdio") {
				t.Fatalf("discovery of an image serving another transport: %v; want the build failed, naming the transport", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("the build failed after %s, want at once rather than after initialize times out", d)
			}
		})
	}
}

func TestCommandTransport(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"/app/env"}, ""},
		{[]string{"/app/env", "--transport", "stdio"}, "stdio"},
		{[]string{"/app/env", "--port", "80", "--transport", "http"}, "http"},
		{[]string{"/app/env", "-transport=sse"}, "sse"},
		{[]string{"/app/env", "--transport=http"}, "http"},
		{[]string{"/app/env", "transport", "http"}, ""},
		{[]string{"/app/env", "--transports", "http"}, ""},
		{[]string{"/app/env", "--transport"}, ""},
	} {
		if got := commandTransport(tc.argv); got != tc.want {
			t.Errorf("commandTransport(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// A Build workflow in flight when its workers were upgraded holds a discovery result in the
// earlier shape, scenarios as store rows: it decodes to the same scenarios.
func TestADiscoveryResultOfAnEarlierWorkerDecodes(t *testing.T) {
	legacy := `{"scenarios":[{"BaseModel":{},"ID":"00000000-0000-0000-0000-000000000000","Name":"add-todos","Slug":"","Description":"add them",
		"SetupDescription":"setup seed","ArgsSchema":{"type":"object","properties":{"items":{"type":"array"}}},"Arguments":[{"name":"items","schema":{"type":"array"}}],
		"Metadata":{"title":"Add","prompt":"Add {{.Items}}","setup":{"tool":"setup","name":"seed"},"evaluate":{"tool":"evaluate","name":"check","arguments":{"n":1}}},
		"TraceNameTemplate":"","CreatedAt":"0001-01-01T00:00:00Z"}],
		"lock":{"transport":"stdio","tools":[{"name":"add_todo","description":"add one","input_schema":{"type":"object"}},{"name":"setup","description":"","role":"setup"}],
		"prompts":[],"resources":[{"uri":"telemetry://live","name":"live"}],"required_env":["TOKEN"]}}`
	var res DiscoverResult
	if err := json.Unmarshal([]byte(legacy), &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Scenarios) != 1 {
		t.Fatalf("scenarios = %+v", res.Scenarios)
	}
	sc := res.Scenarios[0]
	if sc.Name != "add-todos" || sc.Title != "Add" || sc.Description != "add them" || sc.Prompt != "Add {{.Items}}" ||
		sc.Setup == nil || sc.Setup.Name != "seed" || sc.Evaluate == nil || sc.Evaluate.Arguments["n"] != 1.0 ||
		sc.ArgumentsSchema == nil || sc.ArgumentsSchema.Properties["items"] == nil {
		t.Errorf("scenario = %+v", sc)
	}
	want := models.BuildLock{Transport: "stdio", Tools: []models.LockTool{{Name: "add_todo", Description: "add one", InputSchema: map[string]any{"type": "object"}},
		{Name: "setup", Role: "setup"}}, Prompts: []models.LockPrompt{}, Resources: []models.LockResource{{URI: "telemetry://live", Name: "live"}}, RequiredEnv: []string{"TOKEN"}}
	if !reflect.DeepEqual(res.Lock, want) {
		t.Errorf("lock = %+v, want %+v", res.Lock, want)
	}
	if rows := ScenarioRows(res.Scenarios); len(rows) != 1 || len(rows[0].Arguments) != 1 || rows[0].SetupDescription != "setup seed" {
		t.Errorf("rows = %+v", rows)
	}
}

// A scenario whose arguments_schema the schema package cannot read (draft-4 forms, from an
// environment not built with envserver) keeps no schema, with a note, rather than fail the build.
func TestScenarioListReadsUnreadableSchemasLeniently(t *testing.T) {
	raw := []byte(`{"scenarios": [
		{"name": "ok", "prompt": "p", "arguments_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}}},
		{"name": "draft4", "prompt": "p", "arguments_schema": {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1, "exclusiveMinimum": true}}}},
		{"name": "none", "prompt": "p"}], "required_env": ["KEY"]}`)
	list, notes, err := readScenarioList(raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Scenarios) != 3 || list.Scenarios[0].ArgumentsSchema == nil || list.Scenarios[0].ArgumentsSchema.Properties["n"] == nil ||
		list.Scenarios[1].ArgumentsSchema != nil || list.Scenarios[1].Prompt != "p" || list.Scenarios[2].ArgumentsSchema != nil ||
		len(list.RequiredEnv) != 1 {
		t.Fatalf("list = %+v", list)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], `scenario "draft4"`) {
		t.Errorf("notes = %q, want one about draft4", notes)
	}
	if _, _, err := readScenarioList([]byte(`{"scenarios": [{"name": 3}]}`)); err == nil {
		t.Error("a scenario whose name is a number was read")
	}
}
