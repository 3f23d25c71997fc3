package sandbox

import (
	"os/exec"
	"runtime"
)

// spawner starts every child of a provider from one goroutine locked to one
// OS thread for the provider's lifetime.
//
// Why: the children are started with Pdeathsig (and bubblewrap's
// --die-with-parent), and the kernel sends that signal when the *thread* that
// forked the child exits, not the process. Go may end an OS thread at any time
// a goroutine that locked it returns, so a child forked from an arbitrary
// goroutine could be killed while the worker is alive and well. A dedicated,
// locked thread that outlives every sandbox (it stops in Close, after they are
// stopped) makes "the parent died" mean exactly "the worker died".
// Serialising the forks costs little: a fork/exec takes well under a millisecond
// of the thread's time.
type spawner struct {
	reqs chan spawnReq
	done chan struct{}
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

func newSpawner() *spawner {
	s := &spawner{reqs: make(chan spawnReq), done: make(chan struct{})}
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: when this goroutine returns (after
		// Close), Go ends the thread rather than reuse it, and no child of it is
		// alive any more.
		close(started)
		defer close(s.done)
		for r := range s.reqs {
			r.reply <- r.cmd.Start()
		}
	}()
	<-started
	return s
}

// start runs cmd.Start on the spawner's thread.
func (s *spawner) start(cmd *exec.Cmd) error {
	reply := make(chan error, 1)
	s.reqs <- spawnReq{cmd: cmd, reply: reply}
	return <-reply
}

// stop ends the thread; start must not be called afterwards.
func (s *spawner) stop() {
	close(s.reqs)
	<-s.done
}
