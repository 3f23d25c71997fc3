//go:build unix

package envserver

import (
	"fmt"
	"os"
	"sync"
	"syscall"
)

// stdoutSwapMu serializes swaps of fd 1. The file descriptor table is process-wide, so this
// lock is too: two servers in one process must not interleave their swaps and restore the
// wrong descriptor.
var stdoutSwapMu sync.Mutex

// withStdoutToStderr runs fn with fd 1 pointing at stderr, so that everything written to
// stdout meanwhile (fmt.Println, C libraries, child processes inheriting fd 1) lands on stderr.
// The stdio transport is unaffected: it writes to a duplicate of the original fd 1 taken before
// any swap (see dupStdout).
func withStdoutToStderr(fn func() error) error {
	stdoutSwapMu.Lock()
	defer stdoutSwapMu.Unlock()
	saved, err := dupCloexec(1)
	if err != nil {
		return fmt.Errorf("save stdout: %w", err)
	}
	defer syscall.Close(saved)
	if err := dupTo(2, 1); err != nil {
		return fmt.Errorf("point stdout at stderr: %w", err)
	}
	defer func() { _ = dupTo(saved, 1) }()
	return fn()
}

// stdoutToStderr points fd 1 at stderr until restore is called: for the whole life of a stdio
// server, whose MCP stream writes to a duplicate of the original fd 1 (see dupStdout), so that
// a tool's fmt.Print, a C library or a child process inheriting fd 1 cannot corrupt the stream.
func stdoutToStderr() (restore func(), err error) {
	stdoutSwapMu.Lock()
	defer stdoutSwapMu.Unlock()
	saved, err := dupCloexec(1)
	if err != nil {
		return nil, fmt.Errorf("save stdout: %w", err)
	}
	if err := dupTo(2, 1); err != nil {
		syscall.Close(saved)
		return nil, fmt.Errorf("point stdout at stderr: %w", err)
	}
	return func() {
		stdoutSwapMu.Lock()
		defer stdoutSwapMu.Unlock()
		_ = dupTo(saved, 1)
		_ = syscall.Close(saved)
	}, nil
}

// dupStdout returns a new file on the process's current fd 1, for the stdio transport to write
// MCP messages to whatever fd 1 later points at.
func dupStdout() (*os.File, error) {
	fd, err := dupCloexec(1)
	if err != nil {
		return nil, fmt.Errorf("duplicate stdout: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/stdout (mcp)"), nil
}

// dupCloexec duplicates fd with close-on-exec set, under ForkLock so that no child started
// meanwhile inherits the copy.
func dupCloexec(fd int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	nfd, err := syscall.Dup(fd)
	if err != nil {
		return -1, err
	}
	syscall.CloseOnExec(nfd)
	return nfd, nil
}
