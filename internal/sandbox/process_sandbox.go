package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/internal/procfs"
)

// processSandbox is a sandbox of the process provider.
type processSandbox struct {
	p       *Process
	id      string
	workDir string
	// sharedWorkDir: the work dir is another sandbox's (Spec.WorkDir), left in place at Stop.
	sharedWorkDir bool
	// portDir holds the socket the relay in front of the command relays to (Spec.Listen without
	// CAP_SYS_ADMIN); "" without.
	portDir string
	// companion: the sandbox holds no slot (Spec.Companion).
	companion bool
	devices   []string
	cmd       *exec.Cmd // bwrap, or the environment itself
	cg        *sandboxCgroup
	// root is the sandbox's writable root (Spec.WritableRoot), removed at Stop; nil without.
	root *writableRoot
	// initPID is the host pid of the sandbox's pid 1 and pidNS its namespace
	// ("pid:[4026532180]"); both zero without a pid namespace.
	initPID int
	pidNS   string
	// pidNSFile holds the pid namespace while this sandbox may signal what is in it: a freed
	// namespace's number is the next new one's (another sandbox's), whose processes a late
	// signal by number would kill.
	pidNSFile *os.File
	// nsReleased: Stop let the namespace go (under mu).
	nsReleased bool

	stdin          *os.File
	stdout, stderr *os.File
	logs           *LogRing
	logsDone       chan struct{} // stderr read to EOF

	done chan struct{} // closed once the direct child has exited

	mu         sync.Mutex
	stopCalled bool
	exitErr    error
	stopped    chan struct{} // closed when Stop's teardown ended
	stopErr    error
}

var _ Sandbox = (*processSandbox)(nil)

func (s *processSandbox) ID() string            { return s.id }
func (s *processSandbox) Stdin() io.WriteCloser { return s.stdin }
func (s *processSandbox) Stdout() io.ReadCloser { return s.stdout }
func (s *processSandbox) WorkDir() string       { return s.workDir }
func (s *processSandbox) HasWritableRoot() bool { return s.root != nil }
func (s *processSandbox) Logs() []LogLine       { return s.logs.All() }
func (s *processSandbox) Done() <-chan struct{} { return s.done }
func (s *processSandbox) Devices() []string     { return slices.Clone(s.devices) }

