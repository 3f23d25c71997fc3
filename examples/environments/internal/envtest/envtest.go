// Package envtest drives the example environments with real clients over real transports, for
// their tests: it builds an environment binary, connects the MCP Go SDK client to it over stdio,
// streamable HTTP or SSE, and runs the official TypeScript SDK client (installed from npm at a
// pinned version) against it. It may import envserver, the MCP SDK, internal/testenv and the
// standard library; nothing in it is used outside tests.
package envtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/proctorhq/proctor/envserver"
)

// Context returns a context that ends with the test (or after a minute).
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// RepoRoot returns the directory holding go.mod, found by walking up from the working
// directory (a package directory under `go test`).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Build compiles the main package in the working directory (the example under test) and
// returns the binary's path.
func Build(t testing.TB) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool not found: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "env")
	cmd := exec.Command(goBin, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SyncBuffer collects a child's stderr while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ConnectStdio spawns bin (stdio transport) and connects the Go SDK client to it. The session
// and the process end with the test.
func ConnectStdio(t testing.TB, bin string, args ...string) (*mcp.ClientSession, *SyncBuffer) {
	t.Helper()
	stderr := &SyncBuffer{}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = stderr
	client := mcp.NewClient(&mcp.Implementation{Name: "proctor-go-client", Version: "1"}, nil)
	cs, err := client.Connect(Context(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr:\n%s", err, stderr)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, stderr
}

var urlRE = regexp.MustCompile(`url=(http://\S+)`)

// StartHTTP spawns bin with --transport <transport> --port 0 and returns the URL of its MCP
// endpoint, read from its log. The process gets SIGTERM when the test ends.
func StartHTTP(t testing.TB, bin, transport string) (string, *SyncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, "--transport", transport, "--port", "0")
	stderr := &SyncBuffer{}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		pr.Close()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			line := sc.Text()
			_, _ = stderr.Write([]byte(line + "\n"))
			if m := urlRE.FindStringSubmatch(line); m != nil {
				select {
				case found <- strings.Trim(m[1], `"`):
				default:
				}
			}
		}
	}()
	select {
	case url := <-found:
		return url, stderr
	case <-exited:
		t.Fatalf("%s exited before serving:\n%s", bin, stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not log its URL:\n%s", bin, stderr)
	}
	return "", nil
}

// ConnectHTTP connects the Go SDK client to a streamable HTTP endpoint.
func ConnectHTTP(t testing.TB, url string) *mcp.ClientSession {
	t.Helper()
	return connect(t, &mcp.StreamableClientTransport{Endpoint: url}, "HTTP")
}

// ConnectSSE connects the Go SDK client to an SSE endpoint.
func ConnectSSE(t testing.TB, url string) *mcp.ClientSession {
	t.Helper()
	return connect(t, &mcp.SSEClientTransport{Endpoint: url}, "SSE")
}

// connect connects the Go SDK client over transport; the session ends with the test.
func connect(t testing.TB, transport mcp.Transport, over string) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "proctor-go-client", Version: "1"}, nil)
	cs, err := client.Connect(Context(t), transport, nil)
	if err != nil {
		t.Fatalf("connect over %s: %v", over, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// Call calls a tool and fails the test on a protocol error or a tool error.
func Call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(Context(t), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s %v: %v", name, args, err)
	}
	if res.IsError {
		t.Fatalf("call %s %v: tool error %s", name, args, Text(res))
	}
	return res
}

// Text returns the first text content of a result.
func Text(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

// Decode re-decodes a value (structured content, resource JSON) into T.
func Decode[T any](t testing.TB, v any) T {
	t.Helper()
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

// ReadJSON reads a JSON resource.
func ReadJSON[T any](t testing.TB, cs *mcp.ClientSession, uri string) T {
	t.Helper()
	res, err := cs.ReadResource(Context(t), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	var v T
	if err := json.Unmarshal([]byte(res.Contents[0].Text), &v); err != nil {
		t.Fatalf("read %s: %v", uri, err)
	}
	return v
}

// Step is a visible tool call of an episode.
type Step struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
}

// RunEpisode plays a scenario the way the platform does: it looks the scenario up in
// scenarios://list, makes its setup call with args, makes the visible calls, makes its
// evaluate call and returns the evaluation result.
func RunEpisode(t testing.TB, cs *mcp.ClientSession, scenario string, args map[string]any, steps []Step) envserver.EvaluationResult {
	t.Helper()
	list := ReadJSON[envserver.ScenarioList](t, cs, envserver.ScenariosURI)
	var sc *envserver.ScenarioInfo
	for i := range list.Scenarios {
		if list.Scenarios[i].Name == scenario {
			sc = &list.Scenarios[i]
		}
	}
	if sc == nil || sc.Setup == nil || sc.Evaluate == nil {
		t.Fatalf("scenario %s with setup and evaluate not in %+v", scenario, list)
	}
	hubCall := func(c *envserver.Call) *mcp.CallToolResult {
		callArgs := c.Arguments
		if callArgs == nil {
			callArgs = args
		}
		return Call(t, cs, c.Tool, map[string]any{"name": c.Name, "arguments": callArgs})
	}
	hubCall(sc.Setup)
	for _, s := range steps {
		Call(t, cs, s.Tool, s.Arguments)
	}
	return Decode[envserver.EvaluationResult](t, hubCall(sc.Evaluate).StructuredContent)
}
