// Package container is the container sandbox provider: each sandbox is a
// container of a Docker Engine API server (Docker, or Podman's
// `podman system service`), driven with the official Moby client. It runs
// Spec.Image with its entrypoint replaced by Spec.Command, attached over the
// engine's stdio stream (the MCP stdio transport), with a read-only root file
// system, a private writable work dir at sandbox.WorkDirInImage, CPU and
// memory limits, no network unless Spec.Network, and GPUs as device requests.
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
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
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
}

// Provider runs sandboxes as containers. It implements sandbox.ImageRunner.
type Provider struct {
	cli       *client.Client
	root      string
	owner     string
	max       int
	grace     time.Duration
	runtime   string
	gpuDriver string
	log       *slog.Logger
	gpus      *sandbox.GPUPool
	slots     *sandbox.Slots

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
	if err := p.sweep(ctx); err != nil {
		p.cli.Close()
		return nil, err
	}
	p.log.Info("sandbox: container provider ready", "engine", p.cli.DaemonHost(), "api", p.cli.ClientVersion(),
		"owner", p.owner, "root", p.root, "capacity", p.max, "gpus", len(opts.GPUs), "gpu_type", opts.GPUType)
	return p, nil
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
	return p.slots.Start(spec.ID, func() (sandbox.Sandbox, error) { return p.start(ctx, spec) })
}

func (p *Provider) start(ctx context.Context, spec sandbox.Spec) (_ *box, err error) {
	devices, err := p.gpus.Allocate(spec.Resources.GPU)
	if err != nil {
		return nil, err
	}
	var undo []func()
	defer func() {
		if err != nil {
			for _, f := range slices.Backward(undo) {
				f()
			}
		}
	}()
	undo = append(undo, func() { p.gpus.Release(devices) })
	if err := p.ensureImage(ctx, spec.Image); err != nil {
		return nil, err
	}
	work, err := os.MkdirTemp(p.root, spec.ID+"-")
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() { os.RemoveAll(work) })
	// The image decides the user; its work dir must be writable whoever that is.
	if err := os.Chmod(work, 0o777); err != nil {
		return nil, err
	}
	id, err := p.create(ctx, spec, work, devices)
	if err != nil {
		return nil, err
	}
	undo = append(undo, func() {
		p.cli.ContainerRemove(context.WithoutCancel(ctx), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}) //nolint:errcheck // the sweep at the next start catches what this misses
	})
	att, err := p.attach(ctx, id, spec)
	if err != nil {
		return nil, err
	}
	undo = append(undo, att.Close)
	if _, err := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return nil, p.startError(ctx, id, spec, fmt.Errorf("start container: %w", err))
	}
	b := &box{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, container: id, work: work, devices: devices, att: att}
	b.follow(spec)
	return b, nil
}

// create creates spec's container, its work dir bound in and the allocated devices passed, and
// returns its id.
func (p *Provider) create(ctx context.Context, spec sandbox.Spec, work string, devices []string) (string, error) {
	env := []string{"HOME=" + sandbox.WorkDirInImage}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	host := p.hostConfig(spec, work, devices)
	created, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: "proctor-" + filepath.Base(work),
		Config: &container.Config{
			Image:        spec.Image.Ref,
			Entrypoint:   spec.Command[:1],
			Cmd:          spec.Command[1:],
			Env:          env,
			WorkingDir:   sandbox.WorkDirInImage,
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Labels:       map[string]string{LabelOwner: p.owner, LabelSandbox: spec.ID},
		},
		HostConfig: host,
	})
	if err != nil {
		return "", fmt.Errorf("create container: %w", err)
	}
	return created.ID, nil
}

// attach attaches to container id's stdio stream, before it starts, so that no output is lost.
func (p *Provider) attach(ctx context.Context, id string, spec sandbox.Spec) (client.ContainerAttachResult, error) {
	att, err := p.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		// Podman prepares the container when it is attached to, and the client drops the body
		// of a failed attach: a start says why.
		if _, serr := p.cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); serr != nil {
			err = serr
		}
		return client.ContainerAttachResult{}, p.startError(ctx, id, spec, fmt.Errorf("attach to the container: %w", err))
	}
	return att, nil
}

// hostConfig is how the engine runs spec's container: a read-only root with a /tmp tmpfs, the
// work dir bound at sandbox.WorkDirInImage, no network unless asked, the CPU and memory limits,
// and the allocated GPUs as a device request.
func (p *Provider) hostConfig(spec sandbox.Spec, work string, devices []string) *container.HostConfig {
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: true,
		Tmpfs:          map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777"},
		Binds:          []string{work + ":" + sandbox.WorkDirInImage + ":rw"},
		SecurityOpt:    []string{"no-new-privileges"},
		Runtime:        p.runtime,
	}
	if spec.Network {
		host.NetworkMode = ""
	}
	host.NanoCPUs = int64(spec.Resources.CPU * 1e9)
	host.Memory = int64(spec.Resources.MemoryMB) << 20
	if len(devices) > 0 {
		host.DeviceRequests = []container.DeviceRequest{{Driver: p.gpuDriver, DeviceIDs: devices, Capabilities: [][]string{{"gpu"}}}}
	}
	return host
}

