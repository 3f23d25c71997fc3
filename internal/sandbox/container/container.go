// Package container is the container sandbox provider: each sandbox is a
// container of a Docker Engine API server (Docker, or Podman's
// `podman system service`), driven with the official Moby client. It runs
// Spec.Image with its entrypoint replaced by Spec.Command, attached over the
// engine's stdio stream (the MCP stdio transport), with a read-only root file
// system, a private writable work dir at sandbox.WorkDirInImage, CPU and
// memory limits, no network but its loopback (a sandbox allowed the network goes out
// through the egress proxy served on Spec.Listen), and GPUs as device requests.
//
// The environment is the container's pid 1, as with `docker run` (no init):
// a command missing from the image then fails Start with ErrInvalidSpec, and
// an environment that does not handle SIGTERM itself is killed after the
// stop grace.
//
// Every container carries the provider's owner label; New removes those a
// previous process of the same owner left behind (after a crash), so a
// restarted worker starts clean.
package container

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/system"
	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Labels on every container the provider creates.
const (
	LabelOwner   = "io.proctor.sandbox.owner"
	LabelSandbox = "io.proctor.sandbox.id"
)

// Options configure the container provider.
type Options struct {
	// Host is the engine's address, e.g. "unix:///var/run/docker.sock";
	// empty means DOCKER_HOST, else the engine's default socket.
	Host string
	// Root is the host directory for the sandboxes' work dirs (created; they
	// go in a subdirectory per owner); default os.TempDir()/proctor-containers.
	// The engine must be able to bind-mount it, so it runs on this host.
	Root string
	// Owner marks this provider's containers (LabelOwner); default the host
	// name. Two providers sharing an engine must have different owners: each
	// removes the other's containers at start otherwise.
	Owner string
	// MaxSandboxes is how many sandboxes may live at once; default 16.
	MaxSandboxes int
	// MaxProcesses bounds each container's processes and threads (the engine's pids limit);
	// default sandbox.DefaultMaxProcesses.
	MaxProcesses int
	// GPUs are the device ids this host may hand out (as the engine's GPU
	// driver names them); GPUType names their type.
	GPUs    []string
	GPUType string
	// GPUDriver is the device request driver for GPUs; default "nvidia".
	GPUDriver string
	// Runtime is the OCI runtime the engine runs containers with; empty for
	// the engine's default.
	Runtime string
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL;
	// default 5s.
	StopGrace time.Duration
	// Logger receives lifecycle logs; default slog.Default().
	Logger *slog.Logger
	// Relay is the path on this host of a static proctor-relay binary (cmd/proctor-relay):
	// with it, a sandbox.Spec.Listen is honoured, the listener a unix socket that the relay,
	// mounted into the container as its entrypoint, serves at the port inside. Empty: a Listen
	// is refused with sandbox.ErrNoListen.
	Relay string
}

// Provider runs sandboxes as containers. It implements sandbox.ImageRunner.
type Provider struct {
	cli       *client.Client
	root      string
	owner     string
	max       int
	grace     time.Duration
	runtime   string
	relay     string
	gpuDriver string
	log       *slog.Logger
	gpus      *sandbox.GPUPool
	slots     *sandbox.Slots
	maxProcs  int64
	// engine is what the engine says it can limit on its host (its /info).
	engine system.Info

	mu      sync.Mutex
	loading map[string]*sync.Mutex // image ref → load lock
}

var _ sandbox.ImageRunner = (*Provider)(nil)

// New connects to the engine, removes the containers and work dirs a previous
// provider of the same owner left, and returns a provider. Call Close when
// done with it.
func New(ctx context.Context, opts Options) (*Provider, error) {
	p := &Provider{
		root:      cmp.Or(opts.Root, filepath.Join(os.TempDir(), "proctor-containers")),
		owner:     opts.Owner,
		max:       cmp.Or(opts.MaxSandboxes, 16),
		maxProcs:  int64(cmp.Or(opts.MaxProcesses, sandbox.DefaultMaxProcesses)),
		grace:     cmp.Or(opts.StopGrace, 5*time.Second),
		runtime:   opts.Runtime,
		gpuDriver: cmp.Or(opts.GPUDriver, "nvidia"),
		log:       cmp.Or(opts.Logger, slog.Default()),
		loading:   map[string]*sync.Mutex{},
	}
	if p.max < 0 {
		return nil, fmt.Errorf("MaxSandboxes %d: must not be negative", p.max)
	}
	p.slots = sandbox.NewSlots(p.max)
	if p.owner == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("container provider owner: %w", err)
		}
		p.owner = h
	}
	var err error
	if p.gpus, err = sandbox.NewGPUPool(opts.GPUs, opts.GPUType); err != nil {
		return nil, err
	}
	// Work dirs live under a directory of the owner's own, which the sweep may empty.
	if p.root, err = filepath.Abs(filepath.Join(p.root, ownerDir(p.owner))); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.root, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox root: %w", err)
	}
	copts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		copts = append(copts, client.WithHost(opts.Host))
	}
	if p.cli, err = client.New(copts...); err != nil {
		return nil, fmt.Errorf("container engine: %w", err)
	}
	if _, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		p.cli.Close()
		return nil, fmt.Errorf("container engine %s does not answer: %w", p.cli.DaemonHost(), err)
	}
	info, err := p.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		p.cli.Close()
		return nil, fmt.Errorf("container engine %s: %w", p.cli.DaemonHost(), err)
	}
	p.engine = info.Info
	if err := p.sweep(ctx); err != nil {
		p.cli.Close()
		return nil, err
	}
	if opts.Relay != "" {
		if p.relay, err = installRelay(opts.Relay, p.root); err != nil {
			p.cli.Close()
			return nil, err
		}
	}
	p.log.Info("sandbox: container provider ready", "engine", p.cli.DaemonHost(), "api", p.cli.ClientVersion(),
		"owner", p.owner, "root", p.root, "capacity", p.max, "gpus", len(opts.GPUs), "gpu_type", opts.GPUType,
		"limits", fmt.Sprintf("cpu %v, memory %v, processes %v (cgroup v%s)", p.engine.CPUCfsQuota, p.engine.MemoryLimit, p.engine.PidsLimit, cmp.Or(p.engine.CgroupVersion, "?")))
	return p, nil
}

