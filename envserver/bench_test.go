package envserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoArgs struct {
	Word string `json:"word"`
}

type echoed struct {
	Word string `json:"word"`
}

func echo(ctx context.Context, in echoArgs) (echoed, error) { return echoed(in), nil }

// benchServers are the two servers compared: envserver, and a bare go-sdk server with the same
// trivial tool. The ratio of their numbers is envserver's overhead.
func benchServers() map[string]benchServer {
	env := New("bench", WithLogger(quietLogger()))
	MustAddTool(env, "echo", "Echo a word", echo)
	bare := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	mcp.AddTool(bare, &mcp.Tool{Name: "echo", Description: "Echo a word"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoed, error) {
			return nil, echoed(in), nil
		})
	return map[string]benchServer{
		"envserver":   {mcp: env.MCP(), http: env.HTTPHandler(), path: HTTPPath},
		"bare-go-sdk": {mcp: bare, http: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return bare }, nil), path: "/"},
	}
}

// benchServer is a server under benchmark: its MCP server for stdio, and what it serves over
// HTTP (envserver's own handler, with its routing, for envserver).
type benchServer struct {
	mcp  *mcp.Server
	http http.Handler
	path string
}

// BenchmarkToolCall measures sequential tools/call round trips of one client: calls per second
// and p50/p99 latency, over stdio (newline-delimited JSON through real OS pipes, in-process:
// the code path of a spawned server without the process start) and over streamable HTTP
// (httptest server on loopback).
func BenchmarkToolCall(b *testing.B) {
	for _, transport := range []string{"stdio", "http"} {
		for _, name := range []string{"envserver", "bare-go-sdk"} {
			b.Run(transport+"/"+name, func(b *testing.B) {
				cs := benchConnect(b, transport, benchServers()[name])
				benchCalls(b, cs)
			})
		}
	}
}

func benchConnect(b *testing.B, transport string, srv benchServer) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	var ct mcp.Transport
	switch transport {
	case "stdio":
		c2sR, c2sW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		s2cR, s2cW, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		ss, err := srv.mcp.Connect(ctx, &mcp.IOTransport{Reader: c2sR, Writer: s2cW}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = ss.Close() })
		ct = &mcp.IOTransport{Reader: s2cR, Writer: c2sW}
	case "http":
		ts := httptest.NewServer(srv.http)
		b.Cleanup(ts.Close)
		ct = &mcp.StreamableClientTransport{Endpoint: ts.URL + srv.path}
	}
	cs, err := client.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

func benchCalls(b *testing.B, cs *mcp.ClientSession) {
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"word": "ping"}}
	for range 50 { // warm up connections and caches
		if _, err := cs.CallTool(ctx, params); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		lat = append(lat, time.Since(t0))
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds())
	}
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "calls/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}
