package sandbox

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStartLatency measures, for the report rather than as a check, how long
// Start takes, how long until the environment's first output, until an MCP
// session is initialized, and how long Stop takes. Run with
// PROCTOR_SANDBOX_TIMINGS=1 go test -run StartLatency -v ./internal/sandbox/
func TestStartLatency(t *testing.T) {
	if os.Getenv("PROCTOR_SANDBOX_TIMINGS") == "" {
		t.Skip("set PROCTOR_SANDBOX_TIMINGS=1 to measure")
	}
	const n = 20
	todo := buildTodo(t)
	image := todoImageRoot(t)
	for _, iso := range bothIsolations {
		t.Run(iso, func(t *testing.T) {
			p := newProvider(t, iso)
			var start, firstByte, mcpReady, imageReady, stop []time.Duration
			for i := range n {
				begin := time.Now()
				sb, err := p.Start(t.Context(), Spec{ID: fmt.Sprint("echo", i), Command: []string{"sh", "-c", "echo ready; exec sleep 300"}})
				if err != nil {
					t.Fatal(err)
				}
				start = append(start, time.Since(begin))
				if _, err := readStdoutLines(sb.Stdout(), 1, 10*time.Second); err != nil {
					t.Fatal(err)
				}
				firstByte = append(firstByte, time.Since(begin))
				begin = time.Now()
				if err := sb.Stop(t.Context()); err != nil {
					t.Fatal(err)
				}
				stop = append(stop, time.Since(begin))

				begin = time.Now()
				sb, err = p.Start(t.Context(), Spec{ID: fmt.Sprint("todo", i), Command: []string{todo}})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				session, err := mcp.NewClient(&mcp.Implementation{Name: "timing", Version: "0"}, nil).
					Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				mcpReady = append(mcpReady, time.Since(begin))
				session.Close()
				sb.Stop(t.Context())

				// The same server from an image's root file system.
				begin = time.Now()
				sb, err = p.Start(t.Context(), Spec{ID: fmt.Sprint("image", i), Command: []string{"/app/env"}, RootFS: image})
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
				session, err = mcp.NewClient(&mcp.Implementation{Name: "timing", Version: "0"}, nil).
					Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				imageReady = append(imageReady, time.Since(begin))
				session.Close()
				sb.Stop(t.Context())
			}
			t.Logf("%s (n=%d, median / p90 / max): Start %s; first stdout line %s; MCP initialized (todo) %s; from an image's root %s; Stop (sleep, SIGTERM) %s",
				iso, n, stats(start), stats(firstByte), stats(mcpReady), stats(imageReady), stats(stop))
		})
	}
}

func stats(d []time.Duration) string {
	slices.Sort(d)
	r := func(x time.Duration) time.Duration { return x.Round(10 * time.Microsecond) }
	return fmt.Sprintf("%s / %s / %s", r(d[len(d)/2]), r(d[len(d)*9/10]), r(d[len(d)-1]))
}
