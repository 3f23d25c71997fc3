package agent

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/testenv"
)

// testContext ends with the test, or after a minute.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestMain(m *testing.M) {
	code := m.Run()
	testenv.Cleanup()
	os.Exit(code)
}

// envProcess is a spawned environment and its session.
type envProcess struct {
	env    *Env
	cmd    *exec.Cmd
	stderr *testenv.Buffer
	exited chan struct{}
}

// startTodo spawns the todo example over stdio, as the process sandbox provider will, and
// connects to it. When the test ends the session is closed and the process must exit on its
// own (its stdin closed); it is killed, and the test fails, if it does not.
func startTodo(t testing.TB, opts ConnectOptions) *envProcess {
	t.Helper()
	return startExample(t, "todo", opts)
}

// startExample is startTodo for the example environment name.
func startExample(t testing.TB, name string, opts ConnectOptions) *envProcess {
	t.Helper()
	bin := testenv.Program(t, "examples/environments/"+name)
	p := &envProcess{cmd: exec.Command(bin), stderr: &testenv.Buffer{}, exited: make(chan struct{})}
	p.cmd.Stderr = p.stderr
	stdout, stdin := testenv.StartPiped(t, p.cmd)
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		if p.env != nil {
			if err := p.env.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
			t.Errorf("the environment did not exit within 10s of Close\nstderr:\n%s", p.stderr)
		}
	})
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	env, err := Connect(testContext(t), stdout, stdin, opts)
	if err != nil {
		t.Fatalf("Connect: %v\nstderr:\n%s", err, p.stderr)
	}
	p.env = env
	return p
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
