package pgtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/proctorhq/proctor/internal/forkthread"
)

// start launches the postmaster and waits until it accepts connections. On
// failure the process has been stopped and reaped.
func (s *Server) start(ctx context.Context, binDir, dataDir string, cred *syscall.Credential) error {
	s.stderr = &tailBuffer{limit: stderrLimit}
	s.exited = make(chan struct{})

	cmd := exec.Command(filepath.Join(binDir, "postgres"),
		"-D", dataDir,
		"-k", s.sockDir,
		"-p", strconv.Itoa(s.port),
		"-c", "listen_addresses=127.0.0.1",
		// Durability is pointless for a cluster deleted after the test, and
		// fsync dominates the cost of DDL-heavy test setup.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		// Suites run platforms in parallel, each with a pool of up to 20 connections per
		// process (a deployment test runs five processes): the default 100 is too few.
		"-c", "max_connections=500",
	)
	cmd.Env = childEnv()
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	// Backends inherit the output pipe; if they outlive a killed postmaster
	// Wait would otherwise block on them indefinitely.
	cmd.WaitDelay = 5 * time.Second
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		// Safety net for when the test binary dies without running Stop
		// (go test -timeout panics, SIGKILL): the kernel kills the postmaster
		// and its backends then exit on postmaster death. The signal is tied
		// to the forking OS thread, not the process, and the Go runtime
		// retires a pooled thread when a goroutine that locked it exits (the
		// sandbox provider's setns listeners do), so the fork runs on a thread
		// that lives as long as the process: see internal/forkthread.
		Pdeathsig: syscall.SIGKILL,
	}
	s.cmd = cmd

	if err := forkthread.Start(cmd); err != nil {
		return fmt.Errorf("pgtest: starting %s: %w", cmd.Path, err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	if err := s.waitReady(ctx); err != nil {
		_ = s.terminate()
		out := s.stderr.String()
		if strings.Contains(out, "Address already in use") {
			return fmt.Errorf("pgtest: port %d: %w", s.port, errAddrInUse)
		}
		return fmt.Errorf("pgtest: postgres did not become ready: %w\npostgres output:\n%s", err, out)
	}
	return nil
}

// waitReady polls until the postmaster accepts connections, exits, or the
// deadline passes.
//
// It connects through the unix socket in our private socket directory rather
// than TCP: only our postmaster can answer there, whereas a TCP port could
// have been grabbed by someone else's server after our probe released it.
// Postgres binds its TCP listener before the socket, so a socket answer also
// means the TCP URL works.
func (s *Server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	socketURL := s.socketURL("postgres")
	var lastErr error
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("postmaster exited early: %v", s.waitErr)
		default:
		}
		attemptCtx, attemptCancel := context.WithTimeout(ctx, 2*time.Second)
		conn, err := pgx.Connect(attemptCtx, socketURL)
		if err == nil {
			err = conn.Ping(attemptCtx)
			_ = conn.Close(attemptCtx)
		}
		attemptCancel()
		if err == nil {
			return nil
		}
		lastErr = err
		select {
		case <-s.exited:
			return fmt.Errorf("postmaster exited early: %v", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("%w (last connection error: %v)", ctx.Err(), lastErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// terminate escalates through postgres' shutdown modes until the postmaster
// has been reaped: SIGINT (fast: disconnect clients, clean shutdown), then
// SIGQUIT (immediate), then SIGKILL.
func (s *Server) terminate() error {
	steps := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, 15 * time.Second},
		{syscall.SIGQUIT, 5 * time.Second},
		{syscall.SIGKILL, 10 * time.Second},
	}
	for _, step := range steps {
		select {
		case <-s.exited:
			return nil
		default:
		}
		if err := s.cmd.Process.Signal(step.sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("pgtest: signalling postmaster %d: %w", s.cmd.Process.Pid, err)
		}
		select {
		case <-s.exited:
			return nil
		case <-time.After(step.wait):
			slog.Warn("pgtest: postmaster did not exit, escalating",
				"pid", s.cmd.Process.Pid, "signal", step.sig.String())
		}
	}
	return fmt.Errorf("pgtest: postmaster %d did not exit even after SIGKILL", s.cmd.Process.Pid)
}

// tailBuffer is an io.Writer keeping only the last limit bytes written.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.buf = slices.Clone(b.buf[over:])
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
