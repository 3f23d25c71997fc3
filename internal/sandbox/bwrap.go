package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/proctorhq/proctor/internal/forkthread"
)

// Isolation modes, as accepted by ProcessOptions.Isolation and reported by
// Process.Isolation.
const (
	IsolationAuto       = "auto"
	IsolationBubblewrap = "bubblewrap"
	IsolationNone       = "none"
)

// bwrapMounts are what a sandbox sees beside its root file system and its work dir: read-only
// host paths at the same place (the command's directory, say), mounts elsewhere (in order, a
// later one over an earlier), GPU device nodes, and Hide, a host directory covered by an empty
// tmpfs (the provider's root, where other sandboxes' work dirs and sockets live, in a sandbox
// that sees the host's root).
type bwrapMounts struct {
	roBinds  []string
	mounts   []bwrapMount
	devNodes []string
	hide     string
	// gpuInfo, when set, covers the driver's per-GPU directory in /proc, showing only the
	// sandbox's own GPUs there.
	gpuInfo *gpuInfoMask
	// writableRoot, when set, is the sandbox's own overlay of its image (writableroot.go),
	// bound as its root, writable, instead of the image's read-only root.
	writableRoot string
}

// gpuInfoMask covers dir (/proc/driver/nvidia/gpus) with an empty tmpfs and shows the entries
// keep (bus locations) of it again.
type gpuInfoMask struct {
	dir  string
	keep []string
}

// bwrapMount shows the host path src at dst, read-only unless writable.
type bwrapMount struct {
	src, dst string
	writable bool
}

// bwrapArgs builds bubblewrap's arguments for one sandbox, up to and including the "--" before
// the command. Later mounts cover earlier ones, so the order matters: the read-only host first,
// then the fresh /dev, /proc and /tmp, then the read-only extras (which may lie under /tmp, as
// test binaries do) and mounts, the hidden root, GPU device nodes, and last the writable work
// dir.
func bwrapArgs(workDir string, spec Spec, m bwrapMounts, infoFD, blockFD int) []string {
	root, bindRoot := "/", "--ro-bind" // the host's, read-only; or an image's root file system
	if spec.RootFS != "" {
		root = spec.RootFS
	}
	if m.writableRoot != "" {
		root, bindRoot = m.writableRoot, "--bind"
	}
	args := []string{
		"--die-with-parent",
		"--new-session", // no controlling terminal to push input into (TIOCSTI)
		"--unshare-pid", "--unshare-ipc", "--unshare-uts",
		// Run by a root worker, bubblewrap would leave the sandbox every capability: with them
		// it could remount its read-only root, make device nodes or leave its namespaces.
		"--cap-drop", "ALL",
		bindRoot, root, "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		// Always a network namespace of its own, with only its loopback: the worker's (where the
		// platform's services listen, and its host's networks) is never shared. A sandbox allowed
		// the network reaches out through the listener its caller serves inside (Spec.Network).
		"--unshare-net",
	}
	for _, p := range m.roBinds {
		args = append(args, "--ro-bind", p, p)
	}
	for _, mt := range m.mounts {
		args = append(args, map[bool]string{true: "--bind", false: "--ro-bind"}[mt.writable], mt.src, mt.dst)
	}
	// After the read-only binds, one of which may hold the sandbox root (a command in the
	// directory the root is under): they must not show it again.
	if m.hide != "" && m.hide != "/" && spec.RootFS == "" {
		args = append(args, "--tmpfs", m.hide)
	}
	for _, n := range m.devNodes {
		args = append(args, "--dev-bind", n, filepath.Join("/dev", filepath.Base(n)))
	}
	if m.gpuInfo != nil {
		args = append(args, "--tmpfs", m.gpuInfo.dir)
		for _, bus := range m.gpuInfo.keep {
			d := filepath.Join(m.gpuInfo.dir, bus)
			args = append(args, "--ro-bind", d, d)
		}
	}
	inside := workDir
	if spec.RootFS != "" {
		inside = WorkDirInImage
	}
	chdir := inside
	if spec.Dir != "" {
		chdir = spec.Dir
	}
	args = append(args,
		"--bind", workDir, inside,
		"--chdir", chdir,
		"--hostname", "sandbox",
	)
	if infoFD > 0 {
		args = append(args, "--info-fd", fmt.Sprint(infoFD))
	}
	if blockFD > 0 {
		// The command waits until a byte can be read here: the listener inside is made first.
		args = append(args, "--block-fd", fmt.Sprint(blockFD))
	}
	return append(args, "--")
}

