package pgtest_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/proctorhq/proctor/internal/pgtest"
)

func TestClusterServesIsolatedDatabases(t *testing.T) {
	srv := pgtest.ForTest(t)
	ctx := t.Context()

	urlA, err := srv.CreateDatabase(ctx, "alpha")
	if err != nil {
		t.Fatalf("CreateDatabase(alpha): %v", err)
	}
	urlB, err := srv.CreateDatabase(ctx, "beta")
	if err != nil {
		t.Fatalf("CreateDatabase(beta): %v", err)
	}
	if urlA == urlB {
		t.Fatalf("two databases got the same URL %q", urlA)
	}

	dbA := openDB(t, urlA)
	dbB := openDB(t, urlB)

	mustExec(t, dbA, `CREATE TABLE notes (id int PRIMARY KEY, body text NOT NULL)`)
	mustExec(t, dbA, `INSERT INTO notes (id, body) VALUES (1, 'héllo'), (2, 'world')`)

	var body string
	if err := dbA.QueryRowContext(ctx, `SELECT body FROM notes WHERE id = $1`, 1).Scan(&body); err != nil {
		t.Fatalf("select: %v", err)
	}
	if body != "héllo" {
		t.Errorf("body = %q, want %q (UTF-8 must round-trip)", body, "héllo")
	}

	// The table exists only in the database it was created in.
	var n int
	err = dbB.QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&n)
	if err == nil {
		t.Errorf("table created in alpha is visible in beta")
	}
}

func TestCreateDatabaseRejectsDuplicates(t *testing.T) {
	srv := pgtest.ForTest(t)
	if _, err := srv.CreateDatabase(t.Context(), "dup"); err != nil {
		t.Fatalf("first CreateDatabase: %v", err)
	}
	if _, err := srv.CreateDatabase(t.Context(), "dup"); err == nil {
		t.Errorf("second CreateDatabase with the same name succeeded, want an error")
	}
}

func TestStopRemovesProcessAndFiles(t *testing.T) {
	srv := startOrSkip(t)
	pid, dir := srv.PID(), srv.Dir()

	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("postmaster %d not running before Stop: %v", pid, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("cluster dir missing before Stop: %v", err)
	}

	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}

	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("after Stop, kill(%d, 0) = %v, want ESRCH (process gone)", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after Stop, stat(%s) = %v, want not-exist", dir, err)
	}
	if err := srv.Stop(); err != nil {
		t.Errorf("second Stop = %v, want nil (Stop is idempotent)", err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	db, err := sql.Open("pgx", srv.URL("postgres"))
	if err != nil {
		t.Fatalf("sql.Open: %v", err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err == nil {
		t.Errorf("stopped cluster still accepts connections")
	}
}

func TestTwoClustersRunSideBySide(t *testing.T) {
	first := pgtest.ForTest(t)
	second := pgtest.ForTest(t)

	if first.Port() == second.Port() {
		t.Fatalf("both clusters listen on port %d", first.Port())
	}
	if first.Dir() == second.Dir() {
		t.Fatalf("both clusters live in %s", first.Dir())
	}

	for _, srv := range []*pgtest.Server{first, second} {
		db := openDB(t, srv.URL("postgres"))
		var port int
		if err := db.QueryRowContext(t.Context(), `SELECT current_setting('port')::int`).Scan(&port); err != nil {
			t.Fatalf("query port: %v", err)
		}
		if port != srv.Port() {
			t.Errorf("URL for port %d reached a server on port %d", srv.Port(), port)
		}
	}
}

// startOrSkip is ForTest without the automatic Stop, for tests about Stop
// itself; a Stop in cleanup still guards against leaks when the test fails
// early.
func startOrSkip(t *testing.T) *pgtest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgtest.Start(ctx)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Start: %v", err)
		}
		t.Skipf("postgres unavailable: %v", err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

func openDB(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatalf("sql.Open(%q): %v", url, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(t.Context()); err != nil {
		t.Fatalf("ping %q: %v", url, err)
	}
	return db
}

func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.ExecContext(t.Context(), query); err != nil {
		t.Fatalf("exec %q: %v", query, err)
	}
}
