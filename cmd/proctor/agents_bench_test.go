package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/testenv"
)

// BenchmarkBroughtAgent is what running an agent through Proctor costs: the example Go agent
// (examples/agents/react) solving a task in 10 model steps, each answered by a scripted
// OpenAI-compatible server after 500 ms, run by the engine (launch → completed, one at a time:
// both sandboxes, the port, the gateway, every call recorded, evaluation) against the same
// agent binary pointed straight at the scripted server and at the todo environment's binary
// over streamable HTTP (with the scenario's setup and evaluation made by the benchmark). Goal
// engine/direct ≤ 1.05. Run:
//
//	go test -run '^$' -bench BroughtAgent -benchtime 1x ./cmd/proctor/
func BenchmarkBroughtAgent(b *testing.B) {
	const steps, runs = 10, 3
	titles, calls := todoSteps(steps)
	agentDir := filepath.Join(testenv.ModuleRoot(b), "examples", "agents", "react")
	agentBin := filepath.Join(b.TempDir(), "react")
	build := exec.Command("go", "build", "-o", agentBin, ".")
	build.Dir = agentDir
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the agent: %v\n%s", err, out)
	}
	envBin := testenv.Program(b, "examples/environments/todo")
	for b.Loop() {
		srv, _ := scriptedOpenAI(b, calls, 500*time.Millisecond)
		dataDir := b.TempDir()
		dev := startDev(b, dataDir)
		c := api{t: b, base: dev.info.APIURL, key: dev.info.APIKey, temporal: dev.info.TemporalAddress}
		model := addScriptedModel(b, c, dataDir, nil, "scripted", srv.URL)
		if out, err := c.cli("agent", "deploy", agentDir, "--name", "react"); err != nil {
			b.Fatalf("agent deploy: %v\n%s", err, out)
		}
		versions := uploadAddTodos(c, "agents", titles)
		var engine []float64
		for range runs {
			start := time.Now()
			var out struct {
				TraceID string `json:"trace_id"`
			}
			if code := c.call("POST", "/v2/rollouts/run", map[string]any{"task_version_id": versions[0], "model_id": model, "agent": "react"}, &out); code != 201 {
				b.Fatalf("launch: %d", code)
			}
			if tr := waitTrace(c, out.TraceID); tr.Status != "completed" || tr.Reward == nil || *tr.Reward != 1 {
				b.Fatalf("engine attempt: %+v", tr)
			}
			engine = append(engine, time.Since(start).Seconds())
		}
		dev.stop(b)

		var direct []float64
		for range runs {
			start := time.Now()
			if reward := directAgentAttempt(b, envBin, agentBin, titles, srv.URL+"/v1"); reward != 1 {
				b.Fatalf("direct attempt: reward %v", reward)
			}
			direct = append(direct, time.Since(start).Seconds())
		}
		b.ReportMetric(median(engine), "engine_s")
		b.ReportMetric(median(direct), "direct_s")
		b.ReportMetric(median(engine)/median(direct), "engine/direct")
	}
}

// directAgentAttempt runs one add-todos attempt without Proctor: the environment's binary serving
// streamable HTTP, the scenario's setup made through its dispatcher, the agent's binary run
// against it and the model's own URL, then the evaluation. It returns the reward.
func directAgentAttempt(b *testing.B, envBin, agentBin string, items []string, modelURL string) float64 {
	ctx := context.Background()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	env := exec.Command(envBin, "--transport", "http", "--port", fmt.Sprint(port))
	env.Dir = b.TempDir()
	if err := env.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { env.Process.Kill(); env.Wait() }() //nolint:errcheck // killed
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	// A client of its own: the default transport is the API checker's here, which reads whole
	// bodies, and an MCP session keeps a stream open.
	hc := &http.Client{Transport: &http.Transport{}}
	var session *mcp.ClientSession
	for deadline := time.Now().Add(10 * time.Second); ; {
		session, err = mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the environment does not serve %s: %v", url, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer session.Close()
	args, err := json.Marshal(items)
	if err != nil {
		b.Fatal(err)
	}
	prompt, err := session.GetPrompt(ctx, &mcp.GetPromptParams{Name: "add-todos", Arguments: map[string]string{"items": string(args)}})
	if err != nil {
		b.Fatal(err)
	}
	// hub makes the scenario's call under key through its dispatcher, and returns its result.
	hub := func(key string) *agent.ToolResult {
		call, _ := prompt.Meta[key].(map[string]any)
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: fmt.Sprint(call["tool"]), Arguments: map[string]any{"name": call["name"], "arguments": call["arguments"]}})
		if err != nil || res.IsError {
			b.Fatalf("%s: %v %+v", key, err, res)
		}
		out := &agent.ToolResult{}
		for _, c := range res.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				out.Text += t.Text
			}
		}
		out.Structured, _ = res.StructuredContent.(map[string]any)
		return out
	}
	var text string
	for _, m := range prompt.Messages {
		if t, ok := m.Content.(*mcp.TextContent); ok {
			text += t.Text
		}
	}
	hub(agent.MetaSetup)
	run := exec.Command(agentBin)
	run.Env = append(os.Environ(), "PROCTOR_PROMPT="+text, "PROCTOR_MODEL=scripted", "PROCTOR_MCP_URL="+url,
		"OPENAI_BASE_URL="+modelURL, "OPENAI_API_KEY=scripted-key")
	run.Stdout, run.Stderr = io.Discard, os.Stderr
	if err := run.Run(); err != nil {
		b.Fatalf("the agent: %v", err)
	}
	reward, _, _, reason := agent.ExtractReward(hub(agent.MetaEvaluate))
	if reason != "" {
		b.Fatalf("evaluate: %s", reason)
	}
	return reward
}
