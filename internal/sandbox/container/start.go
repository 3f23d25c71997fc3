package container

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// start runs spec in a new container: its GPUs, its image loaded, a work dir, then the
// container created, attached to and started. On error it undoes, in reverse, what it did.
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
	work := spec.WorkDir // another sandbox's, left in place
	if work == "" {
		if work, err = os.MkdirTemp(p.root, spec.ID+"-"); err != nil {
			return nil, err
		}
		undo = append(undo, func() { os.RemoveAll(work) })
		// The image decides the user; its work dir must be writable whoever that is.
		if err := os.Chmod(work, 0o777); err != nil {
			return nil, err
		}
	}
	port, err := p.listen(spec)
	if err != nil {
		return nil, err
	}
	if port != "" {
		undo = append(undo, func() { os.RemoveAll(port) })
	}
	// A container with a writable root (a Harbor task's) may take a brought agent inside (see
	// within.go): with the relay, it is given a directory where that agent's listener will be.
	inner := ""
	if spec.WritableRoot && p.relay != "" {
		if inner, err = os.MkdirTemp(p.root, "in-"); err != nil {
			return nil, err
		}
		undo = append(undo, func() { os.RemoveAll(inner) })
		if err := os.Chmod(inner, 0o711); err != nil {
			return nil, err
		}
	}
	id, err := p.create(ctx, spec, work, port, inner, devices)
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
	b := &box{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, container: id, work: work, sharedWork: spec.WorkDir != "", writableRoot: spec.WritableRoot, port: port, inner: inner, env: spec.Env, devices: devices, att: att}
	b.follow(spec)
	return b, nil
}

// Where a container with a listener inside (Spec.Listen) finds the relay and the listener's
// socket.
const (
	relayInContainer = "/.proctor-relay"
	portInContainer  = "/.proctor-port"
	// innerPortInContainer is where a container with a writable root finds the listener's
	// socket of a sandbox within it (within.go).
	innerPortInContainer = "/.proctor-inner"
)

// listen makes spec's listener, when it asks for one, under the provider's root (swept with the
// work dirs): see sandbox.ListenForRelay. It returns the socket's directory, "" without a
// listener.
func (p *Provider) listen(spec sandbox.Spec) (string, error) {
	if spec.Listen == nil {
		return "", nil
	}
	return sandbox.ListenForRelay(p.root, spec.Listen)
}

// stopSignal is the signal a stop sends: the image's own, but SIGTERM to a container the relay
// fronts (it passes SIGTERM on; another signal could end it before the agent).
func stopSignal(port string) string {
	if port != "" {
		return "SIGTERM"
	}
	return ""
}

// create creates spec's container, its work dir bound in (and the relay and the listener's
// directory port, when there is one; and the relay and the directory inner for a sandbox within
// it, when there is one) and the allocated devices passed, and returns its id.
func (p *Provider) create(ctx context.Context, spec sandbox.Spec, work, port, inner string, devices []string) (string, error) {
	env := []string{"HOME=" + sandbox.WorkDirInImage}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	host := p.hostConfig(spec, work, devices)
	argv := spec.Command
	if port != "" || inner != "" {
		host.Binds = append(host.Binds, p.relay+":"+relayInContainer+":ro")
	}
	if port != "" {
		host.Binds = append(host.Binds, port+":"+portInContainer+":ro")
		argv = sandbox.RelayCommand(relayInContainer, portInContainer, spec.Listen.Port, argv)
	}
	if inner != "" {
		host.Binds = append(host.Binds, inner+":"+innerPortInContainer+":ro")
	}
	name := "proctor-" + filepath.Base(work) // unique: the work dir is the container's own
	if spec.WorkDir != "" {
		name += "-" + sandbox.RandomSuffix()
	}
	created, err := p.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{
			Image:        spec.Image.Ref,
			Entrypoint:   argv[:1],
			Cmd:          argv[1:],
			Env:          env,
			WorkingDir:   cmp.Or(spec.Dir, sandbox.WorkDirInImage),
			OpenStdin:    true,
			StdinOnce:    true,
			AttachStdin:  true,
			AttachStdout: true,
			AttachStderr: true,
			Labels:       map[string]string{LabelOwner: p.owner, LabelSandbox: spec.ID},
			StopSignal:   stopSignal(port),
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

// hostConfig is how the engine runs spec's container: a read-only root with a /tmp tmpfs
// (unless the spec asks for a writable one: then the engine's copy-on-write layer, the
// container's own, /tmp in it as on a machine of its own), the
// work dir bound at sandbox.WorkDirInImage, no network (see below), the CPU and memory limits, the
// bound of its processes, and the allocated GPUs as a device request.
func (p *Provider) hostConfig(spec sandbox.Spec, work string, devices []string) *container.HostConfig {
	host := &container.HostConfig{
		NetworkMode:    "none",
		ReadonlyRootfs: !spec.WritableRoot,
		Binds:          []string{work + ":" + sandbox.WorkDirInImage + ":rw"},
		SecurityOpt:    []string{"no-new-privileges"},
		Runtime:        p.runtime,
	}
	if !spec.WritableRoot {
		host.Tmpfs = map[string]string{"/tmp": "rw,nosuid,nodev,mode=1777"}
	}
	for _, m := range spec.Mounts {
		host.Binds = append(host.Binds, m.Source+":"+m.Target+map[bool]string{true: ":rw", false: ":ro"}[m.Writable])
	}
	// NetworkMode none whatever spec.Network says: the engine's networks reach the host and its
	// networks; a sandbox allowed the network goes out through its egress proxy (Spec.Listen).
	host.NanoCPUs = int64(spec.Resources.CPU * 1e9)
	host.Memory = int64(spec.Resources.MemoryMB) << 20
	// The engine's pids limit (a cgroup's pids.max). Open files keep the engine's default ulimit:
	// podman 4.3 fails every container whose request carries a ulimit (it then sets RLIMIT_NPROC
	// beyond what its runtime may).
	host.PidsLimit = &p.maxProcs
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
