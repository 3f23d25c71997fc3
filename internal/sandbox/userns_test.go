package sandbox

import (
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proctorhq/proctor/internal/procfs"
)

// parentOf reads a process's parent from /proc, as childOf does where the kernel has no
// children file; a process that is gone has none.
func TestParentOfReadsAProcesssParent(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if got := parentOf(pid); got != os.Getpid() {
		t.Errorf("parentOf(%d) = %d, want this process, %d", pid, got, os.Getpid())
	}
	if got := procfs.Pids(func(p int) bool { return parentOf(p) == os.Getpid() }); len(got) == 0 {
		t.Errorf("no process has this one as its parent, though %d does", pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if got := parentOf(pid); got != -1 {
		t.Errorf("parentOf a reaped process = %d, want -1", got)
	}
}

// A sandbox whose init is not known is refused before its limits are set: prlimit of pid 0
// would have set them on the worker itself.
func TestReadyInitRefusesAnUnknownInit(t *testing.T) {
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.MaxOpenFiles = 64 })
	var before, after unix.Rlimit
	unix.Getrlimit(unix.RLIMIT_NOFILE, &before)
	if err := p.readyInit(0, Spec{}, false, nil); err == nil {
		t.Error("readyInit of pid 0 went ahead")
	}
	unix.Getrlimit(unix.RLIMIT_NOFILE, &after)
	if after != before {
		t.Errorf("the worker's open-files limit went from %+v to %+v", before, after)
	}
}
