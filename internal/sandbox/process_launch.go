package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/proctorhq/proctor/internal/forkthread"
)

// withinRoot is the writable root of the sandbox spec runs within (Spec.Within), nil if none.
func withinRoot(spec Spec) *writableRoot {
	if host, ok := spec.Within.(*processSandbox); ok {
		return host.root
	}
	return nil
}

// launch creates the work dir and cgroup, starts the process and the
// goroutines that follow it. On error nothing is left behind.
func (p *Process) launch(ctx context.Context, spec Spec, argv0 string, devices []string) (_ *processSandbox, err error) {
	var undo []func()
	defer func() {
		if err != nil {
			for i := len(undo) - 1; i >= 0; i-- {
				undo[i]()
			}
		}
	}()
	workDir, cg, portDir, err := p.prepare(spec, &undo)
	if err != nil {
		return nil, err
	}
	// Within a sandbox with a writable root, in that root (see Spec.Within): root there, as its
	// processes are; the root stays that sandbox's, removed at its Stop.
	root := withinRoot(spec)
	sharedRoot := root != nil
	if !sharedRoot && spec.WritableRoot {
		lower, err := p.owned.get(spec.RootFS)
		if err != nil {
			return nil, err
		}
		w, err := mountWritableRoot(workDir+".root", lower, p.runAs)
		if err != nil {
			return nil, err
		}
		root = &w
		undo = append(undo, func() { w.remove() })
	}
	// Under bubblewrap the command always waits on the block pipe: its limits are set, and its
	// listener made, before it runs its first instruction.
	bwrap := p.isolation == IsolationBubblewrap
	pp, err := openPipes(bwrap, bwrap)
	if err != nil {
		return nil, err
	}
	if bwrap && p.seccomp != nil {
		if pp.seccompR, err = seccompPipe(p.seccomp); err != nil {
			pp.closeChildEnds()
			pp.closeOurEnds()
			return nil, err
		}
	}
	cmd := p.command(spec, argv0, workDir, portDir, devices, pp, cg, root)
	if bwrap && p.runAs > 0 {
		ns, err := p.asSandboxUser(cmd, spec.Resources, root != nil)
		if err != nil {
			pp.closeChildEnds()
			pp.closeOurEnds()
			return nil, err
		}
		defer ns.Close() // bubblewrap holds it once started
	}
	if err = forkthread.Start(cmd); err != nil {
		pp.closeChildEnds()
		pp.closeOurEnds()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	pp.closeChildEnds()

	sb := p.follow(spec, cmd, pp, workDir, portDir, devices, cg)
	if !sharedRoot {
		sb.root = root
	}
	if err := p.identify(ctx, sb, pp.infoR); err != nil {
		pp.closeBlock()
		return nil, err
	}
	if bwrap {
		err := p.readyInit(sb.initPID, spec, root != nil, pp.blockW)
		if err != nil {
			// bubblewrap runs the command once its block pipe closes, written or not: the
			// sandbox is gone before the pipe closes.
			sb.kill()
			<-sb.done
			sb.closePipes()
			sb.releasePidNS()
		}
		pp.closeBlock()
		if err != nil {
			return nil, err
		}
	}
	return sb, nil
}

// asSandboxUser makes cmd, bubblewrap, run its sandbox as the sandbox user in a user namespace
// of its own, and answers the namespace, which the caller closes once cmd has started. With a
// writable root the user is root there, in a namespace that is the user's own (newRootUserns):
// bubblewrap then runs as the user, the namespace's owner, from "/" (the worker's directories
// are not the user's to enter until it has joined the namespace; it then enters the sandbox's
// own, --chdir), and prlimit(1) sets the sandbox's limits as the user before bubblewrap starts
// (the sandbox's init is not the worker's to limit later: a root without CAP_SYS_RESOURCE may
// not reach into a namespace it does not own).
func (p *Process) asSandboxUser(cmd *exec.Cmd, res Resources, writableRoot bool) (*os.File, error) {
	if !writableRoot {
		ns, err := p.userns.get()
		if err != nil {
			return nil, err
		}
		runAs(cmd, ns, p.runAs)
		return ns, nil
	}
	ns, err := newRootUserns(p.runAs)
	if err != nil {
		return nil, err
	}
	runAs(cmd, ns, rootUID)
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(p.runAs), Gid: uint32(p.runAs), Groups: []uint32{}}
	cmd.Dir = "/"
	if err := p.limitedByPrlimit(cmd, res); err != nil {
		ns.Close()
		return nil, err
	}
	return ns, nil
}

