// Package forkthread starts child processes from one OS thread that lives as long as the process.
//
// A child started with Pdeathsig (or a bubblewrap given --die-with-parent, which sets it on
// itself) is signalled when the *thread* that forked it exits, not the process. Go retires an OS
// thread whenever a goroutine that locked it returns without unlocking (a provider's setns
// listener does, by design), and that thread may be one that some other goroutine forked a child
// from a moment before: the child would be killed while its parent lives on. Every such child of
// the process is therefore forked here, from a goroutine that locks its thread at once and never
// returns, so that "the parent died" means exactly "the process died".
//
// It imports the standard library only.
package forkthread

import (
	"os/exec"
	"runtime"
	"sync"
)

var (
	once  sync.Once
	forks chan func()
)

// Start runs cmd.Start on the fork thread and returns its error. Forks are serialized, which
// costs little: a fork and exec take well under a millisecond of the thread's time.
func Start(cmd *exec.Cmd) error {
	once.Do(func() {
		forks = make(chan func())
		started := make(chan struct{})
		go func() {
			// Locked before anything else runs on this thread, and never unlocked: no child of
			// any other goroutine was forked from it, and the runtime never retires it.
			runtime.LockOSThread()
			close(started)
			for f := range forks {
				f()
			}
		}()
		<-started
	})
	done := make(chan error, 1)
	forks <- func() { done <- cmd.Start() }
	return <-done
}