// startError explains why container id did not start: an ErrInvalidSpec when its command
// cannot run in the image (engines differ in where they say so: the start's answer, or the
// container's state), else err.
func (p *Provider) startError(ctx context.Context, id string, spec sandbox.Spec, err error) error {
	why := err.Error()
	if got, ierr := p.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); ierr == nil && got.Container.State != nil && got.Container.State.Error != "" {
		why = got.Container.State.Error
	}
	if notRunnable(why) {
		return sandbox.Invalid("%s cannot run in image %s: %s", spec.Command[0], spec.Image.Ref, why)
	}
	if why != err.Error() {
		return fmt.Errorf("%w (%s)", err, why)
	}
	return err
}

// notRunnable says whether an engine's error means the command cannot run in the image.
func notRunnable(msg string) bool {
	return strings.Contains(msg, "executable file not found") || strings.Contains(msg, "no such file or directory") ||
		strings.Contains(msg, "permission denied") || strings.Contains(msg, "is a directory")
}

// ensureImage loads img into the engine unless the engine has it.
func (p *Provider) ensureImage(ctx context.Context, img *sandbox.Image) error {
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", img.Ref, err)
	}
	p.mu.Lock()
	l := p.loading[img.Ref]
	if l == nil {
		l = &sync.Mutex{}
		p.loading[img.Ref] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err == nil {
		return nil
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(img.Load(ctx, pw)) }()
	res, err := p.cli.ImageLoad(ctx, pr, client.ImageLoadWithQuiet(true))
	if err != nil {
		pr.CloseWithError(err)
		return fmt.Errorf("load image %s: %w", img.Ref, err)
	}
	defer res.Close()
	// The answer is a stream of JSON messages; an error arrives as one of them.
	dec := json.NewDecoder(bufio.NewReader(res))
	for {
		var msg struct {
			Error       string `json:"error"`
			ErrorDetail struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&msg); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("load image %s: read the engine's answer: %w", img.Ref, err)
		}
		if m := cmp.Or(msg.ErrorDetail.Message, msg.Error); m != "" {
			return fmt.Errorf("load image %s: %s", img.Ref, m)
		}
	}
	pr.Close()
	if _, err := p.cli.ImageInspect(ctx, img.Ref); err != nil {
		return fmt.Errorf("image %s: loaded, yet the engine does not know it by that name: %w", img.Ref, err)
	}
	p.log.Info("sandbox: loaded an image into the container engine", "image", img.Ref)
	return nil
}

// box is one container sandbox.
type box struct {
	*sandbox.Lifecycle
	p         *Provider
	container string
	work      string
	devices   []string
	att       client.ContainerAttachResult
	stdout    *io.PipeReader
}

var _ sandbox.Sandbox = (*box)(nil)

func (b *box) Stdin() io.WriteCloser { return stdin{b.att} }
func (b *box) Stdout() io.ReadCloser { return b.stdout }
func (b *box) WorkDir() string       { return b.work }
func (b *box) Devices() []string     { return slices.Clone(b.devices) }

// stdin writes to the attached stream; Close half-closes it, which the engine
// passes on to the environment as end of input.
type stdin struct{ att client.ContainerAttachResult }

func (s stdin) Write(p []byte) (int, error) { return s.att.Conn.Write(p) }
func (s stdin) Close() error                { return s.att.CloseWrite() }

// follow demultiplexes the attached stream into the sandbox's stdout and its log, and waits for
// the container to exit.
func (b *box) follow(spec sandbox.Spec) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	b.stdout = outR
	streams := make(chan struct{})
	go func() {
		defer close(streams)
		_, err := stdcopy.StdCopy(outW, errW, b.att.Reader)
		outW.CloseWithError(cmp.Or(err, io.EOF))
		errW.Close()
	}()
	go func() {
		sandbox.ReadLines(errR, "stderr", b.LogRing(), spec.OnLog)
		io.Copy(io.Discard, errR) //nolint:errcheck // drain, so the demultiplexer never blocks
	}()
	go b.wait(streams)
}

// wait waits for the container to exit and records why.
func (b *box) wait(streams <-chan struct{}) {
	w := b.p.cli.ContainerWait(context.Background(), b.container, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
	var why error
	select {
	case res := <-w.Result:
		why = fmt.Errorf("exit status %d", res.StatusCode)
		if res.Error != nil && res.Error.Message != "" {
			why = fmt.Errorf("%w: %s", why, res.Error.Message)
		}
	case err := <-w.Error:
		why = fmt.Errorf("waiting for the container: %w", err)
	}
	// The output of an exited container is complete once its stream ends.
	select {
	case <-streams:
	case <-time.After(2 * time.Second):
	}
	b.Exited("sandbox "+b.ID(), why)
}

// Stop stops the container (SIGTERM, SIGKILL after the grace), removes it and
// its work dir, and releases its slot and GPUs.
func (b *box) Stop(ctx context.Context) error {
	return b.StopOnce(func() error {
		ctx := context.WithoutCancel(ctx)
		grace := sandbox.GraceWithin(ctx, b.p.grace)
		secs := max(0, int(grace.Round(time.Second)/time.Second))
		var errs []error
		select {
		case <-b.Done():
		default:
			if _, err := b.p.cli.ContainerStop(ctx, b.container, client.ContainerStopOptions{Timeout: &secs}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("stop container: %w", err))
			}
		}
		if _, err := b.p.cli.ContainerRemove(ctx, b.container, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("remove container: %w", err))
		}
		select {
		case <-b.Done():
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("the container did not report its exit within 10s of its removal"))
		}
		b.att.Close()
		if err := os.RemoveAll(b.work); err != nil {
			errs = append(errs, err)
		}
		b.p.gpus.Release(b.devices)
		b.p.slots.Release(b)
		return errors.Join(errs...)
	})
}
