package envserver

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func devServer(t *testing.T) *Server {
	t.Helper()
	s := scenarioServer(t)
	MustAddTool(s, "add", "Add two numbers", add)
	if err := s.Resource("telemetry://live", "Live status", func(context.Context) (any, error) {
		return map[string]any{"status": "running"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

func getJSON(t *testing.T, url string, into any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(into); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestDevEndpoints(t *testing.T) {
	for _, transport := range []string{"http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			s := devServer(t)
			var initRuns atomic.Int32
			s.OnInitialize(func(context.Context, *InitContext) error { initRuns.Add(1); return nil })
			handler := s.HTTPHandler()
			if transport == "sse" {
				handler = s.SSEHandler()
			}
			ts := httptest.NewServer(handler)
			defer ts.Close()

			var ov Overview
			getJSON(t, ts.URL+"/proctor", &ov)
			if ov.Name != "env" || ov.Transport != transport || ov.Tools != 3 || ov.HiddenTools != 2 ||
				ov.Resources != 4 || ov.Prompts != 1 || ov.Scenarios != 1 || len(ov.Hubs) != 2 {
				t.Errorf("overview %+v, want 3 visible tools (add, setup, evaluate), 2 hidden, 4 resources, 1 prompt", ov)
			}
			var tools struct{ Tools []ToolInfo }
			getJSON(t, ts.URL+"/proctor/tools", &tools)
			byName := map[string]ToolInfo{}
			for _, ti := range tools.Tools {
				byName[ti.Hub+"/"+ti.Name] = ti
			}
			if add := byName["/add"]; add.Hidden || add.InputSchema == nil || add.OutputSchema == nil {
				t.Errorf("add listed as %+v, want visible with input and output schemas", add)
			}
			if clear := byName["setup/clear"]; !clear.Hidden || clear.InputSchema == nil {
				t.Errorf("setup/clear listed as %+v, want hidden with a schema", clear)
			}
			var res ResourcesInfo
			getJSON(t, ts.URL+"/proctor/resources", &res)
			uris := []string{}
			for _, r := range res.Resources {
				uris = append(uris, r.URI)
			}
			for _, want := range []string{"telemetry://live", ScenariosURI, "file:///setup/functions", "file:///evaluate/functions"} {
				if !strings.Contains(strings.Join(uris, " "), want) {
					t.Errorf("resources %v lack %s", uris, want)
				}
			}
			var prompts struct{ Prompts []*mcp.Prompt }
			getJSON(t, ts.URL+"/proctor/prompts", &prompts)
			if len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "add-todos" {
				t.Errorf("prompts %+v, want add-todos", prompts.Prompts)
			}
			if initRuns.Load() != 0 {
				t.Errorf("looking at the dev endpoints ran the initialize hook %d times", initRuns.Load())
			}
		})
	}
}

func TestSSETransportServesMCP(t *testing.T) {
	s := devServer(t)
	ts := httptest.NewServer(s.SSEHandler())
	defer ts.Close()
	cs, err := newClient(clientOptions{}).Connect(testContext(t), &mcp.SSEClientTransport{Endpoint: ts.URL + SSEPath}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if got := structured[sum](t, callTool(t, cs, "add", map[string]any{"a": 1, "b": 2})).Sum; got != 3 {
		t.Fatalf("sum over SSE = %d, want 3", got)
	}
}

func TestRunServesHTTPUntilCancelled(t *testing.T) {
	for _, opt := range []struct {
		name string
		run  func(ln net.Listener) RunOption
		path string
	}{
		{"http", func(net.Listener) RunOption { return HTTP("") }, HTTPPath},
		{"sse", func(net.Listener) RunOption { return SSE("") }, SSEPath},
	} {
		t.Run(opt.name, func(t *testing.T) {
			s := devServer(t)
			var shutdowns atomic.Int32
			s.OnShutdown(func(context.Context) error { shutdowns.Add(1); return nil })
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- s.Run(ctx, opt.run(ln), Listener(ln)) }()
			base := "http://" + ln.Addr().String()
			var transport mcp.Transport = &mcp.StreamableClientTransport{Endpoint: base + opt.path}
			if opt.name == "sse" {
				transport = &mcp.SSEClientTransport{Endpoint: base + opt.path}
			}
			cs, err := newClient(clientOptions{}).Connect(testContext(t), transport, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := structured[sum](t, callTool(t, cs, "add", map[string]any{"a": 20, "b": 22})).Sum; got != 42 {
				t.Fatalf("sum = %d", got)
			}
			cs.Close()
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run returned %v after cancel, want nil", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			if shutdowns.Load() != 0 {
				t.Fatal("a cancelled context ran the shutdown hook")
			}
		})
	}
}

func TestTransportFromFlags(t *testing.T) {
	tests := []struct {
		name, transport string
		want            string
		wantErr         bool
	}{
		{"default", "", "stdio", false},
		{"stdio", "stdio", "stdio", false},
		{"http", "http", "http", false},
		{"sse", "sse", "sse", false},
		{"unknown", "websocket", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt, err := Transport(tt.transport, 8765)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v", err)
			}
			if err != nil {
				return
			}
			var c runConfig
			opt(&c)
			if c.transport != tt.want || (tt.want != "stdio" && c.addr != ":8765") {
				t.Fatalf("config %+v, want %s on :8765", c, tt.want)
			}
		})
	}
}

func TestShutdownHook(t *testing.T) {
	t.Run("runs once however many paths fire", func(t *testing.T) {
		s := New("env", WithLogger(quietLogger()))
		var runs atomic.Int32
		s.OnShutdown(func(context.Context) error { runs.Add(1); time.Sleep(20 * time.Millisecond); return nil })
		done := make(chan struct{})
		for range 5 {
			go func() { _ = s.Shutdown(context.Background()); done <- struct{}{} }()
		}
		for range 5 {
			<-done
		}
		if runs.Load() != 1 {
			t.Fatalf("hook ran %d times, want 1", runs.Load())
		}
	})
	t.Run("state is per server", func(t *testing.T) {
		a, b := New("a", WithLogger(quietLogger())), New("b", WithLogger(quietLogger()))
		var ra, rb atomic.Int32
		a.OnShutdown(func(context.Context) error { ra.Add(1); return nil })
		b.OnShutdown(func(context.Context) error { rb.Add(1); return nil })
		_ = a.Shutdown(context.Background())
		if ra.Load() != 1 || rb.Load() != 0 {
			t.Fatalf("after shutting down a: a ran %d, b ran %d; want 1 and 0", ra.Load(), rb.Load())
		}
		_ = b.Shutdown(context.Background())
		if rb.Load() != 1 {
			t.Fatalf("b's hook ran %d times, want 1", rb.Load())
		}
	})
	t.Run("error is returned and logged, and stops Run cleanly", func(t *testing.T) {
		s := New("env", WithLogger(quietLogger()))
		s.OnShutdown(func(context.Context) error { return errors.New("flush failed") })
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run(context.Background(), HTTP(""), Listener(ln)) }()
		waitServing(t, "http://"+ln.Addr().String()+DevPath)
		if err := s.Shutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "flush failed") {
			t.Fatalf("Shutdown error = %v, want the hook's", err)
		}
		if err := <-done; err != nil {
			t.Fatalf("Run returned %v after shutdown, want nil", err)
		}
	})
	t.Run("panic is an error", func(t *testing.T) {
		s := New("env", WithLogger(quietLogger()))
		s.OnShutdown(func(context.Context) error { panic("oops") })
		if err := s.Shutdown(context.Background()); err == nil || !strings.Contains(err.Error(), "panic: oops") {
			t.Fatalf("Shutdown error = %v, want the panic", err)
		}
	})
}

func TestFrameworkFeaturesStayAvailable(t *testing.T) {
	s := New("env", WithLogger(quietLogger()))
	var seen []string
	s.MCP().AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			seen = append(seen, method)
			return next(ctx, method, req)
		}
	})
	s.MCP().AddPrompt(&mcp.Prompt{Name: "hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
	})
	s.MCP().AddResourceTemplate(&mcp.ResourceTemplate{Name: "todo", URITemplate: "todo://{id}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "todo " + req.Params.URI}}}, nil
		})
	cs := mustConnect(t, s)
	ctx := testContext(t)
	if p, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "hello"}); err != nil || p.Messages[0].Content.(*mcp.TextContent).Text != "hi" {
		t.Fatalf("prompt: %v %v", p, err)
	}
	r, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "todo://7"})
	if err != nil || r.Contents[0].Text != "todo todo://7" {
		t.Fatalf("resource template: %v %v", r, err)
	}
	if !strings.Contains(strings.Join(seen, " "), "initialize") || !strings.Contains(strings.Join(seen, " "), "resources/read") {
		t.Fatalf("middleware saw %v, want initialize and resources/read", seen)
	}
}

// waitServing polls url until the server answers, so that a test acts on a running server.
func waitServing(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never answered", url)
}
