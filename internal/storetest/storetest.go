// Package storetest gives tests a migrated, empty store on each dialect: SQLite in a temp file and
// Postgres in a fresh database of one throwaway cluster per test binary (internal/pgtest). Under
// CI=true a Postgres that cannot start fails the test instead of skipping it.
// fixtures.go holds the rows the store tests of several domains start from (Member, LaunchFixture).
//
// A test binary that uses Postgres calls Main from its TestMain so that the cluster is stopped.
package storetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/pgtest"
	"github.com/proctorhq/proctor/models"
)

// The cluster is shared by every test of one binary: starting one costs over a second.
var (
	once     sync.Once
	cluster  *pgtest.Server
	startErr error
	dbSeq    atomic.Int64
)

// Main runs the tests, then each of after (a cleanup, or a check over the whole run: an error
// is printed and fails the run), then stops the shared cluster.
func Main(m *testing.M, after ...func() error) {
	code := m.Run()
	for _, a := range after {
		if err := a(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if cluster != nil {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "storetest: stop postgres:", err)
		}
	}
	os.Exit(code)
}

// PostgresURL creates a fresh database in the shared cluster and returns its URL.
func PostgresURL(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cluster, startErr = pgtest.Start(ctx)
	})
	if startErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("postgres: %v", startErr)
		}
		t.Skipf("postgres unavailable (CI=true fails instead): %v", startErr)
	}
	url, err := cluster.CreateDatabase(context.Background(), fmt.Sprintf("t%d_%d", os.Getpid(), dbSeq.Add(1)))
	if err != nil {
		t.Fatalf("create database: %v", err)
	}
	return url
}

// URL returns the database URL of a fresh, empty database of the dialect.
func URL(t testing.TB, d models.Dialect) string {
	t.Helper()
	if d == models.Postgres {
		return PostgresURL(t)
	}
	return "sqlite:" + filepath.Join(t.TempDir(), "proctor.db")
}

// Open returns a migrated store of the dialect, closed when the test ends.
func Open(t testing.TB, d models.Dialect) *models.Store {
	t.Helper()
	return OpenURL(t, URL(t, d))
}

// OpenURL returns the migrated store of a database URL (from URL or PostgresURL), closed when the
// test ends: for a test that also reaches the database another way.
func OpenURL(t testing.TB, url string) *models.Store {
	t.Helper()
	ctx := context.Background()
	scheme, _, _ := strings.Cut(url, ":")
	s, err := models.Open(ctx, url)
	if err != nil {
		t.Fatalf("open %s: %v", scheme, err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate %s: %v", scheme, err)
	}
	return s
}

// Dialects are the stores every data-access test runs on.
var Dialects = []models.Dialect{models.SQLite, models.Postgres}

// Each runs f as a subtest per dialect, each with its own migrated store.
func Each(t *testing.T, f func(t *testing.T, s *models.Store)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(string(d), func(t *testing.T) { f(t, Open(t, d)) })
	}
}