// limitInit sets the rlimits of a sandbox's first process (bubblewrap's init, waiting on its
// block pipe), which every process of the sandbox inherits: open files and processes always,
// memory (RLIMIT_DATA) when rlimits are how memory is limited here. No shell of the image's is
// needed: prlimit(2) from outside, before the command starts.
func (p *Process) limitInit(pid int, res Resources) error {
	for _, l := range p.rlimits(res) {
		if err := unix.Prlimit(pid, l.resource, &unix.Rlimit{Cur: l.n, Max: l.n}, nil); err != nil {
			return fmt.Errorf("limit the sandbox's %s: %w", l.what, err)
		}
	}
	return nil
}

// rlimit is one limit a sandbox's processes have: its name for messages and prlimit(1), the
// resource, and the value (soft and hard alike).
type rlimit struct {
	what, flag string
	resource   int
	n          uint64
}

// rlimits are the limits of a sandbox with res: open files and processes always, memory
// (RLIMIT_DATA) when rlimits are how memory is limited here.
func (p *Process) rlimits(res Resources) []rlimit {
	out := []rlimit{{"open files", "nofile", unix.RLIMIT_NOFILE, uint64(p.maxFiles)}, {"processes", "nproc", unix.RLIMIT_NPROC, uint64(p.maxProcs)}}
	if p.rlimitMem && res.MemoryMB > 0 {
		out = append(out, rlimit{"memory", "data", unix.RLIMIT_DATA, uint64(res.MemoryMB) << 20})
	}
	return out
}

// limitedByPrlimit makes cmd start through prlimit(1), which sets the sandbox's limits
// (rlimits) on itself and execs cmd: every process of the sandbox inherits them.
func (p *Process) limitedByPrlimit(cmd *exec.Cmd, res Resources) error {
	bin, err := exec.LookPath("prlimit")
	if err != nil {
		return fmt.Errorf("writable root: no prlimit (util-linux) to set the sandbox's limits: %w", err)
	}
	args := []string{bin}
	for _, l := range p.rlimits(res) {
		args = append(args, fmt.Sprintf("--%s=%d:%d", l.flag, l.n, l.n))
	}
	cmd.Args = append(append(args, "--", cmd.Path), cmd.Args[1:]...)
	cmd.Path = bin
	return nil
}

// workDirPattern is the MkdirTemp pattern for a sandbox: its id, made safe
// for a file name and short, then a random suffix so that two sandboxes never
// share a directory even with the same id.
func workDirPattern(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b) + "-*"
}

// readyInit readies a bubblewrap sandbox whose first process is pid, waiting on its block pipe:
// it sets the sandbox's limits (limitInit; one in a writable root's namespace, ownRootUserns,
// was limited as it started), makes spec's listener inside where this process does
// (listenSetns) and hands it to spec.Listen.Ready, then lets the command start (a byte on block,
// bubblewrap's --block-fd). It leaves block open: bubblewrap starts the command when block closes
// unwritten too, so on an error the caller ends the sandbox first.
func (p *Process) readyInit(pid int, spec Spec, ownRootUserns bool, block *os.File) error {
	if pid <= 0 { // prlimit(0) and the rest would act on this process
		return fmt.Errorf("the sandbox's init is not known (pid %d)", pid)
	}
	if !ownRootUserns { // limited before it started (limitedByPrlimit)
		if err := p.limitInit(pid, spec.Resources); err != nil {
			return err
		}
	}
	if l := spec.Listen; l != nil && p.listenBy == listenSetns {
		ln, err := listenInNetns(pid, l.Port)
		if err != nil {
			return err
		}
		l.Ready(ln)
	}
	if _, err := block.Write([]byte{1}); err != nil {
		return fmt.Errorf("start the sandbox's command: %w", err)
	}
	return nil
}