var _ sandbox.LimitGaps = (*Provider)(nil)

// Unenforced lists the limits of res that the engine says it cannot apply on its host (no CFS
// quota for CPU, no memory limit): an engine without them runs the container unbounded.
func (p *Provider) Unenforced(res sandbox.Resources) []string { return engineGaps(p.engine, res) }

func engineGaps(engine system.Info, res sandbox.Resources) []string {
	var gaps []string
	if res.CPU > 0 && !engine.CPUCfsQuota {
		gaps = append(gaps, fmt.Sprintf("cpu %g: the container engine cannot limit CPU on its host (no CFS quota)", res.CPU))
	}
	if res.MemoryMB > 0 && !engine.MemoryLimit {
		gaps = append(gaps, fmt.Sprintf("memory %d MiB: the container engine cannot limit memory on its host", res.MemoryMB))
	}
	return gaps
}

// installRelay copies the relay binary at path into root (where the engine bind-mounts from, as
// it does the work dirs: a worker in a container may see the binary where the engine does not),
// after checking that it is a static executable, which runs in any image.
func installRelay(path, root string) (string, error) {
	if err := sandbox.CheckStatic(path); err != nil {
		return "", fmt.Errorf("agent relay %w", err)
	}
	src, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("agent relay: %w", err)
	}
	defer src.Close()
	dst := filepath.Join(root, ".proctor-relay")
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err == nil {
		_, err = io.Copy(out, src)
		err = errors.Join(err, out.Close())
	}
	if err != nil {
		return "", fmt.Errorf("agent relay: %w", err)
	}
	return dst, nil
}

// ownerDir is owner as one safe path element.
func ownerDir(owner string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, "owner-"+owner)
}

// sweep removes what a previous provider of this owner left: its containers and work dirs.
func (p *Provider) sweep(ctx context.Context) error {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", LabelOwner+"="+p.owner)})
	if err != nil {
		return fmt.Errorf("list leftover containers: %w", err)
	}
	for _, c := range res.Items {
		if _, err := p.cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove leftover container %s: %w", c.ID, err)
		}
		p.log.Info("sandbox: removed a container left by an earlier worker", "container", c.ID[:min(12, len(c.ID))], "sandbox", c.Labels[LabelSandbox])
	}
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(p.root, e.Name())); err != nil {
			return fmt.Errorf("remove leftover work dir: %w", err)
		}
	}
	return nil
}

// RunsImages marks the provider as one that runs Spec.Image.
func (p *Provider) RunsImages() {}

// Capacity is the most sandboxes the provider runs at once.
func (p *Provider) Capacity() int { return p.slots.Capacity() }

// CanMount is true: the engine runs on the worker's host, and binds its directories
// (Spec.Mounts).
func (p *Provider) CanMount() bool { return true }

// Running is how many sandboxes hold a slot.
func (p *Provider) Running() int { return p.slots.Running() }

// FreeGPUs is how many GPUs are not allocated.
func (p *Provider) FreeGPUs() int { return p.gpus.Free() }

// Engine is the engine's address.
func (p *Provider) Engine() string { return p.cli.DaemonHost() }

// Close stops every sandbox and starts no more.
func (p *Provider) Close(ctx context.Context) error {
	return errors.Join(p.slots.Close(ctx), p.cli.Close())
}

// Start creates and starts a container for spec.
func (p *Provider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := sandbox.CheckImageSpec(spec, "container"); err != nil {
		return nil, err
	}
	if spec.Listen != nil && p.relay == "" {
		return nil, fmt.Errorf("sandbox %s: no relay to put in the container (container.Options.Relay): %w", spec.ID, sandbox.ErrNoListen)
	}
	for _, m := range spec.Mounts {
		if err := sandbox.CheckHostMount(m); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", spec.ID, err)
		}
		if strings.ContainsRune(m.Target+m.Source, ':') { // a bind is source:target:mode
			return nil, sandbox.Invalid("sandbox %s: mount %s at %s: a bind's paths hold no colon", spec.ID, m.Source, m.Target)
		}
	}
	if spec.Within != nil && sandbox.HasWritableRoot(spec.Within) {
		host, ok := spec.Within.(*box)
		if !ok || host.p != p {
			return nil, sandbox.Invalid("sandbox %s: within %s, which is not a container of this provider", spec.ID, spec.Within.ID())
		}
		return p.slots.Start(spec, func() (sandbox.Sandbox, error) { return p.startWithin(ctx, spec, host) })
	}
	return p.slots.Start(spec, func() (sandbox.Sandbox, error) { return p.start(ctx, spec) })
}
