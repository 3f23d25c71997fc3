package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limit modes, as accepted by ProcessOptions.Limiter.
const (
	LimiterAuto   = "auto"   // cgroup v2 where usable, else rlimits
	LimiterCgroup = "cgroup" // cgroup v2 required: NewProcess fails without
	LimiterRlimit = "rlimit" // rlimits only (memory; CPU is then not limited)
	LimiterNone   = "none"   // no limits
)

// ProcessOptions configure the process provider. The zero value is usable.
type ProcessOptions struct {
	// Root is the directory for work dirs (created);
	// default os.TempDir()/proctor-sandboxes.
	Root string
	// MaxSandboxes is how many sandboxes may live at once;
	// default runtime.NumCPU()*4.
	MaxSandboxes int
	// Isolation is "auto" (bubblewrap when installed and usable here, else
	// none; the default), "bubblewrap" (required: NewProcess fails without)
	// or "none".
	Isolation string
	// GPUs are the device ids this host may hand out, e.g. from nvidia-smi;
	// GPUType names their type (one type per provider).
	GPUs    []string
	GPUType string
	// Logger receives the provider's and sandboxes' lifecycle logs;
	// default slog.Default().
	Logger *slog.Logger

	// Bubblewrap is the bwrap binary; default "bwrap" looked up in PATH.
	Bubblewrap string
	// Limiter picks how CPU and memory limits are applied: "auto" (default),
	// "cgroup", "rlimit" or "none". See Process.Limits for what is in effect.
	//
	// cgroup v2 limits the sandbox as a whole (cpu.max, memory.max). Where it
	// cannot be used (cgroup v1 or hybrid hosts, no delegation) memory falls
	// back to RLIMIT_DATA on each process and CPU is not limited: no rlimit
	// caps a rate. Under RLIMIT_DATA a Go environment needs MemoryMB ≥ 128
	// just to start its runtime.
	Limiter string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// default 5s.
	StopGrace time.Duration
}

// Process is the process provider: each sandbox is a child process of the
// worker. It implements Provider.
type Process struct {
	root      string
	max       int
	grace     time.Duration
	log       *slog.Logger
	isolation string // IsolationBubblewrap or IsolationNone
	bwrap     string // bwrap binary, with IsolationBubblewrap
	pidNS     bool   // with IsolationNone: children get their own pid namespace
	cg        *cgroupManager
	rlimitMem bool   // memory limited by RLIMIT_DATA (when cg does not)
	limits    string // what Limits reports
	devDir    string // where GPU device nodes live; tests point it elsewhere
	gpus      *GPUPool
	sp        *spawner
	owner     *ownerDir // root is owner.path

	mu       sync.Mutex
	closed   bool
	slots    int // reserved: starting plus live
	live     map[*processSandbox]struct{}
	starting sync.WaitGroup
}

var _ Provider = (*Process)(nil)

