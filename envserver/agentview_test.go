package envserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A client that asks for the agent's view lists no setup or evaluate dispatcher but can still
// call them; other clients list them; over both transports.
func TestAgentViewHidesLifecycleTools(t *testing.T) {
	s := New("view")
	MustAddTool(s, "act", "What the agent does", func(ctx context.Context, _ struct{}) (map[string]bool, error) {
		return map[string]bool{"ok": true}, nil
	})
	setup, evaluate, other := NewHub(SetupHub), NewHub(EvaluateHub), NewHub("tools")
	for _, h := range []*Hub{setup, evaluate, other} {
		MustAddTool(h, "noop", "Nothing", func(ctx context.Context, _ struct{}) (map[string]bool, error) {
			return map[string]bool{"ok": true}, nil
		})
		if err := s.Mount(h); err != nil {
			t.Fatal(err)
		}
	}
	ts := serveHTTPTest(t, s)
	for transport, connect := range map[string]func(o clientOptions) (*mcp.ClientSession, error){
		"in-memory": func(o clientOptions) (*mcp.ClientSession, error) { return connectInMemory(t, s, o) },
		"http":      func(o clientOptions) (*mcp.ClientSession, error) { return connectHTTP(t, ts.URL, o) },
	} {
		t.Run(transport, func(t *testing.T) {
			agent, err := connect(clientOptions{initMeta: mcp.Meta{MetaAgentView: true}})
			if err != nil {
				t.Fatal(err)
			}
			tools := listToolNames(t, agent)
			if len(tools) != 2 || tools["act"] == nil || tools["tools"] == nil {
				t.Errorf("the agent's view = %v, want act and the tools hub only", keys(tools))
			}
			if res := callTool(t, agent, SetupHub, map[string]any{"name": "noop"}); res.IsError {
				t.Errorf("calling setup from the agent's view: %+v", res)
			}
			harness, err := connect(clientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if tools := listToolNames(t, harness); len(tools) != 4 {
				t.Errorf("the full view = %v, want all four", keys(tools))
			}
		})
	}
}
