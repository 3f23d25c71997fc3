package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// limitsProbe reports its limits ("limits"), takes 512 MiB and touches it ("hog"), forks
// children of itself that wait on stdin until one fails ("fork"; "fork-and-hold" then waits on
// its own stdin), printing how many started, says who it is and what it may do ("who"), or
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
	case "fork", "fork-and-hold":
		// Children that hold wait on a pipe this process keeps open until its own stdin closes:
		// they, and their threads, stay counted until then.
		var hold *os.File
		var r *os.File
		if os.Args[1] == "fork-and-hold" {
			r, hold, _ = os.Pipe()
		}
		n := 0
		for ; n < 300; n++ {
			c := exec.Command("/app/probe", "wait")
			if r != nil {
				c.Stdin = r
			}
			if err := c.Start(); err != nil {
				break
			}
		}
		fmt.Println("started", n)
		if hold != nil {
			os.Stdin.Read(make([]byte, 1))
			hold.Close()
		}
	case "who":
		// Who it is, what it may do to a root-owned file and its work dir.
		st, _ := os.ReadFile("/proc/self/status")
		for _, l := range strings.Split(string(st), "\n") {
			if strings.HasPrefix(l, "CapEff:") || strings.HasPrefix(l, "CapBnd:") || strings.HasPrefix(l, "Groups:") {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
		_, readErr := os.ReadFile("/app/secret")
		var owner uint32
		if fi, err := os.Stat("/app/secret"); err == nil {
			owner = fi.Sys().(*syscall.Stat_t).Uid
		}
		fmt.Println("uid", os.Getuid(), "gid", os.Getgid(), "secret-owner", owner, "read-secret:", readErr != nil, "write-work:", os.WriteFile("mine", []byte("x"), 0o600))
		fmt.Println("setuid-0:", syscall.Setuid(0))
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

// A worker that runs as root runs each bubblewrap sandbox as an unprivileged user of the host
// (RunAs), in a user namespace of its own: no capabilities, no supplementary groups, a root-owned
// file it may not read (0600) unreadable, its work dir its own; and, though every sandbox is the
// same user, each has a process bound of its own: one holding all its processes does not starve
// the next.
func TestASandboxRunsAsAnUnprivilegedUserOfItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a worker that is not root runs sandboxes as itself")
	}
	root := imageRootWith(t, limitsProbe)
	if err := os.WriteFile(filepath.Join(root, "app", "secret"), []byte("the host's"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.MaxProcesses = 40 })
	if p.runAs != DefaultRunAs || !strings.Contains(p.Limits(), "processes: RLIMIT_NPROC 40 (sandboxes run as user 60001)") {
		t.Fatalf("a root worker runs sandboxes as %d; limits %q", p.runAs, p.Limits())
	}
	out, sb := run(t, p, Spec{Command: []string{"/app/probe", "who"}, RootFS: root})
	exitCode(t, sb)
	for _, want := range []string{
		"CapEff: 0000000000000000", "CapBnd: 0000000000000000", "Groups:\n",
		fmt.Sprintf("uid %d gid %d secret-owner %d read-secret: true write-work: <nil>", DefaultRunAs, DefaultRunAs, nobodyInside),
	} {
		if !strings.Contains(out+"\n", want) {
			t.Errorf("the sandbox says\n%s\nwant %q in it", out, want)
		}
	}
	if strings.Contains(out, "setuid-0: <nil>") {
		t.Errorf("the sandbox became root: %s", out)
	}
	if fi, err := os.Stat(filepath.Join(sb.WorkDir(), "mine")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != DefaultRunAs {
		t.Errorf("what the sandbox wrote in its work dir: %v, %v", fi, err)
	}

	// Two at once, the first holding every process it could start.
	first := start(t, p, Spec{ID: "first", Command: []string{"/app/probe", "fork-and-hold"}, RootFS: root})
	line, err := bufio.NewReader(first.Stdout()).ReadString('\n')
	if err != nil {
		t.Fatalf("the first fork bomb: %v", err)
	}
	out, sb = run(t, p, Spec{ID: "second", Command: []string{"/app/probe", "fork"}, RootFS: root})
	exitCode(t, sb)
	// The first holds all it could start, each child several threads: its bound is full. The
	// second, under a bound of its own, still starts children; under one bound for both it
	// could start none.
	var n [2]int
	for i, said := range []string{line, out} {
		if _, err := fmt.Sscanf(strings.TrimSpace(said), "started %d", &n[i]); err != nil || n[i] >= 40 {
			t.Errorf("a fork bomb under 40 processes beside another: %q", said)
		}
	}
	if n[1] < 3 {
		t.Errorf("beside a sandbox holding its whole bound of 40, a second started %d children: one bound for both?", n[1])
	}
	select {
	case <-first.Done():
		t.Fatalf("the first fork bomb ended before the second ran: %v", first.Err())
	default:
	}
	first.Stdin().Close()
}

// With RunAs -1 a root worker runs sandboxes as root, as before, and says that its process
// bound does not bind them where no cgroup does.
func TestRunAsRootIsSaid(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root worker may run sandboxes as root")
	}
	p := newProvider(t, IsolationBubblewrap, func(o *ProcessOptions) { o.RunAs = -1 })
	if p.runAs != 0 {
		t.Fatalf("RunAs -1 runs sandboxes as %d", p.runAs)
	}
	if (p.cg == nil || !p.cg.pids) && !strings.Contains(p.Limits(), "processes: not limited (sandboxes run as root") {
		t.Errorf("limits %q do not say that root's processes are not bound", p.Limits())
	}
	if _, err := NewProcess(ProcessOptions{Root: t.TempDir(), RunAs: -2}); err == nil || !strings.Contains(err.Error(), "RunAs -2") {
		t.Errorf("RunAs -2: %v", err)
	}
}