// NewProcess checks what isolation and limits this host allows (running a
// throwaway sandbox to see whether bubblewrap works) and returns a provider.
// Call Close when done with it.
func NewProcess(opts ProcessOptions) (*Process, error) {
	p := &Process{
		root:   opts.Root,
		max:    opts.MaxSandboxes,
		grace:  opts.StopGrace,
		log:    opts.Logger,
		devDir: "/dev",
		live:   make(map[*processSandbox]struct{}),
	}
	if p.root == "" {
		p.root = filepath.Join(os.TempDir(), "proctor-sandboxes")
	}
	root, err := filepath.Abs(p.root)
	if err != nil {
		return nil, fmt.Errorf("sandbox root: %w", err)
	}
	p.root = root
	if p.max == 0 {
		p.max = runtime.NumCPU() * 4
	}
	if p.max < 0 {
		return nil, fmt.Errorf("MaxSandboxes %d: must not be negative", p.max)
	}
	if p.grace <= 0 {
		p.grace = 5 * time.Second
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.gpus, err = NewGPUPool(opts.GPUs, opts.GPUType); err != nil {
		return nil, err
	}
	isolation := cmp.Or(opts.Isolation, IsolationAuto)
	limiter := cmp.Or(opts.Limiter, LimiterAuto)
	switch isolation {
	case IsolationAuto, IsolationBubblewrap, IsolationNone:
	default:
		return nil, fmt.Errorf("isolation %q: want auto, bubblewrap or none", isolation)
	}
	switch limiter {
	case LimiterAuto, LimiterCgroup, LimiterRlimit, LimiterNone:
	default:
		return nil, fmt.Errorf("limiter %q: want auto, cgroup, rlimit or none", limiter)
	}
	if err := os.MkdirAll(p.root, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox root: %w", err)
	}
	// Work dirs live in a directory of this provider's own under the root; what killed
	// providers left there is swept now.
	owner, err := claimOwnerDir(p.root, p.log)
	if err != nil {
		return nil, err
	}
	p.owner, p.root = owner, owner.path

	p.sp = newSpawner()
	ok := false
	defer func() {
		if !ok {
			p.sp.stop()
			owner.release() //nolint:errcheck // the next provider's sweep removes what is left
		}
	}()
	if err := p.isolate(isolation, opts.Bubblewrap); err != nil {
		return nil, err
	}
	if err := p.limit(limiter); err != nil {
		return nil, err
	}

	ok = true
	p.log.Info("sandbox: process provider ready", "root", p.root, "capacity", p.max,
		"isolation", p.isolation, "pid_namespace", p.pidNS || p.isolation == IsolationBubblewrap,
		"limits", p.limits, "gpus", len(opts.GPUs), "gpu_type", opts.GPUType)
	return p, nil
}

// isolate picks how environments are isolated: bubblewrap when it works here (required when
// isolation says bubblewrap), else none, in a pid namespace of its own where the host allows.
func (p *Process) isolate(isolation, bubblewrap string) error {
	if isolation != IsolationNone {
		bwrap, err := exec.LookPath(cmp.Or(bubblewrap, "bwrap"))
		if err == nil {
			err = probeBubblewrap(context.Background(), bwrap, p.sp)
		}
		switch {
		case err == nil:
			p.isolation, p.bwrap = IsolationBubblewrap, bwrap
		case isolation == IsolationBubblewrap:
			return fmt.Errorf("isolation bubblewrap: %w", err)
		default:
			p.log.Info("sandbox: bubblewrap not usable, running environments without isolation", "reason", err)
		}
	}
	if p.isolation == "" {
		p.isolation = IsolationNone
		// A pid namespace of its own makes the environment's pid 1 the one
		// process whose death takes every other with it: the kernel kills the
		// namespace. It needs CAP_SYS_ADMIN.
		p.pidNS = probeStart(p.sp, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}) == nil
		if !p.pidNS {
			p.log.Info("sandbox: no pid namespaces; processes an environment forks may outlive a killed worker")
		}
	}
	return nil
}

// limit picks how sandboxes' CPU and memory are limited: cgroup v2 where it can be delegated
// (required when limiter says cgroup), else RLIMIT_DATA for memory; p.limits says what holds.
func (p *Process) limit(limiter string) error {
	var cpuLimit, memLimit string
	if limiter == LimiterAuto || limiter == LimiterCgroup {
		cg, err := setupCgroups(realCgroupHost())
		switch {
		case err == nil:
			p.cg = cg
			if cg.moved {
				p.log.Info("sandbox: moved the worker into a leaf cgroup to delegate controllers", "cgroup", filepath.Join(cg.parent, workerLeaf))
			}
		case limiter == LimiterCgroup:
			return fmt.Errorf("limiter cgroup: %w", err)
		default:
			cpuLimit = "cpu: not limited (" + err.Error() + ")"
		}
	}
	if p.cg != nil {
		if p.cg.cpu {
			cpuLimit = "cpu: " + p.cg.describe()
		} else {
			cpuLimit = "cpu: not limited (no cgroup v2 cpu controller)"
		}
		if p.cg.memory {
			memLimit = "memory: " + p.cg.describe()
		}
	}
	if memLimit == "" && (limiter == LimiterAuto || limiter == LimiterRlimit) {
		// RLIMIT_DATA rather than RLIMIT_AS: Go and JVM runtimes reserve far
		// more address space than they use (a Go binary needs RLIMIT_AS ≈ 1 GiB
		// just to start), while RLIMIT_DATA counts private writable memory,
		// which tracks what is really used.
		if err := probeStart(p.sp, nil, "-c", "ulimit -d"); err == nil {
			p.rlimitMem = true
			memLimit = "memory: RLIMIT_DATA per process"
		} else {
			memLimit = "memory: not limited (" + err.Error() + ")"
		}
	}
	if cpuLimit == "" {
		cpuLimit = "cpu: not limited"
	}
	if memLimit == "" {
		memLimit = "memory: not limited"
	}
	p.limits = cpuLimit + "; " + memLimit
	return nil
}

