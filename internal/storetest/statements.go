package storetest

import (
	"context"
	"strings"
	"sync"

	"github.com/uptrace/bun"

	"github.com/proctorhq/proctor/models"
)

// Statements records the statements a store runs once CountStatements has hooked it: the tests
// that bound an operation's round trips read N, and print String when the bound is broken.
type Statements struct {
	mu      sync.Mutex
	queries []string
}

// CountStatements records every statement s runs from now on.
func CountStatements(s *models.Store) *Statements {
	st := &Statements{}
	s.DB.AddQueryHook(st)
	return st
}

// BeforeQuery records the statement, its whitespace folded.
func (st *Statements) BeforeQuery(ctx context.Context, e *bun.QueryEvent) context.Context {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.queries = append(st.queries, strings.Join(strings.Fields(e.Query), " "))
	return ctx
}

// AfterQuery does nothing.
func (st *Statements) AfterQuery(context.Context, *bun.QueryEvent) {}

// N is the number of statements recorded.
func (st *Statements) N() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.queries)
}

// RoundTrips is the number of units of work among the statements recorded: a transaction
// (BEGIN to COMMIT or ROLLBACK, whatever it holds) or a statement run outside one. The statements
// of concurrent callers must not interleave for it to be exact.
func (st *Statements) RoundTrips() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n, inTx := 0, false
	for _, q := range st.queries {
		switch {
		case q == "BEGIN":
			n, inTx = n+1, true
		case q == "COMMIT" || q == "ROLLBACK":
			inTx = false
		case !inTx:
			n++
		}
	}
	return n
}

// String lists the statements recorded, one a line.
func (st *Statements) String() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	return strings.Join(st.queries, "\n")
}
