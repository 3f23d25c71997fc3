package forkthread

import (
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// Children started with Pdeathsig outlive the goroutines that asked for them, though each of
// those locks its thread and returns, so the runtime ends the thread (all but one that may land
// on the main thread, which is wedged instead): a child forked from such a thread is killed.
func TestAChildOutlivesTheThreadThatAskedForIt(t *testing.T) {
	const n = 8
	exited := make(chan int, n)
	for i := range n {
		cmd := exec.Command("sleep", "30")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		started := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the runtime ends this thread when the goroutine returns
			started <- Start(cmd)
		}()
		if err := <-started; err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // ends the sleep
		go func() { cmd.Process.Wait(); exited <- i }()      //nolint:errcheck // any end is reported
	}
	select {
	case i := <-exited:
		t.Fatalf("child %d of %d died with the thread that asked for it", i+1, n)
	case <-time.After(500 * time.Millisecond):
	}
}
