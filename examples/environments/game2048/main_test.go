package main

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/proctorhq/proctor/examples/environments/internal/envtest"
)

// validation is the documented sequence of visible calls that reaches a 16 from seed 1.
var validation = []envtest.Step{
	{Tool: "move", Arguments: map[string]any{"direction": "down"}},
	{Tool: "move", Arguments: map[string]any{"direction": "left"}},
	{Tool: "move", Arguments: map[string]any{"direction": "up"}},
	{Tool: "move", Arguments: map[string]any{"direction": "up"}},
	{Tool: "move", Arguments: map[string]any{"direction": "left"}},
	{Tool: "move", Arguments: map[string]any{"direction": "left"}},
}

var reach16 = map[string]any{"target": 16, "seed": 1}

func TestEpisodesOverRealTransports(t *testing.T) {
	bin := envtest.Build(t)
	transports := []struct {
		name    string
		connect func(t *testing.T) *mcp.ClientSession
	}{
		{"go client over stdio", func(t *testing.T) *mcp.ClientSession {
			cs, _ := envtest.ConnectStdio(t, bin)
			return cs
		}},
		{"go client over streamable HTTP", func(t *testing.T) *mcp.ClientSession {
			url, _ := envtest.StartHTTP(t, bin, "http")
			return envtest.ConnectHTTP(t, url)
		}},
		{"go client over SSE", func(t *testing.T) *mcp.ClientSession {
			url, _ := envtest.StartHTTP(t, bin, "sse")
			return envtest.ConnectSSE(t, url)
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			cs := tr.connect(t)
			full := envtest.RunEpisode(t, cs, "reach-tile", reach16, validation)
			if full.Reward != 1 || !full.Done {
				t.Fatalf("validation sequence: %+v, want reward 1 and done", full)
			}
			// Setup deals the same board again; stopping early earns less.
			part := envtest.RunEpisode(t, cs, "reach-tile", reach16, validation[:2])
			if part.Reward >= 1 || part.Reward <= 0 || part.Done {
				t.Fatalf("two moves: %+v, want a partial reward, not done", part)
			}
			if want := math.Log2(float64(int(part.Info["max_tile"].(float64)))) / 4; part.Reward != want {
				t.Fatalf("reward %v, want log2(max)/log2(16) = %v", part.Reward, want)
			}
		})
	}
}

func TestBadSetupArgumentsAreToolErrors(t *testing.T) {
	cs, _ := envtest.ConnectStdio(t, envtest.Build(t))
	for _, args := range []map[string]any{{"target": 12, "seed": 1}, {"target": 16}, {"target": 16, "seed": -1}} {
		res, err := cs.CallTool(envtest.Context(t), &mcp.CallToolParams{Name: "setup", Arguments: map[string]any{"name": "new_game", "arguments": args}})
		if err != nil || !res.IsError {
			t.Errorf("new_game %v: err=%v result=%+v, want a tool error", args, err, res)
		}
	}
}

func TestDevEndpointsOfTheBuiltBinary(t *testing.T) {
	url, _ := envtest.StartHTTP(t, envtest.Build(t), "http")
	base := strings.TrimSuffix(url, "/mcp")
	resp, err := http.Get(base + "/proctor/tools")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Tools []struct {
			Name   string `json:"name"`
			Hidden bool   `json:"hidden"`
			Hub    string `json:"hub"`
		} `json:"tools"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, tool := range body.Tools {
		got[tool.Hub+"/"+tool.Name] = tool.Hidden
	}
	want := map[string]bool{"/move": false, "/board": false, "/setup": false, "/evaluate": false, "setup/new_game": true, "evaluate/reached_tile": true}
	for name, hidden := range want {
		if h, ok := got[name]; !ok || h != hidden {
			t.Errorf("tool %s: listed=%v hidden=%v, want hidden=%v (all: %v)", name, ok, h, hidden, got)
		}
	}
}

func TestTypeScriptClient(t *testing.T) {
	bin := envtest.Build(t)
	calls := []envtest.TSCall{{Name: "setup", Arguments: map[string]any{"name": "new_game", "arguments": reach16}}}
	for _, s := range validation {
		calls = append(calls, envtest.TSCall{Name: s.Tool, Arguments: s.Arguments})
	}
	calls = append(calls, envtest.TSCall{Name: "evaluate", Arguments: map[string]any{"name": "reached_tile", "arguments": reach16}})
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			plan := envtest.TSPlan{Calls: calls, Resources: []string{"scenarios://list", "telemetry://live"},
				Prompts: []envtest.TSPrompt{{Name: "reach-tile", Arguments: map[string]string{"target": "16", "seed": "1"}}}}
			if transport == "stdio" {
				plan.Stdio = &envtest.TSStdio{Command: bin}
			} else {
				plan.HTTP, _ = envtest.StartHTTP(t, bin, "http")
			}
			res := envtest.RunTSClient(t, plan)
			if res.ServerInfo.Name != "game2048" || len(res.Tools) != 4 {
				t.Errorf("server %+v with %d tools, want game2048 with move, board, setup, evaluate", res.ServerInfo, len(res.Tools))
			}
			eval := res.Calls[len(res.Calls)-1].StructuredContent
			if eval["reward"] != 1.0 || eval["done"] != true {
				t.Errorf("evaluation %v, want reward 1 and done", eval)
			}
			if live, _ := res.Resources["telemetry://live"].(map[string]any); live["max_tile"] != 16.0 {
				t.Errorf("telemetry %v, want max_tile 16", live)
			}
			if len(res.Prompts) != 1 || !strings.Contains(res.Prompts[0].Messages[0].Content.Text, "holds a 16 tile") {
				t.Errorf("prompt %+v, want the rendered reach-tile prompt", res.Prompts)
			}
			if setup, _ := res.Prompts[0].Meta["proctor/setup"].(map[string]any); setup["name"] != "new_game" {
				t.Errorf("prompt _meta %v, want the resolved setup call", res.Prompts[0].Meta)
			}
		})
	}
}
