package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/proctorhq/proctor/examples/environments"
	"github.com/proctorhq/proctor/httpapi"
	"github.com/proctorhq/proctor/internal/blob"
	"github.com/proctorhq/proctor/models"
	"github.com/proctorhq/proctor/models/catalog"
	"github.com/proctorhq/proctor/models/llms"
	"github.com/proctorhq/proctor/models/registry"
	"github.com/proctorhq/proctor/models/rollouts"
)

// exampleEnvs are the example environments `proctor dev` deploys (of environments.All): those
// the demo taskset runs on.
var exampleEnvs = []string{"todo", "game2048"}

// demoTasks is the taskset `demo`: tasks over the example environments whose validation calls
// earn reward 1.0, so that `proctor eval demo --model oracle` runs a whole job offline.
var demoTasks = []catalog.TaskUpload{
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
	entries := []*models.LLMModel{{ModelName: rollouts.OracleModelName, Name: "Oracle (replays the task's validation calls)", Provider: "proctor", Adapter: models.AdapterOracle},
		{ModelName: rollouts.IdleModelName, Name: "Idle (makes no tool call: a task it passes needs no work)", Provider: "proctor", Adapter: models.AdapterIdle},
		{ModelName: rollouts.RandomModelName, Name: "Random (calls tools with random arguments: a task it passes rewards activity)", Provider: "proctor", Adapter: models.AdapterRandom},
		{ModelName: rollouts.TamperModelName, Name: "Tamper probe (calls the hidden setup and evaluate dispatchers, claims success through grader-writing tools)", Provider: "proctor", Adapter: models.AdapterTamper},
		{ModelName: rollouts.ReplayModelName, Name: "Replay (answers with a recorded attempt's answers: a replay check's regression replay)", Provider: "proctor", Adapter: models.AdapterReplay}}
	if os.Getenv("OPENAI_API_KEY") != "" {
		entries = append(entries, &models.LLMModel{ModelName: "gpt-4.1-mini", Name: "GPT-4.1 mini", Provider: "openai", Adapter: models.AdapterOpenAI,
			APIKeyEnv: "OPENAI_API_KEY", BaseURL: os.Getenv("OPENAI_BASE_URL"), ContextWindow: 1047576})
	}
	if os.Getenv("ANTHROPIC_API_KEY") != "" {
		entries = append(entries, &models.LLMModel{ModelName: "claude-sonnet-4-5", Name: "Claude Sonnet 4.5", Provider: "anthropic", Adapter: models.AdapterAnthropic,
			APIKeyEnv: "ANTHROPIC_API_KEY", ContextWindow: 200000})
	}
	for _, m := range entries {
		if err := llms.Of(store).UpsertModel(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// seedExamples deploys the example environments through the build pipeline, as any user's
// environment is deployed: each is packed, uploaded, built and discovered by the workers; then
// the demo taskset is uploaded. Environments that already have a build (a restart) are kept.
//
// From a checkout with the Go toolchain, an example is packed from the source tree (its package
// and envserver, within this module) and compiled. Elsewhere (a release binary run anywhere),
// the build packages proctor-examples beside this binary, or else this binary (see
// bundledServer), which serves the example as `… example-env NAME`, and the example's embedded
// source is uploaded for browsing.
//
// wait says whether to wait for the builds (this process builds them); otherwise they finish
// when a worker of the builds queue takes them. done says whether everything is seeded.
func seedExamples(ctx context.Context, store *models.Store, bucket blob.Bucket, builds httpapi.Builds, c *models.Caller, wait bool, log *slog.Logger) (done bool, err error) {
	root, err := sourceRoot()
	if err == nil {
		_, err = exec.LookPath("go")
	}
	bundled := err != nil
	if bundled {
		log.Info("deploying the bundled example environments", "reason", err)
	}
	var pending []uuid.UUID
	for _, name := range exampleEnvs {
		ex, ok := environments.Lookup(name)
		if !ok {
			return false, fmt.Errorf("no bundled example %q", name)
		}
		if reg, err := registry.Of(store).FindRegistry(ctx, c, ex.Name); err == nil && reg.LatestBuildID != nil {
			continue
		}
		var source []byte
		opts := models.BuildOptions{Source: "proctor dev"}
		if bundled {
			source, err = environments.SourceArchive(ex.Name)
			opts.Bundled = ex.Name
		} else {
			opts.EntryFolder = "examples/environments/" + ex.Name
			source, _, err = packSource(root, exampleFiles(opts.EntryFolder))
		}
		if err != nil {
			return false, err
		}
		up, err := registry.Of(store).CreateBuildUpload(ctx, c)
		if err != nil {
			return false, err
		}
		if err := bucket.Put(ctx, up.SourceKey, bytes.NewReader(source), "application/gzip"); err != nil {
			return false, err
		}
		b, _, err := registry.Of(store).TriggerBuild(ctx, c, registry.TriggerBuild{UploadID: up.ID, Name: ex.Name, Description: ex.Description, Options: opts})
		if err != nil {
			return false, err
		}
		if err := builds.StartBuild(ctx, b.ID); err != nil {
			return false, err
		}
		pending = append(pending, b.ID)
	}
	// Without a builds worker here, builds finish later: seeding is then not done, and the next
	// start checks again.
	built := wait || len(pending) == 0
	if !wait && len(pending) > 0 {
		log.Info("the example environments build when a worker of the builds queue runs", "builds", len(pending))
		pending = nil
	}
	for _, id := range pending {
		b, err := waitForBuild(ctx, store, id, 5*time.Minute)
		if err != nil {
			return false, err
		}
		if b.Status != registry.BuildSucceeded {
			return false, fmt.Errorf("build %s of an example environment %s: %s", b.ID, b.Status, b.ErrorMessage)
		}
		secs := 0.0
		if b.DurationSeconds != nil {
			secs = *b.DurationSeconds
		}
		log.Info("example environment deployed", "image", b.ImageName, "digest", b.Digest, "seconds", secs)
	}
	if _, err := catalog.Of(store).UploadTasks(ctx, c, catalog.Upload{TasksetName: "demo", Description: "Tasks over the example environments; `proctor eval demo --model oracle` earns 1.0 on each.", Tasks: demoTasks}); err != nil {
		return false, err
	}
	return built, nil
}

// exampleFiles keeps, of this source tree, what an example environment's build needs: the
// module files, envserver and the example's package (no tests).
func exampleFiles(entry string) func(rel string, isDir bool) bool {
	return func(rel string, isDir bool) bool {
		for _, keep := range []string{"envserver", entry} {
			if rel == keep || strings.HasPrefix(rel, keep+"/") || (isDir && strings.HasPrefix(keep, rel+"/")) {
				return isDir || !strings.HasSuffix(rel, "_test.go")
			}
		}
		return !isDir && (rel == "go.mod" || rel == "go.sum")
	}
}

// waitForBuild polls a build until it ends.
func waitForBuild(ctx context.Context, store *models.Store, id uuid.UUID, limit time.Duration) (*models.Build, error) {
	deadline := time.Now().Add(limit)
	for {
		b, err := registry.Of(store).BuildByID(ctx, id)
		if err != nil {
			return nil, err
		}
		if registry.BuildTerminal(b.Status) {
			return b, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("build %s did not end within %s", id, limit)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
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
