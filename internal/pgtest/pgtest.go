// Package pgtest starts throwaway PostgreSQL clusters for tests.
//
// Each cluster lives in its own temporary directory, runs as a child process
// of the test binary from the machine's own PostgreSQL binaries, listens on a
// private loopback port and is torn down (process and files) by Stop. Nothing
// is shared between clusters, so tests in different packages can run their
// own clusters in parallel.
//
// The package is test infrastructure: it may import the standard library and
// github.com/jackc/pgx/v5, and nothing else from this module. Production
// code must not import it.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BinDirEnv names the environment variable that, when set, points at the
// directory holding initdb and postgres, overriding discovery.
const BinDirEnv = "PROCTOR_PG_BIN"

const (
	// superuser is the bootstrap role created by initdb; trust auth means it
	// needs no password.
	superuser = "postgres"

	// systemUser is who runs initdb and postgres when the tests run as root,
	// because both refuse to run as root.
	systemUser = "postgres"

	readyTimeout = 30 * time.Second

	// startAttempts bounds retries when the port picked turns out to be taken
	// by the time postgres binds it (the probe listener is closed first, so
	// another process can grab the port in between).
	startAttempts = 3

	// stderrLimit caps how much postmaster output is kept for error messages;
	// a long-running cluster must not grow memory without bound.
	stderrLimit = 64 << 10
)

// Server is a running throwaway PostgreSQL cluster. It is safe for
// concurrent use.
type Server struct {
	dir     string // temp root: data/ and sock/ live below it
	sockDir string
	port    int
	cmd     *exec.Cmd
	stderr  *tailBuffer
	exited  chan struct{} // closed once the postmaster has been reaped
	waitErr error         // valid after exited is closed

	stopOnce sync.Once
	stopErr  error
}

// ForTest starts a cluster for t and stops it when t finishes.
//
// A machine without PostgreSQL binaries is a normal developer setup, so a
// failure to start skips the test there; in CI (CI=true) the same failure
// fails the test, so a broken CI image cannot silently skip the database
// suite.
func ForTest(t testing.TB) *Server {
	t.Helper()
	// Not t.Context(): it is cancelled before cleanups run, and startup must
	// be bounded independently of the test's own deadline handling.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("starting throwaway postgres: %v", err)
		}
		t.Skipf("skipping, postgres unavailable (set CI=true to fail instead): %v", err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: stopping postgres: %v", err)
		}
	})
	return s
}

// Start initialises a new cluster in a fresh temporary directory and starts
// it. The caller must call Stop, which removes every trace of it.
//
// ctx bounds startup only; the running cluster is not tied to it.
func Start(ctx context.Context) (*Server, error) {
	began := time.Now()
	binDir, err := findBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := childCredential()
	if err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: creating temp dir: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }

	sockDir := filepath.Join(dir, "sock")
	if err := os.Mkdir(sockDir, 0o700); err != nil {
		cleanup()
		return nil, fmt.Errorf("pgtest: creating socket dir: %w", err)
	}
	if cred != nil {
		// MkdirTemp creates 0700 root-owned dirs; the postgres user must own
		// them to create the data dir, the socket and the lock files.
		if err := chownTree(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			cleanup()
			return nil, err
		}
	}

	dataDir := filepath.Join(dir, "data")
	if err := initdb(ctx, binDir, dataDir, cred); err != nil {
		cleanup()
		return nil, err
	}

	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		port, err := freePort()
		if err != nil {
			cleanup()
			return nil, err
		}
		s := &Server{dir: dir, sockDir: sockDir, port: port}
		err = s.start(ctx, binDir, dataDir, cred)
		if err == nil {
			slog.Debug("pgtest: postgres started",
				"dir", dir, "port", port, "pid", s.PID(), "elapsed", time.Since(began))
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) {
			break
		}
		slog.Debug("pgtest: port taken, retrying", "port", port, "attempt", attempt)
	}
	cleanup()
	return nil, lastErr
}

var errAddrInUse = errors.New("address already in use")

// Stop shuts the cluster down, waits for the postmaster to exit and removes
// its directory. It is idempotent and safe to call concurrently.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		var errs []error
		if err := s.terminate(); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("pgtest: removing %s: %w", s.dir, err))
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Port returns the loopback TCP port the cluster listens on.
func (s *Server) Port() int { return s.port }

// Dir returns the temporary directory holding the cluster; Stop removes it.
func (s *Server) Dir() string { return s.dir }

// PID returns the postmaster's process id, for diagnostics.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// freePort asks the kernel for an unused loopback port. The port is free
// only until someone else takes it, hence the retry in Start.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: finding a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("pgtest: releasing probe port: %w", err)
	}
	return port, nil
}
