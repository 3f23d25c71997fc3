package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/models"
)

// exampleEnvs are the example environments `proctor dev` builds and registers, until builds of
// uploaded sources exist.
var exampleEnvs = []struct{ name, description string }{
	{"todo", "A todo list an agent edits: add, list, complete and delete todos."},
	{"game2048", "A deterministic game of 2048 an agent plays to reach a target tile."},
}

// demoTasks is the taskset `demo`: tasks over the example environments whose validation calls
// earn reward 1.0, so that `proctor eval demo --model oracle` runs a whole job offline.
var demoTasks = []models.TaskUpload{
	{TaskContent: models.TaskContent{Name: "todo-add", Env: "todo", Scenario: "add-todos",
		Args: map[string]any{"items": []any{"buy milk", "walk the dog"}},
		Validation: []models.ValidationCall{
			{Name: "add_todo", Arguments: map[string]any{"title": "buy milk"}},
			{Name: "add_todo", Arguments: map[string]any{"title": "walk the dog"}},
		}}},
	{TaskContent: models.TaskContent{Name: "todo-complete", Env: "todo", Scenario: "complete-todos",
		Args: map[string]any{"items": []any{"buy milk", "walk the dog"}},
		Validation: []models.ValidationCall{
			{Name: "complete_todo", Arguments: map[string]any{"id": 1}},
			{Name: "complete_todo", Arguments: map[string]any{"id": 2}},
		}}},
	{TaskContent: models.TaskContent{Name: "2048-reach-16", Env: "game2048", Scenario: "reach-tile",
		Args: map[string]any{"target": 16, "seed": 1},
		Validation: []models.ValidationCall{
			{Name: "move", Arguments: map[string]any{"direction": "down"}},
			{Name: "move", Arguments: map[string]any{"direction": "left"}},
			{Name: "move", Arguments: map[string]any{"direction": "up"}},
			{Name: "move", Arguments: map[string]any{"direction": "up"}},
			{Name: "move", Arguments: map[string]any{"direction": "left"}},
			{Name: "move", Arguments: map[string]any{"direction": "left"}},
		}}},
}

// seedModels registers the oracle and every provider whose key is set in the environment.
func seedModels(ctx context.Context, store *models.Store) error {
	entries := []*models.LLMModel{{ModelName: "oracle", Name: "Oracle (replays the task's validation calls)", Provider: "proctor", Adapter: models.AdapterOracle}}
	if os.Getenv("OPENAI_API_KEY") != "" {
		entries = append(entries, &models.LLMModel{ModelName: "gpt-4.1-mini", Name: "GPT-4.1 mini", Provider: "openai", Adapter: models.AdapterOpenAI,
			APIKeyEnv: "OPENAI_API_KEY", BaseURL: os.Getenv("OPENAI_BASE_URL"), ContextWindow: 1047576})
	}
	if os.Getenv("ANTHROPIC_API_KEY") != "" {
		entries = append(entries, &models.LLMModel{ModelName: "claude-sonnet-4-5", Name: "Claude Sonnet 4.5", Provider: "anthropic", Adapter: models.AdapterAnthropic,
			APIKeyEnv: "ANTHROPIC_API_KEY", ContextWindow: 200000})
	}
	for _, m := range entries {
		if err := store.UpsertModel(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// seedExamples builds the example environments from this source tree into the data dir,
// registers each with a build that runs the binary (its scenarios discovered by running it), and
// uploads the demo taskset. Without a source tree or a Go toolchain it logs why and seeds nothing.
func seedExamples(ctx context.Context, store *models.Store, c *models.Caller, dataDir string, log *slog.Logger) error {
	root, err := sourceRoot()
	if err != nil {
		log.Warn("not seeding the example environments", "reason", err)
		return nil
	}
	for _, e := range exampleEnvs {
		bin := filepath.Join(dataDir, "envs", e.name)
		if err := goBuild(ctx, root, "./examples/environments/"+e.name, bin); err != nil {
			return err
		}
		scenarios, err := discoverScenarios(ctx, bin)
		if err != nil {
			return fmt.Errorf("discover the scenarios of %s: %w", e.name, err)
		}
		reg, err := store.CreateRegistry(ctx, c, models.NewRegistry{Name: e.name, Description: e.description, EntryFolder: "examples/environments/" + e.name})
		if errors.Is(err, models.ErrConflict) {
			continue
		}
		if err != nil {
			return err
		}
		if _, err := store.CreateBuild(ctx, reg.ID, models.NewBuild{
			Status: models.BuildSucceeded, ImageName: "process:" + bin, SetLatest: true, Scenarios: scenarios,
			Lock:          map[string]any{"transport": "stdio"},
			RuntimeConfig: models.BuildRuntime{Command: []string{bin}},
		}); err != nil {
			return err
		}
	}
	_, err = store.UploadTasks(ctx, c, models.Upload{TasksetName: "demo", Description: "Tasks over the example environments; `proctor eval demo --model oracle` earns 1.0 on each.", Tasks: demoTasks})
	return err
}

// sourceRoot finds the checkout this binary runs from (dev runs from source).
func sourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "examples", "environments", "todo", "main.go")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no Proctor source tree above the working directory")
		}
		dir = parent
	}
}

func goBuild(ctx context.Context, root, pkg, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building %s needs the Go toolchain: %w", pkg, err)
	}
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}

// discoverScenarios runs an environment once and reads its scenarios://list.
func discoverScenarios(ctx context.Context, bin string) ([]models.Scenario, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Wait()         //nolint:errcheck // it exits when its stdin closes
	defer cmd.Process.Kill() //nolint:errcheck
	env, err := agent.Connect(ctx, stdout, stdin, agent.ConnectOptions{ClientName: "proctor-discover"})
	if err != nil {
		return nil, err
	}
	defer env.Close()
	raw, err := env.ReadResource(ctx, "scenarios://list")
	if err != nil {
		return nil, err
	}
	var list struct {
		Scenarios []struct {
			Name            string         `json:"name"`
			Title           string         `json:"title"`
			Description     string         `json:"description"`
			ArgumentsSchema map[string]any `json:"arguments_schema"`
			Prompt          string         `json:"prompt"`
			Setup           map[string]any `json:"setup"`
			Evaluate        map[string]any `json:"evaluate"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("scenarios://list: %w", err)
	}
	var out []models.Scenario
	for _, sc := range list.Scenarios {
		var args []any
		if props, ok := sc.ArgumentsSchema["properties"].(map[string]any); ok {
			for name, p := range props {
				args = append(args, map[string]any{"name": name, "schema": p})
			}
		}
		setupDesc := ""
		if sc.Setup != nil {
			setupDesc = fmt.Sprintf("setup %v", sc.Setup["name"])
		}
		out = append(out, models.Scenario{Name: sc.Name, Description: sc.Description, SetupDescription: setupDesc, ArgsSchema: sc.ArgumentsSchema,
			Arguments: args, Metadata: map[string]any{"title": sc.Title, "prompt": sc.Prompt, "setup": sc.Setup, "evaluate": sc.Evaluate}})
	}
	return out, nil
}
