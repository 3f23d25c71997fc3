package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testContext ends with the test, or after a minute.
func testContext(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// repoRoot is the directory holding go.mod, found by walking up from the package directory.
func repoRoot(t testing.TB) string {
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

// todoBuild builds the todo example once per test binary: building takes seconds on a busy
// machine, and every environment test spawns its own process from the one binary.
var todoBuild struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if todoBuild.dir != "" {
		_ = os.RemoveAll(todoBuild.dir)
	}
	os.Exit(code)
}

func todoBinary(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	todoBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "agent-todo-")
		if err != nil {
			todoBuild.err = err
			return
		}
		todoBuild.dir = dir
		todoBuild.bin = filepath.Join(dir, "todo")
		cmd := exec.Command("go", "build", "-o", todoBuild.bin, "./examples/environments/todo")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			todoBuild.err = errors.New("go build todo: " + err.Error() + "\n" + string(out))
		}
	})
	if todoBuild.err != nil {
		t.Fatal(todoBuild.err)
	}
	return todoBuild.bin
}

// syncBuffer collects a child's stderr while the test may read it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// envProcess is a spawned environment and its session.
type envProcess struct {
	env    *Env
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan struct{}
}

// startTodo spawns the todo example over stdio, as the process sandbox provider will, and
// connects to it. When the test ends the session is closed and the process must exit on its
// own (its stdin closed); it is killed, and the test fails, if it does not.
func startTodo(t testing.TB, opts ConnectOptions) *envProcess {
	t.Helper()
	bin := todoBinary(t)
	p := &envProcess{cmd: exec.Command(bin), stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd.Dir = repoRoot(t)
	p.cmd.Stderr = p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
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
