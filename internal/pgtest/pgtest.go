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
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
		// sandbox provider does so on Close), so the fork runs on a thread of
		// its own that lives as long as the process: see onForkThread.
		Pdeathsig: syscall.SIGKILL,
	}
	s.cmd = cmd

	var startErr error
	onForkThread(func() { startErr = cmd.Start() })
	if err := startErr; err != nil {
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

// URL returns a connection URL for database dbname, over TCP on loopback as
// the superuser, usable by pgx and lib/pq alike.
func (s *Server) URL(dbname string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path:     "/" + dbname,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

func (s *Server) socketURL(dbname string) string {
	q := url.Values{"host": {s.sockDir}, "port": {strconv.Itoa(s.port)}, "sslmode": {"disable"}}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(superuser),
		Path:     "/" + dbname,
		RawQuery: q.Encode(),
	}
	return u.String()
}

// CreateDatabase creates an empty database so that each test can work in
// isolation on a shared cluster, and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context, name string) (string, error) {
	if name == "" {
		return "", errors.New("pgtest: database name must not be empty")
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: connecting to create database %q: %w", name, err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("pgtest: creating database %q: %w", name, err)
	}
	return s.URL(name), nil
}

// Port returns the loopback TCP port the cluster listens on.
func (s *Server) Port() int { return s.port }

// Dir returns the temporary directory holding the cluster; Stop removes it.
func (s *Server) Dir() string { return s.dir }

// PID returns the postmaster's process id, for diagnostics.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// findBinDir locates a directory containing initdb and postgres. An explicit
// PROCTOR_PG_BIN wins; otherwise the newest Debian-style install, then
// pg_config, then PATH.
func findBinDir() (string, error) {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		if !hasBinaries(dir) {
			return "", fmt.Errorf("pgtest: %s=%s does not contain initdb and postgres", BinDirEnv, dir)
		}
		return dir, nil
	}
	if dir := newestDebianBinDir(); dir != "" {
		return dir, nil
	}
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		if dir := strings.TrimSpace(string(out)); hasBinaries(dir) {
			return dir, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		// Follow symlinks such as /usr/local/bin/initdb -> .../15/bin/initdb
		// so that postgres is looked up next to the real initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); hasBinaries(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL binaries found (looked in /usr/lib/postgresql/*/bin, pg_config --bindir and PATH); install postgresql or set %s", BinDirEnv)
}

func newestDebianBinDir() string {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	type candidate struct {
		dir     string
		version []int
	}
	var cands []candidate
	for _, m := range matches {
		if !hasBinaries(m) {
			continue
		}
		cands = append(cands, candidate{m, parseVersion(filepath.Base(filepath.Dir(m)))})
	}
	if len(cands) == 0 {
		return ""
	}
	// Numeric, not lexical: 9.6 must sort below 10.
	slices.SortFunc(cands, func(a, b candidate) int { return slices.Compare(b.version, a.version) })
	return cands[0].dir
}

func parseVersion(s string) []int {
	var v []int
	for part := range strings.SplitSeq(s, ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// childCredential returns the identity to run initdb and postgres as: nil
// (ourselves) normally, the postgres system user when we are root.
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(systemUser)
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, but initdb and postgres refuse to run as root and there is no %q system user to run them as: %w", systemUser, err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parsing uid %q of user %q: %w", u.Uid, systemUser, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("pgtest: parsing gid %q of user %q: %w", u.Gid, systemUser, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func chownTree(root string, uid, gid int) error {
	err := filepath.WalkDir(root, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		return fmt.Errorf("pgtest: handing %s to uid %d: %w", root, uid, err)
	}
	return nil
}

func initdb(ctx context.Context, binDir, dataDir string, cred *syscall.Credential) error {
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "initdb"),
		"-D", dataDir,
		"-A", "trust",
		"-U", superuser,
		"-E", "UTF8",
		"--locale=C",
		// The cluster is deleted after the test; flushing it to disk is
		// wasted seconds.
		"--no-sync",
	)
	cmd.Env = childEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// childEnv is our environment minus libpq's PG* variables, which would
// otherwise leak the developer's own database settings (PGDATA, PGPORT,
// PGOPTIONS...) into the throwaway cluster.
func childEnv() []string {
	env := os.Environ()
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PG") })
}

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

// The thread every postmaster is forked from. It is locked and never unlocked, so the runtime
// never retires it and Pdeathsig fires only when the process dies. Process-wide by nature: one
// thread serves every cluster of the test binary.
var (
	forkOnce sync.Once
	forks    chan func()
)

// onForkThread runs f on the fork thread and waits for it.
func onForkThread(f func()) {
	forkOnce.Do(func() {
		forks = make(chan func())
		go func() {
			runtime.LockOSThread()
			for f := range forks {
				f()
			}
		}()
	})
	done := make(chan struct{})
	forks <- func() { f(); close(done) }
	<-done
}