// RandomSuffix is 8 random hex digits, for a name of a sandbox's own beside another's.
func RandomSuffix() string {
	b := make([]byte, 4)
	rand.Read(b) //nolint:errcheck // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// sandboxPipes are a sandbox's stdio, and bubblewrap's info pipe (fd 3) under bubblewrap: our
// own pipes, not cmd.StdoutPipe, because Wait would close those as soon as the process exits,
// under a reader (the MCP client) that may still be draining them. Passing *os.File also spares
// os/exec's copy goroutines.
// A sandbox with a listener inside also gets bubblewrap's block pipe (fd 4), on which its command
// waits for the listener.
type sandboxPipes struct {
	inR, inW, outR, outW, errR, errW, infoR, infoW, blockR, blockW *os.File
	// seccompR is the read end of the pipe bubblewrap reads the seccomp filter from (nil: none).
	seccompR *os.File
}

func openPipes(info, block bool) (*sandboxPipes, error) {
	pp := &sandboxPipes{}
	var err error
	pipe := func(r, w **os.File) {
		if err == nil {
			*r, *w, err = os.Pipe()
		}
	}
	pipe(&pp.inR, &pp.inW)
	pipe(&pp.outR, &pp.outW)
	pipe(&pp.errR, &pp.errW)
	if info {
		pipe(&pp.infoR, &pp.infoW)
	}
	if block {
		pipe(&pp.blockR, &pp.blockW)
	}
	if err != nil {
		pp.closeChildEnds()
		pp.closeOurEnds()
		return nil, fmt.Errorf("pipes: %w", err)
	}
	return pp, nil
}

func closeFiles(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			f.Close()
		}
	}
}

// closeChildEnds closes the ends the child holds (once it started, or when it could not).
func (pp *sandboxPipes) closeChildEnds() {
	closeFiles(pp.inR, pp.outW, pp.errW, pp.infoW, pp.blockR, pp.seccompR)
}

// closeOurEnds closes the ends the sandbox reads and writes, when it could not start.
func (pp *sandboxPipes) closeOurEnds() { closeFiles(pp.inW, pp.outR, pp.errR, pp.infoR, pp.blockW) }

// closeBlock closes the block pipe's end we write, if any (bubblewrap then starts the command,
// if its sandbox is still there).
func (pp *sandboxPipes) closeBlock() {
	closeFiles(pp.blockW)
	pp.blockW = nil
}

// Where a sandbox whose listener the relay serves sees the relay and the socket's directory:
// under /tmp, the one place bubblewrap can make a mount point in a read-only root.
const (
	relayInSandbox = "/tmp/.proctor-relay"
	portInSandbox  = "/tmp/.proctor-port"
)

