package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/testenv"
)

// TestContainerSandboxesRunTheDemo runs dev with the container provider against a real engine
// (podman's Docker Engine API service): the bundled examples are built, loaded into the engine
// and discovered in containers, the demo's attempts run in containers and reach 1.0, and no
// container is left once an attempt ends.
func TestContainerSandboxesRunTheDemo(t *testing.T) {
	t.Parallel()
	host := testenv.ContainerEngine(t)
	dataDir := t.TempDir()
	owner := "dev-" + filepath.Base(dataDir)
	start := time.Now()
	dev := startDev(t, dataDir, "--sandbox-provider", "container", "--container-host", host, "--container-owner", owner)
	t.Logf("dev with container sandboxes ready in %s", time.Since(start).Round(time.Millisecond))
	c := api{t: t, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
	oracle := c.resolve("/v2/models/resolve?model=oracle", "id")

	var launched struct {
		JobID string `json:"job_id"`
	}
	if code := c.call("POST", "/v2/rollouts/run_list", map[string]any{"taskset_id": c.tasksetID("demo"), "model_ids": []string{oracle},
		"group_size": 2, "max_concurrent": 3, "name": "demo in containers"}, &launched); code != 201 {
		t.Fatalf("run_list = %d", code)
	}
	sum := c.waitJob(launched.JobID, nil)
	if sum.Completed != 6 || sum.AvgReward == nil || *sum.AvgReward != 1 {
		for _, tr := range c.traces(launched.JobID) {
			t.Logf("trace %s (%s): %s reward %v %s", tr.ID, tr.Name, tr.Status, tr.Reward, tr.Error)
		}
		t.Fatalf("demo summary = %+v, want 6 completed at reward 1.0", sum)
	}

	engine, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	images, err := engine.ImageList(ctx, client.ImageListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, im := range images.Items {
		for _, tag := range im.RepoTags {
			if strings.HasPrefix(tag, "proctor.local/env:") {
				refs = append(refs, tag)
			}
		}
	}
	if len(refs) < 2 {
		t.Errorf("images loaded into the engine: %q, want the two examples' (by digest)", refs)
	}
	left, err := engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", container.LabelOwner+"="+owner)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d containers left after every attempt ended", len(left.Items))
	}
}

// TestABroughtAgentRunsInAContainer runs the example Go agent on a worker of the container
// provider: its container reaches its endpoints through proctor-relay (built static, as a
// release ships it beside proctor) and nothing else, solves the task to 1.0; an agent deployed
// to run inside writes the file the environment container's evaluation reads; and no container
// is left.
func TestABroughtAgentRunsInAContainer(t *testing.T) {
	t.Parallel()
	host := testenv.ContainerEngine(t)
	relay := testenv.StaticProgram(t, "cmd/proctor-relay")
	owner := "agent-" + filepath.Base(t.TempDir())
	d := startAgentDev(t, nil, "--sandbox-provider", "container", "--container-host", host, "--container-owner", owner, "--agent-relay", relay)
	if out, err := d.cli("agent", "deploy", filepath.Join(testenv.ModuleRoot(t), "examples", "agents", "react"), "--name", "react"); err != nil {
		t.Fatalf("agent deploy: %v\n%s", err, out)
	}
	tr, logs := d.runToEnd(map[string]any{"task_version_id": d.addTask("agents", "todo"), "model_id": d.modelID, "agent": "react"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(logs, "confined to its endpoints") {
		t.Fatalf("an agent in a container = %+v (model problems %v)\n%s%s", tr, d.model.problems, logs, d.agentOutput(tr.ID))
	}
	// An agent deployed to run inside works in the environment container's working directory.
	if out, err := d.cli("env", "deploy", outOfTreeModule(t, []byte(answerEnvironment)), "--name", "answer", "--agents-inside"); err != nil {
		t.Fatalf("env deploy: %v\n%s", err, out)
	}
	if out, err := d.cli("agent", "deploy", filepath.Join("testdata", "agents", "probe"), "--name", "probe-inside", "--inside"); err != nil {
		t.Fatalf("agent deploy --inside: %v\n%s", err, out)
	}
	var up struct {
		TaskVersionIDs []string `json:"task_version_ids"`
	}
	d.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "inside", "tasks": []any{map[string]any{"name": "answer", "env": "answer",
		"scenario": "answer", "args": map[string]any{"answer": "42"}, "agent_config": map[string]any{"probe": "inside", "answer": "42"}}}}, &up)
	tr, logs = d.runToEnd(map[string]any{"task_version_id": up.TaskVersionIDs[0], "model_id": d.modelID, "agent": "probe-inside"})
	if tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 || !strings.Contains(logs, "started inside the environment, in its working directory, from the environment's image") {
		t.Errorf("an agent inside an environment's container = %+v\n%s%s", tr, logs, d.agentOutput(tr.ID))
	}

	engine, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer engine.Close()
	left, err := engine.ContainerList(t.Context(), client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", container.LabelOwner+"="+owner)})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 0 {
		t.Errorf("%d containers left after the attempt ended", len(left.Items))
	}
}