func (s *processSandbox) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// Pids lists the host pids of every process of the sandbox that is alive
// (bubblewrap's own included), for diagnostics and tests.
func (s *processSandbox) Pids() []int {
	var pids []int
	s.mu.Lock()
	released := s.nsReleased
	s.mu.Unlock()
	switch {
	case released:
		// Its namespace ended with it, and its number may be another sandbox's now.
	case s.pidNS != "":
		pids = procfs.Pids(func(pid int) bool { return nsOf(pid) == s.pidNS })
		if s.p.isolation == IsolationBubblewrap && !s.exited() {
			pids = append(pids, s.cmd.Process.Pid)
		}
	default:
		pgid := s.cmd.Process.Pid
		pids = procfs.Pids(func(pid int) bool { return pgidOf(pid) == pgid })
	}
	if s.cg != nil {
		pids = append(pids, s.cg.pids()...)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}

// exitError is what Err returns once the environment has exited.
type exitError struct {
	stopped bool
	cause   error    // from Wait: nil for exit 0, usually an *exec.ExitError
	stderr  []string // last stderr lines, when it failed on its own
}

func (e *exitError) Error() string {
	var b strings.Builder
	b.WriteString("sandbox: environment exited")
	if e.stopped {
		b.WriteString(" on stop")
	}
	if e.cause != nil {
		b.WriteString(": " + e.cause.Error())
	} else {
		b.WriteString(": exit status 0")
	}
	if len(e.stderr) > 0 {
		b.WriteString(" (stderr: " + strings.Join(e.stderr, " | ") + ")")
	}
	return b.String()
}

func (e *exitError) Is(target error) bool {
	return target == ErrExited || (e.stopped && target == ErrStopped)
}

func (e *exitError) Unwrap() error { return e.cause }

// wait reaps the direct child and records why it exited.
func (s *processSandbox) wait() {
	err := s.cmd.Wait()
	// Give the stderr reader a moment to catch up, so that the error can
	// quote the environment's last words. With a pid namespace every writer
	// is gone by now and EOF is immediate.
	select {
	case <-s.logsDone:
	case <-time.After(200 * time.Millisecond):
	}
	s.mu.Lock()
	e := &exitError{stopped: s.stopCalled, cause: err}
	if !e.stopped && err != nil {
		e.stderr = s.logs.Tail(3)
	}
	s.exitErr = e
	s.mu.Unlock()
	close(s.done)
}

func (s *processSandbox) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop implements Sandbox.
func (s *processSandbox) Stop(ctx context.Context) error {
	s.mu.Lock()
	if s.stopCalled {
		s.mu.Unlock()
		select {
		case <-s.stopped:
			return s.stopErr
		case <-ctx.Done():
			return fmt.Errorf("stop sandbox %s: %w", s.id, ctx.Err())
		}
	}
	s.stopCalled = true
	s.mu.Unlock()
	s.stopErr = s.teardown(ctx)
	close(s.stopped)
	return s.stopErr
}

// killWait bounds the wait for processes to die after SIGKILL; only a
// process stuck in the kernel (uninterruptible I/O) takes longer.
const killWait = 30 * time.Second

func (s *processSandbox) teardown(ctx context.Context) error {
	begin := time.Now()
	if !s.exited() {
		grace := s.p.grace
		if dl, ok := ctx.Deadline(); ok {
			grace = min(grace, time.Until(dl))
		}
		graceEnd := time.Now().Add(grace)
		s.awaitExec(ctx, graceEnd)
		s.signal(syscall.SIGTERM)
		t := time.NewTimer(max(time.Until(graceEnd), 0))
		select {
		case <-s.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if !s.exited() {
		s.signal(syscall.SIGKILL)
		select {
		case <-s.done:
		case <-time.After(time.Second):
			// bwrap outlived its namespace; killing it first would have left
			// its init to be reaped by the host's pid 1.
			s.cmd.Process.Kill()
		}
		select {
		case <-s.done:
		case <-time.After(killWait):
			// Keep the slot and GPUs: handing out a device that a live process
			// still holds would be worse than running one sandbox fewer.
			return fmt.Errorf("stop sandbox %s: still running %s after SIGKILL", s.id, killWait)
		}
	}
	// Whatever outlived the direct child: only possible without a pid
	// namespace (a grandchild in the process group) or in a cgroup.
	s.signal(syscall.SIGKILL)
	s.releasePidNS()

	var errs []error
	if s.cg != nil {
		if err := s.cg.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	s.closePipes()
	if !s.sharedWorkDir {
		if err := removeAll(s.workDir); err != nil {
			errs = append(errs, fmt.Errorf("remove work dir: %w", err))
		}
	}
	if s.portDir != "" {
		if err := removeAll(s.portDir); err != nil {
			errs = append(errs, fmt.Errorf("remove the relay's socket: %w", err))
		}
	}
	if s.root != nil {
		if err := s.root.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	s.p.forget(s)
	s.p.log.Info("sandbox: stopped", "sandbox", s.id, "elapsed", time.Since(begin), "exit", s.Err())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", s.id, err)
	}
	return nil
}

// awaitExec waits, until deadline at most, for bubblewrap to have exec'd the
// environment. Start returns once the sandbox's namespaces exist, while
// bubblewrap may still be mounting: a SIGTERM then would reach no environment
// and Stop would sit out the whole grace. Without bubblewrap Start returns
// after the exec, so there is nothing to wait for.
func (s *processSandbox) awaitExec(ctx context.Context, deadline time.Time) {
	if s.p.isolation != IsolationBubblewrap || s.pidNS == "" {
		return
	}
	bwrap, err := os.Stat(s.p.bwrap)
	if err != nil {
		return
	}
	for {
		for _, pid := range procfs.Pids(func(pid int) bool { return nsOf(pid) == s.pidNS }) {
			if pid == s.initPID {
				continue
			}
			if exe, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && !os.SameFile(exe, bwrap) {
				return
			}
		}
		if time.Now().After(deadline) {
			return
		}
		select {
		case <-s.done:
			return
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// holdPidNS makes pid's pid namespace the sandbox's (pidNS), held open (pidNSFile) until
// releasePidNS; without it (pid gone already) the sandbox has none and is found by its process
// group.
func (s *processSandbox) holdPidNS(pid int) {
	s.initPID = pid // whatever follows: a later prlimit of pid 0 would be the worker's own
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	if err != nil {
		return
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return
	}
	s.pidNS, s.pidNSFile = fmt.Sprintf("pid:[%d]", st.Ino), f
}

// releasePidNS lets the sandbox's pid namespace go, once nothing signals it any more.
func (s *processSandbox) releasePidNS() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pidNSFile != nil {
		s.pidNSFile.Close()
		s.pidNSFile = nil
		s.nsReleased = true
	}
}

// closePipes closes the worker's ends of the pipes, which ends any read or
// write the MCP client has in flight.
func (s *processSandbox) closePipes() {
	s.stdin.Close()
	s.stdout.Close()
	select {
	case <-s.logsDone:
	case <-time.After(2 * time.Second): // a writer survived; do not wait on it
	}
	s.stderr.Close()
}

// kill SIGKILLs the whole sandbox at once, bwrap included.
func (s *processSandbox) kill() {
	s.signal(syscall.SIGKILL)
	s.cmd.Process.Kill()
}

// signal sends sig to every process of the sandbox. The pid namespace (or,
// without one, the process group) finds them however deep they forked;
// SIGKILL to a namespace's pid 1 makes the kernel kill the rest.
func (s *processSandbox) signal(sig syscall.Signal) {
	direct := s.cmd.Process.Pid
	switch {
	case s.pidNS != "":
		for _, pid := range procfs.Pids(func(pid int) bool { return nsOf(pid) == s.pidNS }) {
			if pid != direct {
				syscall.Kill(pid, sig)
			}
		}
		// os.Process.Signal, not kill(2), for the direct child: it knows when
		// the pid was reaped and could belong to someone else.
		switch {
		case s.p.isolation == IsolationBubblewrap:
			// Not bwrap itself: on SIGTERM it would end at once and, through
			// --die-with-parent, SIGKILL the environment without a grace; on
			// SIGKILL its init would be left for the host's pid 1 to reap.
			// Killing the namespace's pid 1 ends bwrap cleanly. (bwrap itself
			// exits on word from its init without reaping it, so the init is
			// briefly a zombie of the host's pid 1 on every path: run workers
			// in containers under a reaping init, e.g. docker --init.)
		case sig == syscall.SIGKILL:
			s.cmd.Process.Signal(sig)
		case sig == syscall.SIGTERM && termIsDefault(direct):
			// Without bubblewrap the environment is its namespace's pid 1, and
			// the kernel drops signals to a pid 1 that has no handler for them.
			// Anywhere else SIGTERM would have killed it; so does SIGKILL.
			s.cmd.Process.Signal(syscall.SIGKILL)
		default:
			s.cmd.Process.Signal(sig)
		}
	default:
		// Setsid made the direct child a group leader; its pid is the group's.
		syscall.Kill(-direct, sig)
	}
	if s.cg != nil {
		if sig == syscall.SIGKILL {
			s.cg.kill()
		} else {
			for _, pid := range s.cg.pids() {
				syscall.Kill(pid, sig)
			}
		}
	}
}

// nsOf is pid's pid namespace, e.g. "pid:[4026531836]", or "" when it is
// gone or a zombie.
func nsOf(pid int) string {
	ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
	return ns
}

// termIsDefault reports whether pid neither catches nor ignores SIGTERM,
// from the masks in /proc/<pid>/status.
func termIsDefault(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	const bit = 1 << (syscall.SIGTERM - 1)
	for line := range strings.SplitSeq(string(b), "\n") {
		name, hex, ok := strings.Cut(line, ":")
		if !ok || (name != "SigCgt" && name != "SigIgn") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64); err != nil || mask&bit != 0 {
			return false
		}
	}
	return true
}

// pgidOf is pid's process group, or -1 (gone, or a zombie).
func pgidOf(pid int) int {
	if f := procfs.Stat(pid); len(f) > 2 && f[0] != "Z" {
		return atoiOr(f[2], -1)
	}
	return -1
}

// parentOf is pid's parent's pid, or -1.
func parentOf(pid int) int {
	if f := procfs.Stat(pid); len(f) > 1 {
		return atoiOr(f[1], -1)
	}
	return -1
}

func atoiOr(s string, or int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return or
	}
	return n
}

// removeAll is os.RemoveAll that also removes what the environment made
// read-only (chmod 0 directories), which would otherwise leak work dirs for
// a worker that does not run as root.
func removeAll(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
