package sandbox

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
)

// limitsProbe reports its limits ("limits"), takes 512 MiB and touches it ("hog"), forks
// children of itself that wait on stdin until one fails ("fork"), printing how many started, or
// tries calls the seccomp filter refuses ("syscalls").
const limitsProbe = `package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

func main() {
	switch os.Args[1] {
	case "limits":
		b, _ := os.ReadFile("/proc/self/limits")
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "Max data size") || strings.HasPrefix(l, "Max open files") || strings.HasPrefix(l, "Max processes") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	case "hog":
		b := make([]byte, 512<<20)
		for i := range b {
			b[i] = 1
		}
		fmt.Println("took", len(b)>>20, "MiB")
	case "syscalls":
		// Each refused call's errno, and whether a plain child still starts.
		_, _, keyctl := syscall.Syscall(250, 0, 0, 0) // keyctl (amd64)
		newUser := exec.Command("/app/probe", "wait")
		newUser.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
		child := exec.Command("/app/probe", "limits")
		fmt.Println("unshare:", syscall.Unshare(syscall.CLONE_NEWUSER), "keyctl:", keyctl, "clone-newuser:", newUser.Start(), "child:", child.Run())
	case "wait":
		os.Stdin.Read(make([]byte, 1))
	case "fork":
		n := 0
		for ; n < 300; n++ {
			c := exec.Command("/app/probe", "wait")
			if err := c.Start(); err != nil {
				break
			}
		}
		fmt.Println("started", n)
	}
}
`

// A sandbox of an image without a shell starts with its memory limited, and its limits are in
// force from its first instruction: set from outside on bubblewrap's init, before the command.
func TestLimitsBindASandboxWithoutAShell(t *testing.T) {
	root := imageRootWith(t, limitsProbe)
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.Limiter = LimiterRlimit; o.MaxOpenFiles = 321; o.MaxProcesses = 77 })
	out, sb := run(t, p, Spec{Command: []string{"/app/probe", "limits"}, RootFS: root, Resources: Resources{MemoryMB: 96}})
	if code := exitCode(t, sb); code != 0 {
		t.Fatalf("the probe exited %d: %q", code, sb.logs.Tail(5))
	}
	for _, want := range []string{"Max data size 100663296 100663296 bytes", "Max open files 321 321 files", "Max processes 77 77 processes"} {
		if !strings.Contains(out, want) {
			t.Errorf("the sandbox's limits:\n%s\nwant %q", out, want)
		}
	}

	// A process that takes more than its memory is stopped at the limit.
	out, sb = run(t, p, Spec{Command: []string{"/app/probe", "hog"}, RootFS: root, Resources: Resources{MemoryMB: 96}})
	if code := exitCode(t, sb); code == 0 || strings.Contains(out, "took") {
		t.Errorf("a memory hog under 96 MiB: exit %d, %q", code, out)
	}
	// Within its memory it runs.
	out, sb = run(t, p, Spec{Command: []string{"/app/probe", "hog"}, RootFS: root, Resources: Resources{MemoryMB: 1024}})
	if code := exitCode(t, sb); code != 0 || !strings.Contains(out, "took 512 MiB") {
		t.Errorf("the same under 1 GiB: exit %d, %q, %q", code, out, sb.logs.Tail(3))
	}
}

// A fork bomb is stopped at the provider's process bound where the host can bind one (the cgroup
// pids controller, or RLIMIT_NPROC for a worker that is not root); where it cannot, the provider
// says so rather than claim a bound.
func TestAForkBombStopsAtTheProcessBound(t *testing.T) {
	root := imageRootWith(t, limitsProbe)
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.MaxProcesses = 40 })
	if strings.Contains(p.Limits(), "processes: not limited") {
		if os.Geteuid() != 0 || (p.cg != nil && p.cg.pids) {
			t.Fatalf("the provider can bind processes here, yet says %q", p.Limits())
		}
		t.Logf("processes cannot be bound on this host, and the provider says so: %s", p.Limits())
		return
	}
	out, sb := run(t, p, Spec{Command: []string{"/app/probe", "fork"}, RootFS: root})
	exitCode(t, sb)
	var n int
	if _, err := fmt.Sscanf(strings.TrimSpace(out), "started %d", &n); err != nil || n >= 40 {
		t.Errorf("the fork bomb under 40 processes: %q", out)
	}
}

// A sandbox's processes cannot reach the kernel interfaces the default seccomp filter refuses
// (a new user namespace, by unshare or clone; keyrings), and run everything else.
func TestTheSeccompFilterRefusesWhatNoEnvironmentNeeds(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the probe calls keyctl by its amd64 number")
	}
	root := imageRootWith(t, limitsProbe)
	p := newProvider(t, IsolationBubblewrap)
	out, sb := run(t, p, Spec{Command: []string{"/app/probe", "syscalls"}, RootFS: root})
	if code := exitCode(t, sb); code != 0 {
		t.Fatalf("the probe exited %d: %q", code, sb.logs.Tail(5))
	}
	want := "unshare: operation not permitted keyctl: operation not permitted clone-newuser: fork/exec /app/probe: operation not permitted child: <nil>"
	if strings.TrimSpace(out) != want {
		t.Errorf("the probe says %q\nwant %q", strings.TrimSpace(out), want)
	}
}
