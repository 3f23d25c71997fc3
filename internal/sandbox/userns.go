package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/internal/forkthread"
	"github.com/proctorhq/proctor/internal/procfs"
)

// A worker that runs as root runs bubblewrap sandboxes as an unprivileged host user
// (ProcessOptions.RunAs), each in a user namespace of its own that this file makes:
//
//   - The sandbox's processes are that user, inside (its id is the same there) and on the host:
//     no capabilities, and RLIMIT_NPROC binds them, which it never does for root. The kernel
//     counts a user's processes per user namespace (since 5.14), so each sandbox has a bound of
//     its own though all share one id; the count over all of them is bounded by the namespace's
//     maker's, root's, which is none.
//   - bubblewrap runs as root and joins the namespace (--userns) before it builds the sandbox,
//     so it reaches what it mounts through the worker's private directories (0700: the data
//     dir, image roots, go test's temp dirs) as their owner would: the namespace also maps the
//     host's root, as its id 65534 (nobody), which the sandbox's processes can never become
//     (no capabilities, no new privileges, every mount nosuid). A root-owned file reads as
//     nobody's inside; what its mode grants others is what the sandbox may do with it.
//   - Its work dir is the sandbox user's (Process.launch chowns it); a directory it mounts, or
//     the one its command lies in, must grant others read and search (0755), as an image's root
//     does.
//
// A namespace needs a process to make it: bubblewrap itself, reading its arguments from a
// pipe (--args 0) that this file closes once it has opened the namespace, so it then exits.
// The namespace lives on for as long as a descriptor of it, or a process in it, does.

// nobodyInside is the id the host's root has inside a sandbox's user namespace.
const nobodyInside = 65534

// DefaultRunAs is the host user (and group) id sandboxes run as when the worker is root and
// ProcessOptions.RunAs is not set: no account of a usual host has it (Debian leaves
// 60000-64999 to be allocated on demand), and it is not nobody, whose files other daemons own.
const DefaultRunAs = 60001

// newUserns makes a user namespace for one sandbox run as uid (and gid) by bubblewrap (bwrap,
// the holder) and returns a descriptor of it, which the caller closes once bubblewrap has
// joined it.
func newUserns(bwrap string, uid int) (*os.File, error) {
	maps := []syscall.SysProcIDMap{{ContainerID: nobodyInside, HostID: 0, Size: 1}, {ContainerID: uid, HostID: uid, Size: 1}}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	defer w.Close()
	holder := exec.Command(bwrap, "--args", "0")
	holder.Stdin = r
	holder.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: maps,
		GidMappings: maps,
		Pdeathsig:   syscall.SIGKILL,
	}
	err = forkthread.Start(holder)
	r.Close()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", holder.Process.Pid))
	w.Close() // no arguments: the holder says so and exits
	holder.Wait()
	if err != nil {
		return nil, fmt.Errorf("user namespace: %w", err)
	}
	return ns, nil
}

// runAs makes cmd, bubblewrap with its arguments, run its sandbox as uid (an id inside) in the
// user namespace ns (newUserns, newRootUserns), which the caller closes once cmd has started
// (or could not).
func runAs(cmd *exec.Cmd, ns *os.File, uid int) {
	cmd.ExtraFiles = append(cmd.ExtraFiles, ns)
	fd := 2 + len(cmd.ExtraFiles)
	cmd.Args = append([]string{cmd.Args[0], "--userns", fmt.Sprint(fd), "--uid", fmt.Sprint(uid), "--gid", fmt.Sprint(uid)}, cmd.Args[1:]...)
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Root, without the worker's supplementary groups, which would otherwise follow the
	// sandbox's processes into their namespace (nameless there, still the host's root groups).
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	// bubblewrap is the first process of a pid namespace of its own, the sandbox's a namespace
	// within it. --die-with-parent cannot end the sandbox here: its init would take its end
	// from bubblewrap, root without capabilities in the namespace, which may not signal the
	// sandbox's user. The kernel ends every process of a pid namespace whose first one ends.
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWPID
}

// usernsPool makes sandboxes' user namespaces ahead of their starts, a few at a time, so that a
// start need not wait for bubblewrap to make one (a fork and exec, ~2-3 ms).
type usernsPool struct {
	bwrap string
	uid   int
	ready chan *os.File
	stop  chan struct{}
	done  chan struct{}
}

func newUsernsPool(bwrap string, uid, n int) *usernsPool {
	u := &usernsPool{bwrap: bwrap, uid: uid, ready: make(chan *os.File, n), stop: make(chan struct{}), done: make(chan struct{})}
	go u.fill()
	return u
}

func (u *usernsPool) fill() {
	defer close(u.done)
	for {
		ns, err := newUserns(u.bwrap, u.uid)
		if err != nil {
			// A start makes its own, and says why it could not.
			select {
			case <-u.stop:
				return
			case <-time.After(time.Second):
				continue
			}
		}
		select {
		case u.ready <- ns:
		case <-u.stop:
			ns.Close()
			return
		}
	}
}

// get is a fresh user namespace, made ahead or now.
func (u *usernsPool) get() (*os.File, error) {
	select {
	case ns := <-u.ready:
		return ns, nil
	default:
		return newUserns(u.bwrap, u.uid)
	}
}

// close stops making namespaces and lets go of those made ahead.
func (u *usernsPool) close() {
	close(u.stop)
	<-u.done
	for {
		select {
		case ns := <-u.ready:
			ns.Close()
		default:
			return
		}
	}
}

// childOf is the host pid of the one child of bubblewrap (at pid), the sandbox's init, which
// bubblewrap's info names by its pid in bubblewrap's own pid namespace (runAs): inner.
func childOf(pid, inner int) (int, error) {
	var children []int
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid)); err == nil {
		for _, f := range strings.Fields(string(b)) {
			if child, err := strconv.Atoi(f); err == nil {
				children = append(children, child)
			}
		}
	} else {
		// A kernel without CONFIG_PROC_CHILDREN: every process's parent, read.
		children = procfs.Pids(func(p int) bool { return parentOf(p) == pid })
	}
	for _, child := range children {
		// Its pids, the host's first: the second is in bubblewrap's namespace.
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", child))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(st)) {
			if ids, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(ids); len(ids) > 1 && ids[1] == strconv.Itoa(inner) {
					return child, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("the sandbox's init: bubblewrap (pid %d) has no child %d", pid, inner)
}
