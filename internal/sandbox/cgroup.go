package sandbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// workerLeaf is the cgroup the worker moves itself into when its own cgroup
// holds processes: cgroup v2 lets a non-root cgroup either hold processes or
// hand controllers to children ("no internal processes"), never both.
const workerLeaf = "proctor-worker"

// cgroupHost says where to read the worker's cgroup from; tests point it at
// fake files.
type cgroupHost struct {
	mountinfo  string // /proc/self/mountinfo
	selfCgroup string // /proc/self/cgroup
	pid        int    // the worker's pid, written to cgroup.procs when it moves
}

func realCgroupHost() cgroupHost {
	return cgroupHost{mountinfo: "/proc/self/mountinfo", selfCgroup: "/proc/self/cgroup", pid: os.Getpid()}
}

// cgroupManager creates one cgroup v2 child per sandbox under parent, with
// the controllers it found usable there.
type cgroupManager struct {
	parent string
	cpu    bool
	memory bool
	pids   bool
	moved  bool // the worker moved itself into parent/proctor-worker
	// maxProcs is each sandbox's pids.max, with the pids controller (0: none).
	maxProcs int
}

// setupCgroups finds the worker's cgroup v2 and makes cpu and memory
// controllers available to sandbox cgroups below it, moving the worker into a
// leaf of its own when that is needed and safe (it is alone in its cgroup).
// It returns an error saying why when cgroups cannot be used, in which case
// nothing was changed.
func setupCgroups(h cgroupHost) (*cgroupManager, error) {
	mount, err := cgroup2Mount(h.mountinfo)
	if err != nil {
		return nil, err
	}
	own, err := ownCgroup(h.selfCgroup)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mount, own)

	// A worker that moved itself earlier (another Process in this worker, or a
	// restart of the provider) finds itself in the leaf: use the leaf's parent.
	if filepath.Base(dir) == workerLeaf {
		parent := filepath.Dir(dir)
		if m, err := usableAt(parent); err == nil {
			m.moved = true
			return m, nil
		}
	}

	avail, err := readWords(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	want := wantedControllers(avail)
	if len(want) == 0 {
		return nil, fmt.Errorf("cgroup v2 at %s: neither cpu nor memory controller available (have %q)", dir, avail)
	}
	if m, err := usableAt(dir); err == nil {
		return m, nil
	}
	// Enabling works directly where the cgroup holds no processes, and in the
	// root cgroup (exempt from the rule).
	if err := enableControllers(dir, want); err == nil {
		return usableAt(dir)
	}
	procs, err := readWords(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	if len(procs) != 1 || procs[0] != strconv.Itoa(h.pid) {
		// Moving other processes (a shell, a supervisor's helpers) is not ours
		// to do.
		return nil, fmt.Errorf("cgroup v2 at %s: controllers not enabled for children and the cgroup holds other processes (%d)", dir, len(procs))
	}
	leaf := filepath.Join(dir, workerLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(h.pid)); err != nil {
		os.Remove(leaf)
		return nil, fmt.Errorf("cgroup v2: move worker into %s: %w", leaf, err)
	}
	if err := enableControllers(dir, want); err != nil {
		// Put the worker back where it was.
		writeFile(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(h.pid))
		os.Remove(leaf)
		return nil, fmt.Errorf("cgroup v2 at %s: %w", dir, err)
	}
	m, err := usableAt(dir)
	if err != nil {
		return nil, err
	}
	m.moved = true
	return m, nil
}

// usableAt reports which wanted controllers are already enabled for children
// of dir and that dir is writable; an error when none is.
func usableAt(dir string) (*cgroupManager, error) {
	on, err := readWords(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return nil, err
	}
	m := &cgroupManager{parent: dir, cpu: slices.Contains(on, "cpu"), memory: slices.Contains(on, "memory"), pids: slices.Contains(on, "pids")}
	if !m.cpu && !m.memory {
		return nil, fmt.Errorf("cgroup v2 at %s: cpu and memory not enabled in cgroup.subtree_control", dir)
	}
	if err := syscall.Access(dir, 2 /* W_OK */); err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: not writable: %w", dir, err)
	}
	return m, nil
}

func wantedControllers(avail []string) []string {
	var want []string
	for _, c := range []string{"cpu", "memory", "pids"} {
		if slices.Contains(avail, c) {
			want = append(want, c)
		}
	}
	return want
}

func enableControllers(dir string, ctrls []string) error {
	var b strings.Builder
	for i, c := range ctrls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + c)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), b.String()); err != nil {
		return fmt.Errorf("enable %s: %w", b.String(), err)
	}
	return nil
}