// gpuNodes lists the device nodes that give access to the GPUs ids: /dev/nvidia<minor> for each
// (the minor the driver gives, or the id itself where the driver is not read) and the shared
// control nodes, those that exist. A MIG id gets no node of its own: which node it lives on is
// not knowable from the id alone.
func (p *Process) gpuNodes(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	var names []string
	for _, id := range ids {
		if g, ok := p.gpuDevs[id]; ok {
			names = append(names, "nvidia"+strconv.Itoa(g.minor))
		} else if isIndex(id) {
			names = append(names, "nvidia"+id)
		}
	}
	names = append(names, "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
	var nodes []string
	for _, n := range names {
		path := filepath.Join(p.devDir, n)
		if _, err := os.Stat(path); err == nil {
			nodes = append(nodes, path)
		}
	}
	return nodes
}

// cudaNames are the names CUDA_VISIBLE_DEVICES gives the GPUs ids inside a sandbox: their UUIDs
// where the driver was read (an index means another device once a sandbox sees only some of
// them), else the ids.
func (p *Process) cudaNames(ids []string) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id
		if g, ok := p.gpuDevs[id]; ok {
			names[i] = g.uuid
		}
	}
	return names
}

// gpuBuses are the driver's directory names (bus locations) of the GPUs ids.
func (p *Process) gpuBuses(ids []string) []string {
	var buses []string
	for _, id := range ids {
		if g, ok := p.gpuDevs[id]; ok {
			buses = append(buses, g.bus)
		}
	}
	return buses
}

// bwrapInfo is what bubblewrap writes to --info-fd once the sandbox's init
// exists.
type bwrapInfo struct {
	ChildPID int `json:"child-pid"`
}

// readBwrapInfo reads the info bubblewrap writes and closes r. It returns
// early with an error when ctx ends or bubblewrap exits without writing it.
func readBwrapInfo(ctx context.Context, r *os.File) (bwrapInfo, error) {
	type result struct {
		info bwrapInfo
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := io.ReadAll(r)
		if err != nil {
			ch <- result{err: err}
			return
		}
		var info bwrapInfo
		if err := json.Unmarshal(b, &info); err != nil {
			ch <- result{err: fmt.Errorf("bubblewrap info %q: %w", b, err)}
			return
		}
		ch <- result{info: info}
	}()
	select {
	case res := <-ch:
		r.Close()
		return res.info, res.err
	case <-ctx.Done():
		r.Close() // unblocks the reader
		return bwrapInfo{}, ctx.Err()
	}
}

// probeBubblewrap checks that bwrap can build the sandboxes this package
// asks for here (user namespaces or privileges, /proc mounting, netns) by
// running `true` in one. Containers often ship the binary but forbid it.
// With uid it runs the sandbox as that user, in a user namespace of its own (runAs).
func probeBubblewrap(ctx context.Context, bwrap string, uid int) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	dir, err := os.MkdirTemp("", "proctor-bwrap-probe-")
	if err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args := append(bwrapArgs(dir, Spec{}, bwrapMounts{roBinds: []string{filepath.Dir(truePath)}}, 0, 0), truePath)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bwrap, args...)
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	if uid > 0 {
		if err := os.Chown(dir, uid, uid); err != nil {
			return fmt.Errorf("probe bubblewrap: %w", err)
		}
		ns, err := newUserns(bwrap, uid)
		if err != nil {
			return fmt.Errorf("probe bubblewrap: %w", err)
		}
		defer ns.Close()
		runAs(cmd, ns, uid)
	}
	if err := forkthread.Start(cmd); err != nil {
		return fmt.Errorf("probe bubblewrap: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("probe bubblewrap: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}
