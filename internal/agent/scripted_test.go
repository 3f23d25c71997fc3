package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// reply is one scripted HTTP response.
type reply struct {
	status  int
	headers map[string]string
	body    string
}

// recorded is one request the scripted server received.
type recorded struct {
	method, path string
	header       http.Header
	body         map[string]any
}

// scriptedServer answers each request with the next scripted reply, on loopback, and records
// what it was sent. It stands in for an OpenAI-compatible or Anthropic API.
type scriptedServer struct {
	t       testing.TB
	srv     *httptest.Server
	mu      sync.Mutex
	replies []reply
	got     []recorded
}

func newScriptedServer(t testing.TB, replies ...reply) *scriptedServer {
	t.Helper()
	s := &scriptedServer{t: t, replies: replies}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedServer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		s.t.Errorf("request body is not a JSON object: %v: %s", err, raw)
	}
	s.mu.Lock()
	s.got = append(s.got, recorded{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: body})
	if len(s.replies) == 0 {
		s.mu.Unlock()
		s.t.Errorf("unexpected request %d to %s: the script is over", len(s.got), r.URL.Path)
		http.Error(w, `{"error":{"message":"script over"}}`, http.StatusInternalServerError)
		return
	}
	rep := s.replies[0]
	s.replies = s.replies[1:]
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	for k, v := range rep.headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// requests returns what the server received so far.
func (s *scriptedServer) requests() []recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]recorded(nil), s.got...)
}

// script replaces the replies still to come.
func (s *scriptedServer) script(replies ...reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = replies
	s.got = nil
}

// dig walks a decoded JSON value: string keys index objects, ints index arrays.
func dig(v any, keys ...any) any {
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k < 0 || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// todoTools is what the adapters are offered in their tests.
var todoTools = []Tool{{
	Name:        "add_todo",
	Description: "Add a todo to the list",
	InputSchema: map[string]any{
		"type":                 "object",
		"properties":           map[string]any{"title": map[string]any{"type": "string", "description": "what to do"}},
		"required":             []any{"title"},
		"additionalProperties": false,
	},
}}
