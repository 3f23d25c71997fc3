package agentport_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/internal/agent"
	"github.com/proctorhq/proctor/internal/agentport"
)

// recorder is a Handler that answers every tool call with its name and every model call with a
// fixed completion, and notes what it was handed.
type recorder struct {
	mu    sync.Mutex
	tools []string
	steps []int
	// stopAt, when positive, is the step the handler refuses with a Stop.
	stopAt int
}

// CallTool records the call, and refuses (as activities' recorder does) a tool the port does
// not offer.
func (r *recorder) CallTool(_ context.Context, name string, args map[string]any) (*agent.ToolResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if name != "add_todo" {
		r.tools = append(r.tools, "refused "+name)
		return &agent.ToolResult{IsError: true, Refused: true, Text: "unknown tool " + name}, nil
	}
	r.tools = append(r.tools, name)
	raw, _ := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "did " + name + " " + args["title"].(string)}}})
	return &agent.ToolResult{Text: "did " + name, Raw: raw}, nil
}

func (r *recorder) Model(_ context.Context, step int, protocol string, body map[string]json.RawMessage, _ http.Header, w http.ResponseWriter) error {
	r.mu.Lock()
	r.steps = append(r.steps, step)
	stop := r.stopAt > 0 && step >= r.stopAt
	r.mu.Unlock()
	if stop {
		return &agentport.Stop{Kind: "budget_exceeded", Message: "job j has spent $1 of its max_cost_usd $1"}
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
	return nil
}

func startPort(t *testing.T, maxSteps int) (*agentport.Port, string, *recorder) {
	t.Helper()
	rec := &recorder{}
	p, root, err := agentport.Start(agentport.Config{Models: []string{"m"}, MaxSteps: maxSteps, Handler: rec,
		Tools: []agent.Tool{{Name: "add_todo", Description: "adds", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, root, rec
}

func post(t *testing.T, url, key, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// An MCP client reaches the environment's tools at the port's URL, with nothing but the URL;
// a URL with another key is refused.
func TestAnMCPClientCallsTheToolsThroughThePort(t *testing.T) {
	p, root, rec := startPort(t, 10)
	ctx := t.Context()
	session, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.Env(root)["PROCTOR_MCP_URL"]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "add_todo" {
		t.Fatalf("tools = %+v, %v", tools, err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "add_todo", Arguments: map[string]any{"title": "milk"}})
	if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "did add_todo milk" {
		t.Fatalf("call = %+v, %v", res, err)
	}
	// The hidden dispatchers are no tools of the port: a call of one is refused as MCP refuses
	// an unknown tool, and handed to the handler, which records the refusal.
	if res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "evaluate", Arguments: map[string]any{"name": "x"}}); err == nil ||
		!strings.Contains(err.Error(), `unknown tool "evaluate"`) {
		t.Errorf("a call of evaluate = %+v, %v; want it refused as an unknown tool", res, err)
	}
	if want := []string{"add_todo", "refused evaluate"}; !slices.Equal(rec.tools, want) {
		t.Errorf("the handler saw %v, want %v", rec.tools, want)
	}
	if _, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: root + "/mcp/pa-someone-else"}, nil); err == nil {
		t.Error("an MCP endpoint with another key connected")
	}
}

// Model calls need the key, are numbered from 0, and the call past max_steps is refused and
// ends the run; once the port is closed its key reaches nothing.
func TestModelCallsAreNumberedBoundedAndDieWithThePort(t *testing.T) {
	p, root, rec := startPort(t, 2)
	url := p.Env(root)["OPENAI_BASE_URL"] + "/chat/completions"
	if code, _ := post(t, url, "pa-wrong", `{"model":"m"}`); code != 401 {
		t.Errorf("a wrong key = %d, want 401", code)
	}
	if code, body := post(t, url, p.Key(), `[1]`); code != 400 || !strings.Contains(body, "not a JSON object") {
		t.Errorf("a body that is no object = %d %s", code, body)
	}
	for i := range 2 {
		if code, body := post(t, url, p.Key(), `{"model":"m"}`); code != 200 {
			t.Fatalf("call %d = %d %s", i, code, body)
		}
	}
	select {
	case <-p.LimitReached():
		t.Fatal("the limit was reached by calls within it")
	default:
	}
	code, body := post(t, url, p.Key(), `{"model":"m"}`)
	if code != 400 || !strings.Contains(body, "max_steps 2") {
		t.Errorf("the call past max_steps = %d %s, want 400 saying so", code, body)
	}
	<-p.LimitReached()
	if p.Steps() != 2 || len(rec.steps) != 2 || rec.steps[0] != 0 || rec.steps[1] != 1 {
		t.Errorf("steps %d, handed %v; want 2, numbered 0 and 1", p.Steps(), rec.steps)
	}
	// The Anthropic SDK's x-api-key is a key too.
	req, _ := http.NewRequest(http.MethodGet, p.Env(root)["ANTHROPIC_BASE_URL"]+"/v1/models", nil)
	req.Header.Set("X-Api-Key", p.Key())
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 200 {
		t.Errorf("the Anthropic model list with x-api-key: %v %v", res, err)
	}
	p.Close()
	if code, _ := post(t, url, p.Key(), `{"model":"m"}`); code != 0 {
		t.Errorf("the key after its attempt reached the port (%d)", code)
	}
}

// A Handler's Stop answers the agent 402 (which the providers' SDKs do not retry) with its
// message, and ends the agent's run: Stopped closes, and Stop says why.
func TestAStopRefusesTheCallAndEndsTheRun(t *testing.T) {
	p, root, rec := startPort(t, 10)
	rec.stopAt = 1
	url := p.Env(root)["OPENAI_BASE_URL"] + "/chat/completions"
	if code, body := post(t, url, p.Key(), `{"model":"m"}`); code != 200 {
		t.Fatalf("the first call = %d %s", code, body)
	}
	if p.Stop() != nil {
		t.Fatal("stopped by a call that was answered")
	}
	code, body := post(t, url, p.Key(), `{"model":"m"}`)
	if code != http.StatusPaymentRequired || !strings.Contains(body, `"type":"budget_exceeded"`) || !strings.Contains(body, "max_cost_usd $1") {
		t.Errorf("the stopped call = %d %s, want 402 with the handler's kind and message", code, body)
	}
	<-p.Stopped()
	if s := p.Stop(); s == nil || s.Kind != "budget_exceeded" {
		t.Errorf("Stop() = %+v", s)
	}
	// Later calls are refused the same; the first Stop is the one kept.
	if code, _ := post(t, url, p.Key(), `{"model":"m"}`); code != http.StatusPaymentRequired {
		t.Errorf("a call after the stop = %d, want 402", code)
	}
}
