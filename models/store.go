// Package models is the store core: the schema and what every domain shares. It holds every bun
// table struct with its JSON column types (in rows files by what they record: jobrows.go,
// tracerows.go, buildrows.go, ...) and the statuses more than one domain reads, the embedded SQL
// migrations for both dialects, Store (Open, Migrate), the errors callers branch on,
// identity (teams, members, sessions, API keys: the Caller every query is scoped by) and the query
// helpers the domains share. Postgres (pgdialect) is the production store; SQLite (sqlitedialect,
// pure-Go driver) is the embedded default of `proctor dev`. The same structs and the same queries
// serve both; only the migration SQL differs per dialect.
//
// The queries live in one package per resource group of the spec, each a Store over this one:
// catalog (tasksets, tasks), registry (environments, builds, agents), rollouts (jobs, attempts,
// traces, instances), llms (models, checkpoints), billing (usage, limits, inference logs),
// credentials (environment variables, member secrets, provider keys) and datafiles. The rows stay
// here because bun's relations tie the rows of every domain together, and a domain reads another's
// through that domain's Store (catalog.Of(s.Store).GetTaskset), never the other way round: rollouts
// reads catalog, registry and credentials; catalog reads registry; billing reads llms.
//
// It may import internal leaf helpers only: no HTTP, no Temporal.
package models

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/dialect/sqlitedialect"
	"github.com/uptrace/bun/migrate"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" database/sql driver
)

// Sentinel errors that callers branch on (the API maps them to 404 and 409).
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
)

// ErrForbidden is returned when the caller sees a row but may not change it.
var ErrForbidden = errors.New("forbidden")

// FieldError is one invalid field of a store method's input, located by its path in the input
// (`tasks[2].env`); the API prefixes where in the request the input came from (`body.tasks[2].env`).
type FieldError struct {
	Location string
	Message  string
	Value    any
}

// ValidationError lists every invalid field of a request; the API answers it with 422.
type ValidationError []FieldError

func (v ValidationError) Error() string {
	msgs := make([]string, len(v))
	for i, e := range v {
		msgs[i] = e.Location + ": " + e.Message
	}
	return "invalid request: " + strings.Join(msgs, "; ")
}

// Dialect names the SQL flavour behind a Store.
type Dialect string

const (
	Postgres Dialect = "postgres"
	SQLite   Dialect = "sqlite"
)

//go:embed migrations
var migrationFiles embed.FS

// Store is the database behind every resource.
type Store struct {
	DB      *bun.DB
	Dialect Dialect
}

// Open connects to a database URL: postgres://… (or postgresql://…) for Postgres, sqlite:PATH or
// sqlite://PATH for an SQLite file (its directory is created). It does not migrate.
func Open(ctx context.Context, url string) (*Store, error) {
	var s *Store
	switch {
	case strings.HasPrefix(url, "postgres://"), strings.HasPrefix(url, "postgresql://"):
		sqldb, err := sql.Open("pgx", url)
		if err != nil {
			return nil, fmt.Errorf("open postgres: %w", err)
		}
		sqldb.SetMaxOpenConns(20)
		sqldb.SetConnMaxIdleTime(5 * time.Minute)
		s = &Store{DB: bun.NewDB(sqldb, pgdialect.New()), Dialect: Postgres}
	case strings.HasPrefix(url, "sqlite:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "sqlite:"), "//")
		if path == "" {
			return nil, errors.New("open sqlite: empty path in database URL")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// The file holds every team's data: only its owner may read it. SQLite gives its WAL
		// and shared-memory files the database file's mode.
		if err := privateFile(path); err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		// WAL lets readers proceed during a write; immediate transactions take the write lock up
		// front so that two writers queue on busy_timeout instead of failing with SQLITE_BUSY when
		// one upgrades a read lock.
		dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(NORMAL)&_txlock=immediate"
		sqldb, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, fmt.Errorf("open sqlite: %w", err)
		}
		sqldb.SetMaxOpenConns(8)
		s = &Store{DB: bun.NewDB(sqldb, sqlitedialect.New()), Dialect: SQLite}
	default:
		return nil, fmt.Errorf("unsupported database URL %q: want postgres://… or sqlite:PATH", redact(url))
	}
	if err := s.Ping(ctx); err != nil {
		s.DB.Close()
		return nil, err
	}
	return s, nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.DB.PingContext(ctx); err != nil {
		return fmt.Errorf("ping %s: %w", s.Dialect, err)
	}
	return nil
}

// Close closes the connection pool.
func (s *Store) Close() error { return s.DB.Close() }

// Migrate applies every pending migration of the store's dialect under bun's migration lock, so
// that several servers starting at once apply each migration exactly once. It returns the names
// applied by this call.
func (s *Store) Migrate(ctx context.Context) ([]string, error) {
	migrations, err := s.migrations()
	if err != nil {
		return nil, err
	}
	m := migrate.NewMigrator(s.DB, migrations, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return nil, fmt.Errorf("init migrations: %w", err)
	}
	if err := m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("lock migrations: %w", err)
	}
	defer m.Unlock(context.WithoutCancel(ctx)) //nolint:errcheck // best effort; a stale lock row is reported by the next Lock
	group, err := m.Migrate(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate %s: %w", s.Dialect, err)
	}
	var names []string
	for _, mg := range group.Migrations {
		names = append(names, mg.Name)
	}
	return names, nil
}

