package sandbox

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/internal/forkthread"
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
	// GPUs are the device ids this host may hand out: nvidia-smi's indexes or GPU UUIDs, matched
	// to the NVIDIA driver's GPUs where it is installed (an id it does not list is an error);
	// GPUType names their type (one type per provider).
	GPUs    []string
	GPUType string
	// procDir is where the NVIDIA driver's GPU list is read (default /proc); tests point it
	// elsewhere.
	procDir string
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
	// MaxProcesses bounds the processes (and threads) of one sandbox: pids.max where cgroup v2
	// has the pids controller, and RLIMIT_NPROC under bubblewrap (which binds a sandbox that
	// does not run as root); default DefaultMaxProcesses.
	MaxProcesses int
	// MaxOpenFiles bounds the open files of each process of a sandbox (RLIMIT_NOFILE, under
	// bubblewrap); default DefaultMaxOpenFiles.
	MaxOpenFiles int
	// RunAs is the host user (and group) id bubblewrap sandboxes run as, each in a user
	// namespace of its own, when the worker is root: default DefaultRunAs; -1 runs them as root
	// (no capabilities, but RLIMIT_NPROC does not bind root). A worker that is not root runs
	// them as itself. See userns.go for what a sandbox then sees.
	RunAs int
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// default 5s.
	StopGrace time.Duration
	// Relay is a static proctor-relay binary (cmd/proctor-relay). A worker with CAP_SYS_ADMIN
	// makes a Spec.Listen's listener inside the sandbox's network namespace itself; one without
	// (not root) runs the relay in front of the command instead, as the container provider
	// does. Without a relay such a worker refuses a Listen with ErrNoListen.
	Relay string
}

// The bounds of a sandbox's processes and open files where the worker's options set none: a
// browser's threads count as processes, and a busy server's sockets as files.
const (
	DefaultMaxProcesses = 4096
	DefaultMaxOpenFiles = 8192
)

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
	rlimitMem bool        // memory limited by RLIMIT_DATA (when cg does not)
	seccomp   []byte      // the seccomp filter of bubblewrap sandboxes (nil: none)
	maxProcs  int         // ProcessOptions.MaxProcesses
	maxFiles  int         // ProcessOptions.MaxOpenFiles
	runAs     int         // the host user sandboxes run as in a user namespace of their own (0: none)
	userns    *usernsPool // their namespaces, made ahead (with runAs)
	owned     ownedRoots  // image roots owned by runAs, for writable-root sandboxes (with runAs)
	limits    string      // what Limits reports
	// cpuLimit and memLimit say how CPU and memory are limited here ("cpu: not limited (...)").
	cpuLimit, memLimit string
	devDir             string // where GPU device nodes live; tests point it elsewhere
	gpus               *GPUPool
	gpuDevs            map[string]nvidiaGPU // configured GPU id → the driver's GPU, where known
	// gpuInfo is the driver's per-GPU directory in the host's /proc, which bubblewrap sandboxes
	// see only the entries of their own GPUs in ("" where there is none).
	gpuInfo string
	owner   *ownerDir // root is owner.path
	// listenBy is how a Spec.Listen is honoured under bubblewrap: listenSetns, listenRelay
	// (with relay) or "" (refused).
	listenBy string
	relay    string

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
	p.maxProcs, p.maxFiles = cmp.Or(opts.MaxProcesses, DefaultMaxProcesses), cmp.Or(opts.MaxOpenFiles, DefaultMaxOpenFiles)
	if p.maxProcs < 0 || p.maxFiles < 0 {
		return nil, fmt.Errorf("MaxProcesses %d, MaxOpenFiles %d: must not be negative", p.maxProcs, p.maxFiles)
	}
	if p.log == nil {
		p.log = slog.Default()
	}
	if p.gpus, err = NewGPUPool(opts.GPUs, opts.GPUType); err != nil {
		return nil, err
	}
	if len(opts.GPUs) > 0 {
		procDir := cmp.Or(opts.procDir, "/proc")
		driver, err := nvidiaGPUs(procDir)
		if err != nil {
			return nil, err
		}
		if p.gpuDevs, err = resolveGPUs(opts.GPUs, driver); err != nil {
			return nil, err
		}
		if len(driver) > 0 && procDir == "/proc" {
			p.gpuInfo = "/proc/driver/nvidia/gpus"
		}
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

	ok := false
	defer func() {
		if !ok {
			owner.release() //nolint:errcheck // the next provider's sweep removes what is left
			if p.userns != nil {
				p.userns.close()
			}
		}
	}()
	if err := p.isolate(isolation, opts.Bubblewrap, opts.RunAs); err != nil {
		return nil, err
	}
	if err := p.limit(limiter); err != nil {
		return nil, err
	}
	if err := p.listenHow(opts.Relay); err != nil {
		return nil, err
	}

	ok = true
	p.log.Info("sandbox: process provider ready", "root", p.root, "capacity", p.max,
		"isolation", p.isolation, "pid_namespace", p.pidNS || p.isolation == IsolationBubblewrap,
		"limits", p.limits, "gpus", len(opts.GPUs), "gpu_type", opts.GPUType, "listen_inside", cmp.Or(p.listenBy, "no"))
	return p, nil
}

