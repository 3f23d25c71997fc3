package envserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer is a bytes.Buffer that is safe to write from other goroutines (a child's stderr, a
// server's logger) while the test reads it. (The platform's testenv has one too; this module
// imports nothing of the platform's, tests included.)
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is everything written so far.
func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// quietLogger keeps expected failures out of test output.
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// clientOptions configures the test client: an optional _meta for initialize, and a sink for
// the progress notifications it receives.
type clientOptions struct {
	initMeta mcp.Meta
	progress *progressLog
	logs     *logLog
}

type progressLog struct {
	mu     sync.Mutex
	events []*mcp.ProgressNotificationParams
}

func (p *progressLog) add(n *mcp.ProgressNotificationParams) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, n)
}

func (p *progressLog) all() []*mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*mcp.ProgressNotificationParams(nil), p.events...)
}

// newClient builds a go-sdk client that, when asked, puts initMeta into the initialize
// request's _meta (the SDK's Connect has no parameter for it).
func newClient(o clientOptions) *mcp.Client {
	var copts mcp.ClientOptions
	if o.progress != nil {
		copts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			o.progress.add(req.Params)
		}
	}
	if o.logs != nil {
		copts.LoggingMessageHandler = func(_ context.Context, req *mcp.LoggingMessageRequest) {
			o.logs.add(req.Params)
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "envserver-test", Version: "1"}, &copts)
	if o.initMeta != nil {
		c.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if p, ok := req.GetParams().(*mcp.InitializeParams); ok && method == "initialize" {
					p.Meta = o.initMeta
				}
				return next(ctx, method, req)
			}
		})
	}
	return c
}

// connectInMemory connects a go-sdk client to s over in-memory pipes.
func connectInMemory(t testing.TB, s *Server, o clientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	ctx := testContext(t)
	clientT, serverT := mcp.NewInMemoryTransports()
	ss, err := s.MCP().Connect(ctx, serverT, nil)
	if err != nil {
		t.Fatalf("server connect: %v", err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := newClient(o).Connect(ctx, clientT, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

func mustConnect(t testing.TB, s *Server) *mcp.ClientSession {
	t.Helper()
	cs, err := connectInMemory(t, s, clientOptions{})
	if err != nil {
		t.Fatalf("client connect: %v", err)
	}
	return cs
}

// connectHTTP connects a go-sdk client to s over streamable HTTP served by httptest.
func connectHTTP(t testing.TB, url string, o clientOptions) (*mcp.ClientSession, error) {
	t.Helper()
	cs, err := newClient(o).Connect(testContext(t), &mcp.StreamableClientTransport{Endpoint: url + HTTPPath}, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

func serveHTTPTest(t testing.TB, s *Server) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(s.HTTPHandler())
	t.Cleanup(ts.Close)
	return ts
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(testContext(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

func structured[T any](t testing.TB, res *mcp.CallToolResult) T {
	t.Helper()
	var v T
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatalf("marshal structured content: %v", err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
	return v
}

func readResource(t testing.TB, cs *mcp.ClientSession, uri string, into any) {
	t.Helper()
	res, err := cs.ReadResource(testContext(t), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	if len(res.Contents) != 1 {
		t.Fatalf("read %s: %d contents, want 1", uri, len(res.Contents))
	}
	if err := json.Unmarshal([]byte(res.Contents[0].Text), into); err != nil {
		t.Fatalf("read %s: %v in %s", uri, err, res.Contents[0].Text)
	}
}

func listToolNames(t testing.TB, cs *mcp.ClientSession) map[string]*mcp.Tool {
	t.Helper()
	res, err := cs.ListTools(testContext(t), nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	m := map[string]*mcp.Tool{}
	for _, tool := range res.Tools {
		m[tool.Name] = tool
	}
	return m
}