// probeStart runs /bin/sh with args (default: exit at once) under attr and
// reports whether it started and exited 0.
func probeStart(sp *spawner, attr *syscall.SysProcAttr, args ...string) error {
	if len(args) == 0 {
		args = []string{"-c", "exit 0"}
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = attr
	if err := sp.start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// Isolation is what isolates sandboxes here: "bubblewrap" or "none".
func (p *Process) Isolation() string { return p.isolation }

// Limits says how CPU and memory limits are applied here, e.g.
// "cpu: not limited (...); memory: RLIMIT_DATA per process".
func (p *Process) Limits() string { return p.limits }

// Capacity is the most sandboxes the provider runs at once.
func (p *Process) Capacity() int { return p.max }

// Running is how many sandboxes hold a slot.
func (p *Process) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.slots
}

// FreeGPUs is how many configured GPUs no sandbox holds.
func (p *Process) FreeGPUs() int { return p.gpus.Free() }

// Start starts spec in a fresh work dir under the provider's root.
func (p *Process) Start(ctx context.Context, spec Spec) (Sandbox, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	argv0, err := p.checkSpec(spec)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	devices, err := p.reserve(spec.Resources.GPU)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	defer p.starting.Done()
	begin := time.Now()
	sb, err := p.launch(ctx, spec, argv0, devices)
	if err != nil {
		p.unreserve(devices)
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	p.mu.Lock()
	p.live[sb] = struct{}{}
	p.mu.Unlock()
	p.log.Info("sandbox: started", "sandbox", spec.ID, "work_dir", sb.workDir, "pid", sb.cmd.Process.Pid,
		"devices", devices, "elapsed", time.Since(begin))
	return sb, nil
}

// reserve takes a slot and the GPUs asked for, or neither.
func (p *Process) reserve(req GPURequest) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if p.slots >= p.max {
		return nil, fmt.Errorf("%d of %d sandboxes running: %w", p.slots, p.max, ErrCapacity)
	}
	devices, err := p.gpus.Allocate(req)
	if err != nil {
		return nil, err
	}
	p.slots++
	p.starting.Add(1)
	return devices, nil
}

func (p *Process) unreserve(devices []string) {
	p.gpus.Release(devices)
	p.mu.Lock()
	p.slots--
	p.mu.Unlock()
}

// checkSpec rejects what cannot run and resolves the command to an absolute
// path, so that a missing binary is a clear error here rather than an exit
// status from inside the sandbox.
func (p *Process) checkSpec(spec Spec) (string, error) {
	switch {
	case spec.ID == "" || spec.ID == "." || spec.ID == ".." || strings.ContainsAny(spec.ID, "/\x00"):
		return "", fmt.Errorf("id %q: %w", spec.ID, ErrInvalidSpec)
	case len(spec.Command) == 0 || spec.Command[0] == "":
		return "", fmt.Errorf("no command: %w", ErrInvalidSpec)
	case spec.Resources.CPU < 0 || spec.Resources.MemoryMB < 0 || spec.Resources.GPU.Count < 0:
		return "", fmt.Errorf("negative resources %+v: %w", spec.Resources, ErrInvalidSpec)
	}
	for _, b := range spec.ReadOnlyBinds {
		if !filepath.IsAbs(b) {
			return "", fmt.Errorf("read-only bind %q: not absolute: %w", b, ErrInvalidSpec)
		}
		if _, err := os.Stat(b); err != nil {
			return "", fmt.Errorf("read-only bind: %w: %w", err, ErrInvalidSpec)
		}
	}
	if spec.RootFS != "" {
		return p.checkImageCommand(spec)
	}
	argv0, err := lookPath(spec.Command[0], sandboxPath(spec))
	if err != nil {
		return "", fmt.Errorf("command %q: %w: %w", spec.Command[0], err, ErrInvalidSpec)
	}
	return argv0, nil
}

// checkImageCommand checks a RootFS spec: the root file system holds what a
// sandbox mounts over and an executable Command[0]. It returns the path to
// execute: Command[0] itself under bubblewrap, its host path without.
func (p *Process) checkImageCommand(spec Spec) (string, error) {
	if !filepath.IsAbs(spec.RootFS) {
		return "", fmt.Errorf("root file system %q: not absolute: %w", spec.RootFS, ErrInvalidSpec)
	}
	for _, d := range []string{"dev", "proc", "tmp"} {
		if fi, err := os.Stat(filepath.Join(spec.RootFS, d)); err != nil || !fi.IsDir() {
			return "", fmt.Errorf("root file system %s has no /%s directory: %w", spec.RootFS, d, ErrInvalidSpec)
		}
	}
	inImage := spec.Command[0]
	if !path.IsAbs(inImage) || !filepath.IsLocal(strings.TrimPrefix(inImage, "/")) {
		return "", fmt.Errorf("command %q: not an absolute path within the image: %w", inImage, ErrInvalidSpec)
	}
	// The entrypoint may be a symlink within the image: resolve it there, not on the host.
	root, err := os.OpenRoot(spec.RootFS)
	if err != nil {
		return "", fmt.Errorf("root file system: %w: %w", err, ErrInvalidSpec)
	}
	defer root.Close()
	fi, err := root.Stat(strings.TrimPrefix(inImage, "/"))
	if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("command %q: not an executable file in the image: %w", inImage, ErrInvalidSpec)
	}
	if p.isolation == IsolationBubblewrap {
		return inImage, nil
	}
	return filepath.Join(spec.RootFS, inImage), nil
}

