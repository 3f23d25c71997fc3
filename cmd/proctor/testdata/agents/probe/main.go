// Command probe is a brought agent for the tests: it does what an agent must not be able to do,
// or never stops, as its task's agent_config asks ({"probe": MODE, "addr": HOST:PORT}), and
// says what happened on its stdout (the trace's agent:stdout log).
//
//	escape  print its key, call the environment's evaluate dispatcher through MCP, then try to
//	        reach addr; exit 0
//	loop    ask the model again and again, whatever it answers, forever
//	hang    say so, then sleep forever
//	inside  (deployed to run inside the environment) write answer to answer.txt in its working
//	        directory, and say where that is
//	anthropic  solve an add-todos task through the Anthropic endpoint: ask the model, make the
//	        tool calls it asks for through MCP, send the results back, until it answers with text
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	var cfg struct{ Probe, Addr, Answer string }
	if err := json.Unmarshal([]byte(os.Getenv("PROCTOR_AGENT_CONFIG")), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "probe: PROCTOR_AGENT_CONFIG:", err)
		os.Exit(2)
	}
	switch cfg.Probe {
	case "escape":
		escape(cfg.Addr)
	case "loop":
		for i := 0; ; i++ {
			body, _ := json.Marshal(map[string]any{"model": os.Getenv("PROCTOR_MODEL"),
				"messages": []any{map[string]string{"role": "user", "content": os.Getenv("PROCTOR_PROMPT")}}})
			req, _ := http.NewRequest(http.MethodPost, os.Getenv("OPENAI_BASE_URL")+"/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+os.Getenv("OPENAI_API_KEY"))
			req.Header.Set("Content-Type", "application/json")
			if res, err := http.DefaultClient.Do(req); err != nil {
				fmt.Println("call", i, err)
			} else {
				res.Body.Close()
				fmt.Println("call", i, res.Status)
			}
		}
	case "inside":
		wd, err := os.Getwd()
		if err == nil {
			err = os.WriteFile("answer.txt", []byte(cfg.Answer+"\n"), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
		fmt.Printf("wrote answer.txt in %s (placement %s)\n", wd, os.Getenv("PROCTOR_PLACEMENT"))
	case "anthropic":
		if err := anthropic(); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(1)
		}
	case "hang":
		fmt.Println("hanging")
		time.Sleep(time.Hour)
	default:
		fmt.Fprintf(os.Stderr, "probe: no such probe %q\n", cfg.Probe)
		os.Exit(2)
	}
}

func escape(addr string) {
	fmt.Println("key", os.Getenv("PROCTOR_API_KEY"))
	ctx := context.Background()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("PROCTOR_MCP_URL")}, nil)
	if err != nil {
		fmt.Println("mcp:", err)
		os.Exit(1)
	}
	defer session.Close()
	for _, tool := range []string{"evaluate", "setup"} {
		res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
		switch {
		case err != nil:
			fmt.Printf("%s: refused: %v\n", tool, err)
		case res.IsError:
			fmt.Printf("%s: refused: %s\n", tool, text(res))
		default:
			fmt.Printf("%s: answered: %s\n", tool, text(res))
		}
	}
	if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err != nil {
		fmt.Printf("reach %s: failed: %v\n", addr, err)
	} else {
		c.Close()
		fmt.Printf("reach %s: reached\n", addr)
	}
}

func text(res *mcp.CallToolResult) string {
	var b bytes.Buffer
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// anthropic is a minimal agent over the Anthropic Messages API (raw HTTP, as any client sends it).
func anthropic() error {
	if api := os.Getenv("PROCTOR_MODEL_API"); api != "anthropic" {
		return fmt.Errorf("PROCTOR_MODEL_API is %q, want anthropic", api)
	}
	ctx := context.Background()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "probe", Version: "1"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: os.Getenv("PROCTOR_MCP_URL")}, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	var tools []map[string]any
	for t, err := range session.Tools(ctx, nil) {
		if err != nil {
			return err
		}
		tools = append(tools, map[string]any{"name": t.Name, "description": t.Description, "input_schema": t.InputSchema})
	}
	messages := []any{map[string]any{"role": "user", "content": os.Getenv("PROCTOR_PROMPT")}}
	for turn := 0; turn < 10; turn++ {
		body, _ := json.Marshal(map[string]any{"model": os.Getenv("PROCTOR_MODEL"), "max_tokens": 1024, "tools": tools, "messages": messages})
		req, _ := http.NewRequest(http.MethodPost, os.Getenv("ANTHROPIC_BASE_URL")+"/v1/messages", bytes.NewReader(body))
		req.Header.Set("x-api-key", os.Getenv("ANTHROPIC_API_KEY"))
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		var answer struct {
			Content []struct {
				Type  string         `json:"type"`
				Text  string         `json:"text"`
				ID    string         `json:"id"`
				Name  string         `json:"name"`
				Input map[string]any `json:"input"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		err = json.NewDecoder(res.Body).Decode(&answer)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			return fmt.Errorf("turn %d: %s %v", turn, res.Status, err)
		}
		messages = append(messages, map[string]any{"role": "assistant", "content": answer.Content})
		var results []any
		for _, c := range answer.Content {
			if c.Type != "tool_use" {
				continue
			}
			out, err := session.CallTool(ctx, &mcp.CallToolParams{Name: c.Name, Arguments: c.Input})
			if err != nil {
				return err
			}
			results = append(results, map[string]any{"type": "tool_result", "tool_use_id": c.ID, "content": text(out), "is_error": out.IsError})
		}
		if len(results) == 0 {
			fmt.Println("answered:", answer.StopReason)
			return nil
		}
		messages = append(messages, map[string]any{"role": "user", "content": results})
	}
	return fmt.Errorf("no answer after 10 turns")
}