// command is the command that runs spec's environment (argv0 and its arguments) in workDir: under
// bubblewrap, else in a pid namespace of its own where the host allows; in cgroup cg when there
// is one; with a memory rlimit where that is how memory is limited. With portDir (the relay's
// socket's directory) the relay runs in front of it.
func (p *Process) command(spec Spec, argv0, workDir, portDir string, devices []string, pp *sandboxPipes, cg *sandboxCgroup, root *writableRoot) *exec.Cmd {
	argv := append([]string{argv0}, spec.Command[1:]...)
	// spec's mounts, shallowest first (a mount under another's target goes after it), then the
	// relay's, which a mount at /tmp must not cover.
	var mounts []bwrapMount
	for _, m := range slices.SortedStableFunc(slices.Values(spec.Mounts), func(a, b Mount) int {
		return strings.Count(a.Target, "/") - strings.Count(b.Target, "/")
	}) {
		mounts = append(mounts, bwrapMount{src: m.Source, dst: m.Target, writable: m.Writable})
	}
	if portDir != "" {
		argv = RelayCommand(relayInSandbox, portInSandbox, spec.Listen.Port, argv)
		mounts = append(mounts, bwrapMount{src: p.relay, dst: relayInSandbox}, bwrapMount{src: portDir, dst: portInSandbox})
	}
	if p.rlimitMem && spec.Resources.MemoryMB > 0 && p.isolation != IsolationBubblewrap {
		// Without bubblewrap (whose init waits for limitInit) rlimits must be set in the
		// child before it execs the environment, which os/exec cannot do; the host's shell
		// sets it and execs in place (same pid), so the limit is in force from the first
		// instruction.
		kb := strconv.Itoa(spec.Resources.MemoryMB * 1024)
		argv = append([]string{"/bin/sh", "-c", `ulimit -d ` + kb + ` && exec "$0" "$@"`}, argv...)
	}
	cmd := &exec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    sandboxEnv(spec, homeDir(spec, workDir, p.isolation), p.cudaNames(devices)),
		Dir:    workDir,
		Stdin:  pp.inR,
		Stdout: pp.outW,
		Stderr: pp.errW,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:    true,
			Pdeathsig: syscall.SIGKILL,
		},
	}
	switch {
	case p.isolation == IsolationBubblewrap:
		binds := spec.ReadOnlyBinds
		if _, mounted, _ := mountedCommand(spec); spec.RootFS == "" && !mounted {
			binds = append([]string{filepath.Dir(argv0)}, binds...)
		}
		blockFD := 0
		cmd.ExtraFiles = []*os.File{pp.infoW} // fd 3
		if pp.blockR != nil {
			blockFD = 4
			cmd.ExtraFiles = append(cmd.ExtraFiles, pp.blockR)
		}
		// A sandbox that sees the host's root sees the sandbox root in it too: the other
		// sandboxes' work dirs and sockets (this provider's and others') are hidden under an
		// empty tmpfs, its own work dir mounted over that.
		bm := bwrapMounts{roBinds: binds, mounts: mounts, devNodes: p.gpuNodes(devices), hide: filepath.Dir(p.root)}
		if p.gpuInfo != "" {
			bm.gpuInfo = &gpuInfoMask{dir: p.gpuInfo, keep: p.gpuBuses(devices)}
		}
		if root != nil {
			bm.writableRoot = root.merged()
		}
		args := bwrapArgs(workDir, spec, bm, 3, blockFD)
		if pp.seccompR != nil {
			cmd.ExtraFiles = append(cmd.ExtraFiles, pp.seccompR)
			args = append(args[:len(args)-1], "--seccomp", fmt.Sprint(2+len(cmd.ExtraFiles)), "--")
		}
		cmd.Path = p.bwrap
		cmd.Args = append(append([]string{p.bwrap}, args...), argv...)
	case p.ownPidNS(devices):
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cg.fd.Fd())
	}
	return cmd
}

// ownPidNS says whether an unisolated sandbox given devices starts in a pid namespace of its
// own. One given GPUs does not: without a mount namespace it sees the host's /proc, where its own
// pids name other processes, and CUDA then fails to start (error 304, "OS call failed", seen on
// an H200 host); bubblewrap mounts a /proc of the sandbox's own. Such a sandbox is stopped by its
// session, as on hosts without pid namespaces.
func (p *Process) ownPidNS(devices []string) bool {
	return p.pidNS && len(devices) == 0
}

