package envserver

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// rawPost sends one JSON-RPC message to a streamable HTTP endpoint.
func rawPost(t *testing.T, url, session, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

const initializeRequest = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// The streamable HTTP transport's options: resumable streams by default (events carry ids),
// JSON answers, idle session timeouts, and a stateless mode whose initialize hook runs once
// before the first request.
func TestHTTPOptions(t *testing.T) {
	serve := func(o HTTPOptions, inits *atomic.Int64) string {
		s := New("opts", WithHTTPOptions(o), WithLogger(slog.New(slog.DiscardHandler)))
		s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
			inits.Add(1)
			return nil
		})
		MustAddTool(s, "ping", "Ping", func(ctx context.Context, _ struct{}) (map[string]string, error) {
			return map[string]string{"pong": "yes"}, nil
		})
		ts := httptest.NewServer(s.HTTPHandler())
		t.Cleanup(ts.Close)
		return ts.URL + HTTPPath
	}
	var inits atomic.Int64

	// Default: an SSE answer whose events carry ids a client can resume from.
	res, body := rawPost(t, serve(HTTPOptions{}, &inits), "", initializeRequest)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(body, "\nid: ") && !strings.HasPrefix(body, "id: ") {
		t.Errorf("default initialize answer (%s):\n%s", res.Header.Get("Content-Type"), body)
	}
	_, body = rawPost(t, serve(HTTPOptions{NoEventStore: true}, &inits), "", initializeRequest)
	if strings.Contains(body, "id: ") {
		t.Errorf("without an event store the events carry ids:\n%s", body)
	}

	// JSON answers.
	res, body = rawPost(t, serve(HTTPOptions{JSONResponse: true}, &inits), "", initializeRequest)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || !strings.Contains(body, `"serverInfo"`) {
		t.Errorf("JSON initialize answer (%s):\n%s", res.Header.Get("Content-Type"), body)
	}

	// An idle session is closed after the timeout.
	url := serve(HTTPOptions{SessionTimeout: 200 * time.Millisecond, JSONResponse: true}, &inits)
	res, _ = rawPost(t, url, "", initializeRequest)
	session := res.Header.Get("Mcp-Session-Id")
	rawPost(t, url, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if res, body := rawPost(t, url, session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); res.StatusCode != 200 || !strings.Contains(body, "ping") {
		t.Fatalf("tools/list in a live session = %d %s", res.StatusCode, body)
	}
	time.Sleep(600 * time.Millisecond)
	if res, body := rawPost(t, url, session, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); res.StatusCode != http.StatusNotFound {
		t.Errorf("tools/list in a timed-out session = %d %s", res.StatusCode, body)
	}

	// Stateless: no session, no initialize; the hook ran once before the first request.
	inits.Store(0)
	url = serve(HTTPOptions{Stateless: true, JSONResponse: true}, &inits)
	for i := range 3 {
		res, body := rawPost(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ping","arguments":{}}}`)
		if res.StatusCode != 200 || !strings.Contains(body, `pong`) || res.Header.Get("Mcp-Session-Id") != "" {
			t.Fatalf("stateless call %d = %d %s", i, res.StatusCode, body)
		}
	}
	if n := inits.Load(); n != 1 {
		t.Errorf("the initialize hook ran %d times in stateless mode, want once", n)
	}
}
