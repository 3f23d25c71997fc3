package image

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the compiler die with the worker: a killed build worker leaves no build
// running.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
