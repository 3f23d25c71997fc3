//go:build !unix

package envserver

import "os"

// withStdoutToStderr runs fn as it is: without dup2 there is no portable way to repoint the
// process's standard output, so hooks on these systems must not print to stdout.
func withStdoutToStderr(fn func() error) error { return fn() }

// dupStdout returns os.Stdout, the only handle there is.
func dupStdout() (*os.File, error) { return os.Stdout, nil }

// stdoutToStderr leaves stdout as it is (see withStdoutToStderr): tools on these systems must
// not print to stdout while a stdio server runs.
func stdoutToStderr() (restore func(), err error) { return func() {}, nil }
