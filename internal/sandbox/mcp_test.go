package sandbox

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/testenv"
)

// buildTodo is the todo example environment, built once per test binary.
func buildTodo(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds an example environment")
	}
	return testenv.Program(t, "examples/environments/todo")
}

func TestARealMCPServerServesFromTheSandbox(t *testing.T) {
	todo := buildTodo(t)
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			sb := start(t, p, Spec{
				Command: []string{todo, "--transport", "stdio"},
				// Enough for a Go runtime under RLIMIT_DATA; exercises the limit
				// path with a real server.
				Resources: Resources{MemoryMB: 256},
			})
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "sandbox-test", Version: "0"}, nil)
			session, err := client.Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
			if err != nil {
				t.Fatalf("connect: %v (stderr %q)", err, sb.logs.Tail(5))
			}
			defer session.Close()
			res, err := session.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			var names []string
			for _, tool := range res.Tools {
				names = append(names, tool.Name)
			}
			for _, want := range []string{"add_todo", "list_todos", "complete_todo", "delete_todo"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list = %q, want %q among them", names, want)
				}
			}
			if len(sb.Logs()) == 0 {
				t.Error("the server's stderr log (its startup line) is not in Logs()")
			}
			// The server handles SIGTERM itself: Stop is quick and graceful.
			begin := time.Now()
			if err := sb.Stop(t.Context()); err != nil {
				t.Fatalf("Stop: %v", err)
			}
			if took := time.Since(begin); took > time.Second {
				t.Errorf("Stop of a server that handles SIGTERM took %s, want well under the grace", took)
			}
		})
	}
}