// Unenforced names the declared limits a host does not enforce: with rlimits only, CPU (no
// rlimit caps a rate) and not memory (RLIMIT_DATA bounds it); with no limiter, both.
func TestUnenforcedNamesWhatAHostDoesNotLimit(t *testing.T) {
	res := Resources{CPU: 2, MemoryMB: 512}
	p := newProvider(t, IsolationNone, func(o *ProcessOptions) { o.Limiter = LimiterRlimit })
	if got := p.Unenforced(res); len(got) != 1 || got[0] != "cpu 2: cpu: not limited" {
		t.Errorf("rlimits leave %q unenforced, want the CPU alone", got)
	}
	if got := p.Unenforced(Resources{MemoryMB: 512}); len(got) != 0 {
		t.Errorf("rlimits leave %q unenforced of a memory bound", got)
	}
	p = newProvider(t, IsolationNone, func(o *ProcessOptions) { o.Limiter = LimiterNone })
	if got := p.Unenforced(res); len(got) != 2 || got[1] != "memory 512 MiB: memory: not limited" {
		t.Errorf("no limiter leaves %q unenforced, want CPU and memory", got)
	}
	if got := p.Unenforced(Resources{}); len(got) != 0 {
		t.Errorf("nothing declared, yet %q unenforced", got)
	}
}

// A sandbox's pid namespace keeps its number until the sandbox's stop has sent its last
// signal, even once every process in it is gone: the kernel hands a freed namespace's number to
// the next new namespace (of any kind), and a late signal by number would then reach another
// sandbox's processes.
func TestASandboxsPidNamespaceNumberIsItsOwnUntilItsStopEnds(t *testing.T) {
	p := newProvider(t, IsolationBubblewrap)
	a := start(t, p, Spec{ID: "a", Command: []string{"sleep", "300"}})
	number := a.pidNS
	a.kill() // every process gone; its Stop has yet to sweep
	<-a.done
	for i := range 3 {
		b := start(t, p, Spec{ID: fmt.Sprint("b", i), Command: []string{"sleep", "300"}})
		for _, pid := range b.Pids() {
			for _, kind := range []string{"pid", "net", "mnt", "user", "ipc", "uts"} {
				link, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, kind))
				if strings.TrimPrefix(link, kind+":") == strings.TrimPrefix(number, "pid:") {
					t.Fatalf("sandbox %s's %s namespace has number %s, the stopping sandbox's pid namespace's", b.ID(), kind, number)
				}
			}
		}
	}
}
