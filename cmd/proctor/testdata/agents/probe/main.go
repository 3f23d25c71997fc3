// Command probe is a brought agent for the tests: it does what an agent must not be able to do,
// or never stops, as its task's agent_config asks ({"probe": MODE, "addr": HOST:PORT}), and
// says what happened on its stdout (the trace's agent:stdout log).
//
//	escape  print its key, call the environment's evaluate dispatcher through MCP, then try to
//	        reach addr; exit 0
//	loop    ask the model again and again, whatever it answers, forever
//	hang    say so, then sleep forever
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
	var cfg struct{ Probe, Addr string }
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