// identify records the started sandbox's init process and pid namespace, by which its processes
// are found later, whatever they fork or however they detach. Under bubblewrap they come from its
// info pipe; a bubblewrap that never says is killed.
func (p *Process) identify(ctx context.Context, sb *processSandbox, infoR *os.File) error {
	switch {
	case p.isolation == IsolationBubblewrap:
		info, ierr := readBwrapInfo(ctx, infoR)
		if ierr != nil {
			sb.kill()
			<-sb.done
			sb.closePipes()
			return fmt.Errorf("bubblewrap did not start: %w%s", ierr, stderrTail(sb.logs))
		}
		init := info.ChildPID
		if p.runAs > 0 {
			// bubblewrap runs in a pid namespace of its own: what it says are pids there.
			var err error
			if init, err = childOf(sb.cmd.Process.Pid, info.ChildPID); err != nil {
				sb.kill()
				<-sb.done
				sb.closePipes()
				return err
			}
		}
		sb.holdPidNS(init)
	case p.ownPidNS(sb.devices):
		sb.holdPidNS(sb.cmd.Process.Pid) // now, while it surely runs
	}
	return nil
}

func stderrTail(logs *LogRing) string {
	tail := logs.Tail(3)
	if len(tail) == 0 {
		return ""
	}
	return " (stderr: " + strings.Join(tail, " | ") + ")"
}

// prepare makes what a sandbox needs before its process starts: its work dir, its cgroup, and
// the listener the relay serves (one made by joining the sandbox's namespace is made later, once
// bubblewrap has made it: its command waits on the block pipe). Each adds its removal to undo.
func (p *Process) prepare(spec Spec, undo *[]func()) (workDir string, cg *sandboxCgroup, portDir string, err error) {
	workDir = spec.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp(p.root, workDirPattern(spec.ID)); err != nil {
			return "", nil, "", fmt.Errorf("create work dir: %w", err)
		}
		dir := workDir // the results are zeroed on a later error; the undo keeps what it made
		*undo = append(*undo, func() { removeAll(dir) })
		if p.runAs > 0 {
			// The sandbox's own, and no one else's: 0700 as made.
			if err = os.Chown(workDir, p.runAs, p.runAs); err != nil {
				return "", nil, "", fmt.Errorf("work dir: %w", err)
			}
		}
	}
	if p.cg != nil {
		// Named after the work dir, unique per sandbox; one that works in another's gets a name
		// of its own beside that one's.
		name := "sandbox-" + filepath.Base(workDir)
		if spec.WorkDir != "" {
			name += "-" + RandomSuffix()
		}
		if cg, err = p.cg.create(name, spec.Resources); err != nil {
			return "", nil, "", err
		}
		made := cg
		*undo = append(*undo, func() { made.kill(); made.remove() })
	}
	if spec.Listen != nil && p.listenBy == listenRelay {
		if portDir, err = ListenForRelay(p.root, spec.Listen); err != nil {
			return "", nil, "", err
		}
		dir := portDir
		*undo = append(*undo, func() { removeAll(dir) })
	}
	return workDir, cg, portDir, nil
}

// follow is the started process as a sandbox, with the goroutines that read its log and wait
// for its end.
func (p *Process) follow(spec Spec, cmd *exec.Cmd, pp *sandboxPipes, workDir, portDir string, devices []string, cg *sandboxCgroup) *processSandbox {
	sb := &processSandbox{
		p:             p,
		id:            spec.ID,
		workDir:       workDir,
		sharedWorkDir: spec.WorkDir != "",
		portDir:       portDir,
		companion:     spec.Companion,
		devices:       devices,
		cmd:           cmd,
		cg:            cg,
		stdin:         pp.inW,
		stdout:        pp.outR,
		stderr:        pp.errR,
		logs:          NewLogRing(MaxLogLines),
		done:          make(chan struct{}),
		logsDone:      make(chan struct{}),
		stopped:       make(chan struct{}),
	}
	go func() {
		defer close(sb.logsDone)
		ReadLines(pp.errR, "stderr", sb.logs, spec.OnLog)
	}()
	go sb.wait()
	return sb
}
