package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"

	"github.com/jackc/pgx/v5"
)

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