// How a Spec.Listen's listener is made inside a sandbox.
const (
	listenSetns = "setns" // this process joins the sandbox's network namespace to make it
	listenRelay = "relay" // the relay, in front of the command, relays to a socket of ours
)

// listenHow picks how Spec.Listen is honoured: by joining the sandbox's namespace where this
// process may (CAP_SYS_ADMIN), else through the relay when there is one.
func (p *Process) listenHow(relay string) error {
	switch {
	case p.isolation != IsolationBubblewrap:
	case hasCapSysAdmin():
		p.listenBy = listenSetns
	case relay != "":
		// Checked only where it is used: a root worker starts whatever lies beside it.
		if err := CheckStatic(relay); err != nil {
			return fmt.Errorf("agent relay %w", err)
		}
		abs, err := filepath.Abs(relay)
		if err != nil {
			return err
		}
		p.listenBy, p.relay = listenRelay, abs
	}
	return nil
}

// hasCapSysAdmin says whether this process has CAP_SYS_ADMIN in effect, which joining another
// process's network namespace takes.
func hasCapSysAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			return err == nil && caps&(1<<21) != 0 // CAP_SYS_ADMIN
		}
	}
	return false
}

// isolate picks how environments are isolated: bubblewrap when it works here (required when
// isolation says bubblewrap), else none, in a pid namespace of its own where the host allows.
func (p *Process) isolate(isolation, bubblewrap string, runAs int) error {
	if runAs < -1 {
		return fmt.Errorf("RunAs %d: want a user id, or -1 for root", runAs)
	}
	if isolation != IsolationNone {
		bwrap, err := exec.LookPath(cmp.Or(bubblewrap, "bwrap"))
		if err == nil {
			err = probeBubblewrap(context.Background(), bwrap, 0)
		}
		switch {
		case err == nil:
			p.isolation, p.bwrap = IsolationBubblewrap, bwrap
			if os.Geteuid() == 0 && runAs != -1 {
				uid := cmp.Or(runAs, DefaultRunAs)
				if err := probeBubblewrap(context.Background(), bwrap, uid); err != nil {
					return fmt.Errorf("run sandboxes as user %d (RunAs; -1 runs them as root): %w", uid, err)
				}
				p.runAs, p.userns = uid, newUsernsPool(bwrap, uid, 2)
				p.owned.dir, p.owned.uid, p.owned.account = filepath.Join(p.root, ".roots"), uid, hostAccount(uid)
			}
			if p.seccomp, err = seccompProgram(); err != nil {
				p.log.Warn("sandbox: no seccomp filter for sandboxes", "reason", err)
			}
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
		p.pidNS = probeStart(&syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}) == nil
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
			cg.maxProcs = p.maxProcs
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
		// which tracks what is really used. Under bubblewrap it is set from
		// outside (limitInit); without, by the host's shell.
		if p.isolation == IsolationBubblewrap {
			p.rlimitMem = true
			memLimit = "memory: RLIMIT_DATA per process"
		} else if err := probeStart(nil, "-c", "ulimit -d"); err == nil {
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
	p.cpuLimit, p.memLimit = cpuLimit, memLimit
	p.limits = cpuLimit + "; " + memLimit + "; " + p.processLimit()
	return nil
}

// Unenforced lists the limits of res that this host does not enforce: CPU without the cgroup
// v2 cpu controller (no rlimit caps a rate), memory with no limiter at all. (Memory bounded
// per process by RLIMIT_DATA, rather than for the sandbox as a whole, is enforced; the
// worker's limits line says which.)
func (p *Process) Unenforced(res Resources) []string {
	var gaps []string
	if res.CPU > 0 && (p.cg == nil || !p.cg.cpu) {
		gaps = append(gaps, fmt.Sprintf("cpu %g: %s", res.CPU, p.cpuLimit))
	}
	if res.MemoryMB > 0 && (p.cg == nil || !p.cg.memory) && !p.rlimitMem {
		gaps = append(gaps, fmt.Sprintf("memory %d MiB: %s", res.MemoryMB, p.memLimit))
	}
	return gaps
}

// processLimit says how a sandbox's processes and open files are bounded here.
func (p *Process) processLimit() string {
	var procs string
	switch {
	case p.cg != nil && p.cg.pids:
		procs = fmt.Sprintf("processes: pids.max %d", p.maxProcs)
	case p.isolation == IsolationBubblewrap && p.runAs > 0:
		procs = fmt.Sprintf("processes: RLIMIT_NPROC %d (sandboxes run as user %d)", p.maxProcs, p.runAs)
	case p.isolation == IsolationBubblewrap && os.Geteuid() != 0:
		procs = fmt.Sprintf("processes: RLIMIT_NPROC %d", p.maxProcs)
	case p.isolation == IsolationBubblewrap:
		procs = "processes: not limited (sandboxes run as root (RunAs -1), which RLIMIT_NPROC does not bind, and no cgroup v2 pids controller)"
	default:
		procs = "processes: not limited (no bubblewrap and no cgroup v2 pids controller)"
	}
	if p.isolation != IsolationBubblewrap {
		return procs + "; open files: not limited (no bubblewrap)"
	}
	return procs + fmt.Sprintf("; open files: RLIMIT_NOFILE %d per process", p.maxFiles)
}

// probeStart runs /bin/sh with args (default: exit at once) under attr and
// reports whether it started and exited 0.
func probeStart(attr *syscall.SysProcAttr, args ...string) error {
	if len(args) == 0 {
		args = []string{"-c", "exit 0"}
	}
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = attr
	if err := forkthread.Start(cmd); err != nil {
		return err
	}
	return cmd.Wait()
}

// Isolation is what isolates sandboxes here: "bubblewrap" or "none".
func (p *Process) Isolation() string { return p.isolation }

// CanMount says whether this provider's sandboxes can show host directories elsewhere
// (Spec.Mounts): under bubblewrap only.
func (p *Process) CanMount() bool { return p.isolation == IsolationBubblewrap }

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
	devices, err := p.reserve(spec.Resources.GPU, spec.Companion)
	if err != nil {
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	defer p.starting.Done()
	begin := time.Now()
	sb, err := p.launch(ctx, spec, argv0, devices)
	if err != nil {
		p.unreserve(devices, spec.Companion)
		return nil, fmt.Errorf("start sandbox %s: %w", spec.ID, err)
	}
	p.mu.Lock()
	p.live[sb] = struct{}{}
	p.mu.Unlock()
	p.log.Info("sandbox: started", "sandbox", spec.ID, "work_dir", sb.workDir, "pid", sb.cmd.Process.Pid,
		"devices", devices, "elapsed", time.Since(begin))
	return sb, nil
}

// reserve takes a slot (none for a companion) and the GPUs asked for, or neither.
func (p *Process) reserve(req GPURequest, companion bool) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	if !companion && p.slots >= p.max {
		return nil, fmt.Errorf("%d of %d sandboxes running: %w", p.slots, p.max, ErrCapacity)
	}
	devices, err := p.gpus.Allocate(req)
	if err != nil {
		return nil, err
	}
	if !companion {
		p.slots++
	}
	p.starting.Add(1)
	return devices, nil
}

func (p *Process) unreserve(devices []string, companion bool) {
	p.gpus.Release(devices)
	p.mu.Lock()
	if !companion {
		p.slots--
	}
	p.mu.Unlock()
}

// forget drops a stopped sandbox from the provider and frees its slot and GPUs.
func (p *Process) forget(sb *processSandbox) {
	p.gpus.Release(sb.devices)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.live[sb]; ok {
		delete(p.live, sb)
		if !sb.companion {
			p.slots--
		}
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
	if p.userns != nil {
		p.userns.close()
	}
	errs = append(errs, p.owner.release())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close sandbox provider: %w", err)
	}
	return nil
}
