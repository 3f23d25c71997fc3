package envserver

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// helperEnv names the helper a re-executed test binary runs instead of the tests: the tests
// below need a real process (its own fd 1, real signals).
const helperEnv = "ENVSERVER_TEST_HELPER"

func TestMain(m *testing.M) {
	if name := os.Getenv(helperEnv); name != "" {
		os.Exit(runHelper(name))
	}
	os.Exit(m.Run())
}

// runHelper serves an environment over stdio whose initialize hook prints to stdout in every
// way it can, and whose shutdown hook reports itself on stderr.
func runHelper(name string) int {
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	s := New("helper", WithLogger(logger))
	s.OnInitialize(func(ctx context.Context, ic *InitContext) error {
		fmt.Println("hook: fmt.Println to stdout")
		_, _ = os.Stdout.WriteString("hook: os.Stdout.WriteString\n")
		cmd := exec.Command("sh", "-c", "echo 'child: echo to inherited fd 1'")
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("child: %w", err)
		}
		return ic.Progress(ctx, 50, 100, "halfway")
	})
	s.OnShutdown(func(ctx context.Context) error {
		fmt.Fprintln(os.Stderr, "SHUTDOWN HOOK RAN")
		time.Sleep(300 * time.Millisecond) // long enough for other shutdown paths to fire meanwhile
		return nil
	})
	MustAddTool(s, "echo", "Echo a word", func(ctx context.Context, in struct {
		Word string `json:"word"`
	}) (map[string]string, error) {
		// A careless tool: prints to stdout, once without a newline, and runs a child that
		// inherits fd 1. None of it may reach the MCP stream.
		fmt.Print("tool: fmt.Print without a newline")
		fmt.Println("tool: fmt.Println", in.Word)
		cmd := exec.Command("sh", "-c", "echo 'tool child: echo to inherited fd 1'")
		cmd.Stdout = os.Stdout
		if err := cmd.Run(); err != nil {
			return nil, err
		}
		return map[string]string{"word": in.Word}, nil
	})
	ctx := context.Background()
	switch name {
	case "sigint-cancels":
		// What a hot-reloading main does: SIGINT cancels the context.
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
	case "own-sigterm-handler":
		// A second shutdown path: the program's own SIGTERM handler also calls Shutdown.
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		go func() {
			<-sig
			_ = s.Shutdown(context.Background())
		}()
	}
	err := s.Run(ctx)
	fmt.Fprintf(os.Stderr, "RUN RETURNED %v\n", err)
	return 0
}

// waitFor waits until b holds s.
func waitFor(t *testing.T, b *syncBuffer, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(b.String(), s) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never showed %q:\n%s", s, b.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func helperCommand(t *testing.T, name string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("needs fd 1 swapping and SIGTERM")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+name)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	return cmd, stderr
}

func TestStdoutGoesToStderrNotTheStdioStream(t *testing.T) {
	cmd, stderr := helperCommand(t, "plain")
	log := &progressLog{}
	client := newClient(clientOptions{initMeta: mcp.Meta{"progressToken": "p1"}, progress: log})
	cs, err := client.Connect(testContext(t), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect over stdio: %v\nstderr:\n%s", err, stderr.String())
	}
	// 100 calls in a row: a print without a newline would otherwise swallow the next answer.
	for i := range 100 {
		word := fmt.Sprintf("word-%d", i)
		res := callTool(t, cs, "echo", map[string]any{"word": word})
		if got := structured[map[string]string](t, res)["word"]; got != word {
			t.Fatalf("echo = %q after the hook and the tool printed to stdout", got)
		}
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	for _, want := range []string{"hook: fmt.Println to stdout", "hook: os.Stdout.WriteString", "child: echo to inherited fd 1",
		"tool: fmt.Print without a newline", "tool: fmt.Println word-99", "tool child: echo to inherited fd 1"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if got := log.all(); len(got) != 1 || got[0].Message != "halfway" || got[0].ProgressToken != "p1" {
		t.Errorf("progress over stdio %+v, want one 'halfway' with token p1", got)
	}
}

func TestShutdownHookRunsOnSIGTERMOnly(t *testing.T) {
	tests := []struct {
		name      string
		helper    string
		signals   []os.Signal
		wantHooks int
		wantExit  string // "clean" (exit 0 after Run returned) or "killed"
	}{
		{"SIGTERM runs the hook", "plain", []os.Signal{syscall.SIGTERM}, 1, "clean"},
		{"two SIGTERMs and the program's own handler run it once", "own-sigterm-handler", []os.Signal{syscall.SIGTERM, syscall.SIGTERM}, 1, "clean"},
		{"SIGINT cancelling the context does not run it", "sigint-cancels", []os.Signal{os.Interrupt}, 0, "clean"},
		{"SIGINT left to the runtime does not run it", "plain", []os.Signal{os.Interrupt}, 0, "killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, stderr := helperCommand(t, tt.helper)
			stdin, err := cmd.StdinPipe() // held open: the server must not stop for lack of a client
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			defer func() {
				_ = cmd.Process.Kill()
			}()
			waitFor(t, stderr, "envserver serving")
			for _, sig := range tt.signals {
				if err := cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			var waitErr error
			select {
			case waitErr = <-exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("process did not exit:\n%s", stderr.String())
			}
			out := stderr.String()
			if got := strings.Count(out, "SHUTDOWN HOOK RAN"); got != tt.wantHooks {
				t.Errorf("shutdown hook ran %d times, want %d:\n%s", got, tt.wantHooks, out)
			}
			switch tt.wantExit {
			case "clean":
				if waitErr != nil || !strings.Contains(out, "RUN RETURNED <nil>") {
					t.Errorf("exit %v, want Run to return nil and the process to exit 0:\n%s", waitErr, out)
				}
			case "killed":
				if waitErr == nil {
					t.Errorf("process exited cleanly, want it killed by the signal:\n%s", out)
				}
			}
		})
	}
}