// migrations are the migrations of the store's dialect this binary carries.
func (s *Store) migrations() (*migrate.Migrations, error) {
	sub, err := fs.Sub(migrationFiles, "migrations/"+string(s.Dialect))
	if err != nil {
		return nil, err
	}
	migrations := migrate.NewMigrations()
	if err := migrations.Discover(sub); err != nil {
		return nil, fmt.Errorf("discover migrations: %w", err)
	}
	return migrations, nil
}

// ErrSchema is returned (wrapped) when the database's schema is not the one this binary expects.
var ErrSchema = errors.New("database schema mismatch")

// CheckSchema compares the migrations applied to the database with those this binary carries:
// an error (wrapping ErrSchema) says which are pending (run `proctor migrate`) or unknown (the
// database was migrated by a newer binary).
func (s *Store) CheckSchema(ctx context.Context) error {
	migrations, err := s.migrations()
	if err != nil {
		return err
	}
	known := map[string]bool{}
	for _, m := range migrations.Sorted() {
		known[m.Name] = true
	}
	var applied []string
	if err := s.DB.NewSelect().Table("bun_migrations").Column("name").Scan(ctx, &applied); err != nil {
		if strings.Contains(err.Error(), "bun_migrations") || strings.Contains(err.Error(), "no such table") || strings.Contains(err.Error(), "does not exist") {
			return fmt.Errorf("the database has no Proctor schema yet: run `proctor migrate`: %w", ErrSchema)
		}
		return fmt.Errorf("read applied migrations: %w", err)
	}
	done := map[string]bool{}
	var unknown []string
	for _, name := range applied {
		done[name] = true
		if !known[name] {
			unknown = append(unknown, name)
		}
	}
	var pending []string
	for _, m := range migrations.Sorted() {
		if !done[m.Name] {
			pending = append(pending, m.Name)
		}
	}
	switch {
	case len(unknown) > 0:
		slices.Sort(unknown)
		return fmt.Errorf("the database was migrated by a newer Proctor (it has %d migrations this binary does not know, the newest %s): run the newer binary: %w",
			len(unknown), unknown[len(unknown)-1], ErrSchema)
	case len(pending) > 0:
		return fmt.Errorf("the database lacks %d migrations of this binary (from %s): run `proctor migrate`: %w", len(pending), pending[0], ErrSchema)
	}
	return nil
}

// IsUniqueViolation reports whether err is a unique-constraint failure on either dialect.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLSTATE 23505") || strings.Contains(msg, "UNIQUE constraint failed")
}

// NotFound names what a query looked for in its error: ErrNotFound when it found no row, err
// itself otherwise.
func NotFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Now is the time the store records: the wall clock in UTC.
func Now() time.Time { return time.Now().UTC() }

// redact hides a password in a URL for error messages.
func redact(url string) string {
	at := strings.LastIndex(url, "@")
	scheme := strings.Index(url, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return url
	}
	creds := url[scheme+3 : at]
	if i := strings.Index(creds, ":"); i >= 0 {
		return url[:scheme+3] + creds[:i] + ":***" + url[at:]
	}
	return url
}

// IsNoRows reports whether a query found no row.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// MigrationFiles exposes the embedded migrations (one directory per dialect) for checks.
func MigrationFiles() fs.FS { return migrationFiles }

// privateFile creates path with mode 0600 if it is missing, and narrows it to 0600 if not.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return os.Chmod(path, 0o600)
}

// NonNil is s, or an empty slice for nil, so that a list reads [] rather than null.
func NonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// EscapeLike escapes LIKE's wildcards so that a search matches them literally.
func EscapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