// describe says what the manager limits, for Process.Limits.
func (m *cgroupManager) describe() string {
	var on []string
	if m.cpu {
		on = append(on, "cpu.max")
	}
	if m.memory {
		on = append(on, "memory.max")
	}
	if m.pids {
		on = append(on, "pids.max")
	}
	return fmt.Sprintf("cgroup v2 %s under %s", strings.Join(on, ", "), m.parent)
}

// sandboxCgroup is one sandbox's cgroup. dir is opened so the child can be
// cloned straight into it (CLONE_INTO_CGROUP): no moment exists in which the
// environment runs unlimited or could fork outside it.
type sandboxCgroup struct {
	dir string
	fd  *os.File
}

func (m *cgroupManager) create(name string, res Resources) (*sandboxCgroup, error) {
	dir := filepath.Join(m.parent, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup: %w", err)
	}
	cg := &sandboxCgroup{dir: dir}
	if err := m.limit(dir, res); err != nil {
		cg.remove()
		return nil, err
	}
	fd, err := os.Open(dir)
	if err != nil {
		cg.remove()
		return nil, fmt.Errorf("open cgroup: %w", err)
	}
	cg.fd = fd
	return cg, nil
}

func (m *cgroupManager) limit(dir string, res Resources) error {
	if res.CPU > 0 && m.cpu {
		const period = 100_000 // µs, the kernel's default
		quota := max(int64(res.CPU*period), 1000)
		if err := writeFile(filepath.Join(dir, "cpu.max"), fmt.Sprintf("%d %d", quota, period)); err != nil {
			return fmt.Errorf("cgroup cpu.max: %w", err)
		}
	}
	if res.MemoryMB > 0 && m.memory {
		if err := writeFile(filepath.Join(dir, "memory.max"), strconv.FormatInt(int64(res.MemoryMB)<<20, 10)); err != nil {
			return fmt.Errorf("cgroup memory.max: %w", err)
		}
		// Without this the limit leaks into swap where the host has it. Absent
		// files (no swap accounting) are fine.
		writeFile(filepath.Join(dir, "memory.swap.max"), "0")
	}
	if m.pids && m.maxProcs > 0 {
		if err := writeFile(filepath.Join(dir, "pids.max"), strconv.Itoa(m.maxProcs)); err != nil {
			return fmt.Errorf("cgroup pids.max: %w", err)
		}
	}
	// On OOM kill the whole sandbox, not one process of it: a half-killed
	// environment is harder to reason about than a dead one.
	writeFile(filepath.Join(dir, "memory.oom.group"), "1")
	return nil
}

// pids lists the processes in the cgroup.
func (cg *sandboxCgroup) pids() []int {
	words, _ := readWords(filepath.Join(cg.dir, "cgroup.procs"))
	var pids []int
	for _, w := range words {
		if pid, err := strconv.Atoi(w); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// kill SIGKILLs every process in the cgroup (cgroup.kill where the kernel
// has it, 5.14+; otherwise one by one).
func (cg *sandboxCgroup) kill() {
	if writeFile(filepath.Join(cg.dir, "cgroup.kill"), "1") == nil {
		return
	}
	for _, pid := range cg.pids() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// remove deletes the cgroup, waiting briefly for killed processes to leave it.
func (cg *sandboxCgroup) remove() error {
	if cg.fd != nil {
		cg.fd.Close()
	}
	var err error
	for range 50 {
		if err = os.Remove(cg.dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup: %w", err)
}

// cgroup2Mount finds where the unified hierarchy is mounted (/sys/fs/cgroup
// on v2-only hosts, /sys/fs/cgroup/unified on hybrid ones).
func cgroup2Mount(mountinfo string) (string, error) {
	b, err := os.ReadFile(mountinfo)
	if err != nil {
		return "", fmt.Errorf("find cgroup v2: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// "36 35 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, typ := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(typ) >= 1 && typ[0] == "cgroup2" {
			return f[4], nil
		}
	}
	return "", errors.New("find cgroup v2: not mounted")
}

// ownCgroup returns the worker's path in the unified hierarchy ("0::/path").
func ownCgroup(selfCgroup string) (string, error) {
	b, err := os.ReadFile(selfCgroup)
	if err != nil {
		return "", fmt.Errorf("find own cgroup: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("find own cgroup: no cgroup v2 entry in " + selfCgroup)
}

func readWords(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}

func writeFile(path, s string) error {
	// O_TRUNC on a cgroup file is harmless and makes fake files in tests
	// behave like the real ones (last write wins).
	return os.WriteFile(path, []byte(s), 0o644)
}
