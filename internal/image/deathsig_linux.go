package image

import (
	"os/exec"
	"syscall"

	"github.com/proctorhq/proctor/internal/forkthread"
)

// startDyingWithParent starts the compiler so that it dies with the worker (a killed build
// worker leaves no build running), from the thread that lives as long as the worker does.
func startDyingWithParent(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return forkthread.Start(cmd)
}