// lookPath finds name like exec.LookPath, but in the sandbox's PATH rather
// than the worker's.
func lookPath(name, path string) (string, error) {
	isExec := func(p string) error {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("%s: not an executable file", p)
		}
		return nil
	}
	if strings.Contains(name, "/") {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		return abs, isExec(abs)
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // relative PATH entries would depend on the work dir
		}
		if p := filepath.Join(dir, name); isExec(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w in PATH %s", exec.ErrNotFound, path)
}

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func sandboxPath(spec Spec) string {
	if v, ok := spec.Env["PATH"]; ok {
		return v
	}
	return cmp.Or(os.Getenv("PATH"), defaultPath)
}

// homeDir is HOME and the working directory as the environment sees them.
func homeDir(spec Spec, workDir, isolation string) string {
	if spec.RootFS != "" && isolation == IsolationBubblewrap {
		return WorkDirInImage
	}
	return workDir
}

// sandboxEnv is the environment's whole environment: nothing of the
// worker's leaks in (API keys, database URLs) beyond PATH and LANG.
func sandboxEnv(spec Spec, workDir string, devices []string) []string {
	env := map[string]string{
		"PATH": cmp.Or(os.Getenv("PATH"), defaultPath),
		"HOME": workDir,
	}
	if lang, ok := os.LookupEnv("LANG"); ok {
		env["LANG"] = lang
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	if len(devices) > 0 {
		ids := strings.Join(devices, ",")
		env["CUDA_VISIBLE_DEVICES"] = ids
		env["NVIDIA_VISIBLE_DEVICES"] = ids
	} else {
		// Without GPUs, say so: an unset CUDA_VISIBLE_DEVICES means "all".
		env["CUDA_VISIBLE_DEVICES"] = ""
		env["NVIDIA_VISIBLE_DEVICES"] = "void"
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
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
	workDir, err := os.MkdirTemp(p.root, workDirPattern(spec.ID))
	if err != nil {
		return nil, fmt.Errorf("create work dir: %w", err)
	}
	undo = append(undo, func() { removeAll(workDir) })

	var cg *sandboxCgroup
	if p.cg != nil {
		if cg, err = p.cg.create("sandbox-"+filepath.Base(workDir), spec.Resources); err != nil {
			return nil, err
		}
		undo = append(undo, func() { cg.kill(); cg.remove() })
	}
	pp, err := openPipes(p.isolation == IsolationBubblewrap)
	if err != nil {
		return nil, err
	}
	cmd := p.command(spec, argv0, workDir, devices, pp, cg)
	if err = p.sp.start(cmd); err != nil {
		pp.closeChildEnds()
		pp.closeOurEnds()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	pp.closeChildEnds()

	sb := &processSandbox{
		p:        p,
		id:       spec.ID,
		workDir:  workDir,
		devices:  devices,
		cmd:      cmd,
		cg:       cg,
		stdin:    pp.inW,
		stdout:   pp.outR,
		stderr:   pp.errR,
		logs:     NewLogRing(MaxLogLines),
		done:     make(chan struct{}),
		logsDone: make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	go func() {
		defer close(sb.logsDone)
		ReadLines(pp.errR, "stderr", sb.logs, spec.OnLog)
	}()
	go sb.wait()
	if err := p.identify(ctx, sb, pp.infoR); err != nil {
		return nil, err
	}
	return sb, nil
}

// sandboxPipes are a sandbox's stdio, and bubblewrap's info pipe (fd 3) under bubblewrap: our
// own pipes, not cmd.StdoutPipe, because Wait would close those as soon as the process exits,
// under a reader (the MCP client) that may still be draining them. Passing *os.File also spares
// os/exec's copy goroutines.
type sandboxPipes struct {
	inR, inW, outR, outW, errR, errW, infoR, infoW *os.File
}

func openPipes(info bool) (*sandboxPipes, error) {
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
func (pp *sandboxPipes) closeChildEnds() { closeFiles(pp.inR, pp.outW, pp.errW, pp.infoW) }

// closeOurEnds closes the ends the sandbox reads and writes, when it could not start.
func (pp *sandboxPipes) closeOurEnds() { closeFiles(pp.inW, pp.outR, pp.errR, pp.infoR) }

// command is the command that runs spec's environment (argv0 and its arguments) in workDir: under
// bubblewrap, else in a pid namespace of its own where the host allows; in cgroup cg when there
// is one; with a memory rlimit where that is how memory is limited.
func (p *Process) command(spec Spec, argv0, workDir string, devices []string, pp *sandboxPipes, cg *sandboxCgroup) *exec.Cmd {
	argv := append([]string{argv0}, spec.Command[1:]...)
	if p.rlimitMem && spec.Resources.MemoryMB > 0 {
		// rlimits must be set in the child before it execs the environment,
		// which os/exec cannot do; the shell sets it and execs in place (same
		// pid), so the limit is in force from the first instruction.
		kb := strconv.Itoa(spec.Resources.MemoryMB * 1024)
		argv = append([]string{"/bin/sh", "-c", `ulimit -d ` + kb + ` && exec "$0" "$@"`}, argv...)
	}
	cmd := &exec.Cmd{
		Path:   argv[0],
		Args:   argv,
		Env:    sandboxEnv(spec, homeDir(spec, workDir, p.isolation), devices),
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
		if spec.RootFS == "" {
			binds = append([]string{filepath.Dir(argv0)}, binds...)
		}
		args := bwrapArgs(workDir, spec, binds, gpuDeviceNodes(p.devDir, devices), 3)
		cmd.Path = p.bwrap
		cmd.Args = append(append([]string{p.bwrap}, args...), argv...)
		cmd.ExtraFiles = []*os.File{pp.infoW} // fd 3
	case p.pidNS:
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWPID
	}
	if cg != nil {
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(cg.fd.Fd())
	}
	return cmd
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
		sb.initPID = info.ChildPID
		sb.pidNS = fmt.Sprintf("pid:[%d]", info.PIDNamespace)
		if info.PIDNamespace == 0 { // bubblewrap too old to say
			sb.pidNS = nsOf(info.ChildPID)
		}
	case p.pidNS:
		sb.initPID = sb.cmd.Process.Pid
		// Read now, while it surely runs.
		sb.pidNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", sb.cmd.Process.Pid))
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

// forget drops a stopped sandbox from the provider and frees its slot and GPUs.
func (p *Process) forget(sb *processSandbox) {
	p.gpus.Release(sb.devices)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.live[sb]; ok {
		delete(p.live, sb)
		p.slots--
	}
}

// Close stops every sandbox the provider started, in parallel, and starts no
// more. It waits for Starts in progress. Calling it again is a no-op.
func (p *Process) Close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.starting.Wait()

	p.mu.Lock()
	live := make([]*processSandbox, 0, len(p.live))
	for sb := range p.live {
		live = append(live, sb)
	}
	p.mu.Unlock()

	errs := make([]error, len(live))
	var wg sync.WaitGroup
	for i, sb := range live {
		wg.Go(func() { errs[i] = sb.Stop(ctx) })
	}
	wg.Wait()
	// The spawner's thread is every sandbox's parent: it ends only now, after
	// they are gone, so Pdeathsig cannot fire early.
	p.sp.stop()
	errs = append(errs, p.owner.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sandbox provider: %w", err)
	}
	return nil
}
