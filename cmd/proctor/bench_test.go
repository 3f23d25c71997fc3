package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/sandbox"
)

const benchAttempts, benchConcurrency = 200, 8

// BenchmarkRollouts runs 200 attempts of the todo example by the oracle through the whole engine
// (API, store, Temporal, workers, sandboxes), 8 at once, and the same 200 attempts as direct
// function calls in the same sandboxes without Temporal or a database: the floor. Run:
//
//	go test -run '^$' -bench Rollouts -benchtime 1x ./cmd/proctor/
func BenchmarkRollouts(b *testing.B) {
	for b.Loop() {
		dataDir := b.TempDir()
		dev := startDev(b, dataDir)
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey}
		oracle := c.resolve("/v2/models/resolve?model=oracle", "id")
		var up struct {
			TaskVersionIDs []string `json:"task_version_ids"`
		}
		c.call("POST", "/v2/tasks/upload", map[string]any{"taskset_name": "bench", "tasks": []any{map[string]any{
			"name": "add", "env": "todo", "scenario": "add-todos", "args": map[string]any{"items": []string{"buy milk"}},
			"validation": []any{map[string]any{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}}}}}, &up)

		start := time.Now()
		var launched struct {
			JobID string `json:"job_id"`
		}
		c.call("POST", "/v2/rollouts/run_list", map[string]any{"task_version_ids": up.TaskVersionIDs, "model_ids": []string{oracle},
			"group_size": benchAttempts, "max_concurrent": benchConcurrency}, &launched)
		sum := c.waitJob(launched.JobID, nil)
		engine := time.Since(start)
		if sum.Completed != benchAttempts || *sum.AvgReward != 1 {
			b.Fatalf("engine: %+v", sum)
		}
		var lat []float64
		var page struct {
			Items []struct {
				ID        string    `json:"id"`
				CreatedAt time.Time `json:"created_at"`
			} `json:"items"`
		}
		c.call("GET", "/v2/jobs/"+launched.JobID+"/traces?limit=500", nil, &page)
		for _, tr := range page.Items {
			var ev struct {
				Events []struct {
					Kind      string    `json:"kind"`
					StartedAt time.Time `json:"started_at"`
				} `json:"events"`
			}
			c.call("GET", "/v2/trace/"+tr.ID+"/events", nil, &ev)
			for _, e := range ev.Events {
				if e.Kind == "user_message" { // written as the attempt turns running
					lat = append(lat, e.StartedAt.Sub(tr.CreatedAt).Seconds()*1000)
					break
				}
			}
		}
		sort.Float64s(lat)
		dev.stop(b)

		floor := directAttempts(b, filepath.Join(dataDir, "envs", "todo"))
		b.ReportMetric(engine.Seconds(), "engine_wall_s")
		b.ReportMetric(float64(benchAttempts)/engine.Seconds(), "engine_attempts/s")
		b.ReportMetric(lat[len(lat)/2], "launch_to_running_p50_ms")
		b.ReportMetric(lat[len(lat)*99/100], "launch_to_running_p99_ms")
		b.ReportMetric(floor.Seconds(), "floor_wall_s")
		b.ReportMetric(float64(benchAttempts)/floor.Seconds(), "floor_attempts/s")
		b.ReportMetric(engine.Seconds()/floor.Seconds(), "engine/floor")
	}
}

// directAttempts runs the attempts as function calls: a sandbox, an MCP session and
// agent.RunEpisode each, 8 at once.
func directAttempts(b *testing.B, bin string) time.Duration {
	sb, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Close(context.Background())
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < benchConcurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				ctx := context.Background()
				box, err := sb.Start(ctx, sandbox.Spec{ID: fmt.Sprint("direct-", i), Command: []string{bin}})
				if err != nil {
					b.Error(err)
					continue
				}
				env, err := agent.Connect(ctx, box.Stdout(), box.Stdin(), agent.ConnectOptions{})
				if err != nil {
					b.Error(err)
					box.Stop(ctx)
					continue
				}
				sc, _ := env.Scenario(ctx, "add-todos", map[string]any{"items": []any{"buy milk"}})
				calls, _ := agent.ParseValidation([]map[string]any{{"name": "add_todo", "arguments": map[string]any{"title": "buy milk"}}})
				res, err := agent.RunEpisode(ctx, env, agent.NewOracle(calls), agent.Episode{Prompt: sc.Prompt, Setup: sc.Setup, Evaluate: sc.Evaluate, MaxSteps: 30})
				if err != nil || res.Reward != 1 {
					b.Errorf("direct attempt: %v %+v", err, res)
				}
				env.Close()
				box.Stop(ctx)
			}
		}()
	}
	for i := 0; i < benchAttempts; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	if _, err := os.Stat(bin); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}
