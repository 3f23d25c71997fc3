package shell_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/proctorhq/proctor/envserver"
	"github.com/proctorhq/proctor/internal/harbor"
	"github.com/proctorhq/proctor/internal/harbor/shell"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/container"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// ms is the q-quantile (nearest rank) of d in milliseconds.
func ms(d []time.Duration, q float64) float64 {
	slices.Sort(d)
	return float64(d[min(len(d)-1, int(q*float64(len(d))))].Microseconds()) / 1000
}

// execTrue calls exec with `true` and fails b unless it ran.
func execTrue(b *testing.B, s *mcp.ClientSession) time.Duration {
	begin := time.Now()
	res, err := s.CallTool(b.Context(), &mcp.CallToolParams{Name: harbor.ExecTool, Arguments: map[string]any{"command": "true"}})
	took := time.Since(begin)
	if err != nil || res.IsError {
		b.Fatalf("exec true: %v %+v", err, res)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var r shell.ExecResult
	if json.Unmarshal(raw, &r); r.ExitCode != 0 {
		b.Fatalf("exec true = %+v", r)
	}
	return took
}

// execLoop runs exec of true for the benchmark's loop and reports its p50 and p99.
func execLoop(b *testing.B, s *mcp.ClientSession) {
	var d []time.Duration
	for b.Loop() {
		d = append(d, execTrue(b, s))
	}
	b.ReportMetric(ms(d, 0.5), "exec-ms")
	b.ReportMetric(ms(d, 0.99), "exec-p99-ms")
}

// BenchmarkExecRoundTrip is one exec of `true` from an MCP client to the shell server and back:
// in this process over HTTP (the floor), and proctor-shell in a sandbox over its stdio, as the
// platform drives it, on the process provider (bubblewrap, the image's root) and the container
// provider (podman). It reports the round trip's p50 and p99 (exec-ms, exec-p99-ms).
func BenchmarkExecRoundTrip(b *testing.B) {
	b.Run("in-process-http", func(b *testing.B) {
		srv, err := shell.New(slog.New(slog.NewTextHandler(io.Discard, nil)), shell.Config{WorkDir: b.TempDir()})
		if err != nil {
			b.Fatal(err)
		}
		ts := httptest.NewServer(srv.HTTPHandler())
		defer ts.Close()
		s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(b.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + envserver.HTTPPath}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		execLoop(b, s)
	})
	root := shellRoot(b)
	for _, pc := range shellProviders(b, root) {
		b.Run(pc.name, func(b *testing.B) {
			sb, s := startShell(b, pc.p, pc.spec, "exec")
			defer sb.Stop(context.Background())
			defer s.Close()
			execLoop(b, s)
		})
	}
}

// BenchmarkShellReady is a sandbox's start until its shell server has answered initialize and
// one exec (start → shell ready), per provider: ready-ms and ready-p99-ms.
func BenchmarkShellReady(b *testing.B) {
	root := shellRoot(b)
	for _, pc := range shellProviders(b, root) {
		b.Run(pc.name, func(b *testing.B) {
			var d []time.Duration
			for i := 0; b.Loop(); i++ {
				begin := time.Now()
				sb, s := startShell(b, pc.p, pc.spec, fmt.Sprint("ready-", i))
				execTrue(b, s)
				d = append(d, time.Since(begin))
				s.Close()
				sb.Stop(context.Background())
			}
			b.ReportMetric(ms(d, 0.5), "ready-ms")
			b.ReportMetric(ms(d, 0.99), "ready-p99-ms")
		})
	}
}

// BenchmarkVerifierOverhead is the verifier's own cost: /logs/verifier emptied, a one-file
// tests/ written to /tests, an empty test.sh (it writes only the reward) run, the reward read,
// in a container with a writable root as a Harbor task's (verify-ms, p50).
func BenchmarkVerifierOverhead(b *testing.B) {
	root := shellRoot(b)
	for _, pc := range shellProviders(b, root) {
		if !pc.spec.WritableRoot {
			continue // the verifier writes /tests and /logs: only where the root is writable
		}
		b.Run(pc.name, func(b *testing.B) {
			sb, s := startShell(b, pc.p, pc.spec, "verify")
			defer sb.Stop(context.Background())
			defer s.Close()
			args := harbor.Args{Instruction: "x", VerifierTimeoutSec: 60,
				Tests: harbor.Wire([]harbor.File{{Path: "test.sh", Content: []byte("echo 1 > /logs/verifier/reward.txt\n"), Mode: 0o755}})}
			var d []time.Duration
			for b.Loop() {
				begin := time.Now()
				res, err := s.CallTool(b.Context(), &mcp.CallToolParams{Name: envserver.EvaluateHub, Arguments: map[string]any{"name": harbor.VerifyFunc, "arguments": args}})
				if err != nil || res.IsError {
					b.Fatalf("verify: %v %+v", err, res)
				}
				d = append(d, time.Since(begin))
			}
			b.ReportMetric(ms(d, 0.5), "verify-ms")
		})
	}
}

// shellRoot is sandboxtest's image root with proctor-shell added as image.ShellInImage.
func shellRoot(b *testing.B) string {
	root := sandboxtest.Root(b)
	bin, err := os.ReadFile(testenv.StaticProgram(b, "cmd/proctor-shell"))
	if err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Join(root, filepath.Dir(image.ShellInImage)), 0o755)
	if err := os.WriteFile(filepath.Join(root, image.ShellInImage), bin, 0o755); err != nil {
		b.Fatal(err)
	}
	return root
}

type shellProvider struct {
	name string
	p    sandbox.Provider
	spec sandbox.Spec
}

// shellProviders are the providers the benchmarks run the shell on: the process provider under
// bubblewrap (the image's read-only root, and as root a writable root of the sandbox's own) and
// the container provider (writable root).
func shellProviders(b *testing.B, root string) []shellProvider {
	command := []string{image.ShellInImage, "--workdir", "/tmp"}
	p, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: b.TempDir(), Isolation: sandbox.IsolationBubblewrap})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.Close(context.Background()) })
	out := []shellProvider{{"process-bubblewrap", p, sandbox.Spec{Command: command, RootFS: root}}}
	if os.Geteuid() == 0 {
		// A Harbor task's sandbox: its own overlay of the image, root inside.
		out = append(out, shellProvider{"process-bubblewrap-writable", p, sandbox.Spec{Command: command, RootFS: root, WritableRoot: true}})
	}
	host := testenv.ContainerEngine(b)
	cp, err := container.New(b.Context(), container.Options{Host: host, Root: b.TempDir(), Owner: "bench-" + filepath.Base(b.TempDir()), MaxSandboxes: 4, StopGrace: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cp.Close(context.Background()) })
	var im sandboxtest.Images
	return append(out, shellProvider{"container-podman", cp, sandbox.Spec{Command: command, Image: im.Of(b, root), WritableRoot: true}})
}

// startShell starts the shell server in a sandbox of p and connects an MCP client to its stdio.
func startShell(b *testing.B, p sandbox.Provider, spec sandbox.Spec, id string) (sandbox.Sandbox, *mcp.ClientSession) {
	spec.ID = "shell-" + id
	sb, err := p.Start(b.Context(), spec)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.Context(), time.Minute)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, &mcp.IOTransport{Reader: sb.Stdout(), Writer: sb.Stdin()}, nil)
	if err != nil {
		sb.Stop(context.Background())
		b.Fatal(err)
	}
	return sb, s
}
