package container

import (
	"archive/tar"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/relayproto"
	"github.com/proctorhq/proctor/internal/sandbox"
)

// A sandbox within a container whose root is writable (Spec.Within: a brought agent inside a
// Harbor task) runs in that very container, through the engine's exec: the task's root, its
// processes, its network namespace and its limits are the agent's too, and what either changes
// the other sees, as Harbor runs agents in the task's container. An engine cannot share one
// container's copy-on-write layer with another container, hence a process of the same one.
//
//   - Its mounts (the agent's image) are copied into the container at their targets through
//     the engine's archive API (an engine binds nothing into a running container); the copy
//     lives in the container's own layer and goes with it.
//   - Its listener (Spec.Listen, which it needs) is a unix socket in the directory the
//     container was given for it when it was made (box.inner), served by the relay, which runs
//     in front of the command as for any container with a listener.
//   - The engine stops no exec: the relay's stdin is the worker's hold on the command
//     (--lifeline, as for a pod's ephemeral container). Stop closes it, the relay stops the
//     command (SIGTERM, SIGKILL after relayproto.LifelineGrace); one that outlives that is
//     killed by its process id, which the engine reports on its own host.

// startWithin runs spec as an exec of host's container.
func (p *Provider) startWithin(ctx context.Context, spec sandbox.Spec, host *box) (_ *inner, err error) {
	switch {
	case host.inner == "":
		return nil, sandbox.Invalid("container %s was made without the relay (container.Options.Relay): nothing can run inside it", host.ID())
	case spec.Listen == nil:
		return nil, sandbox.Invalid("the container provider runs a sandbox within a container only with a listener inside (Spec.Listen)")
	case spec.Resources.GPU.Count > 0:
		return nil, sandbox.Invalid("a sandbox within a container takes no GPUs of its own")
	case spec.WorkDir != "" && spec.WorkDir != host.work:
		return nil, sandbox.Invalid("within %s, it works in that container's work dir", host.ID())
	}
	// One at a time: the container was given one place for its listener.
	if !host.innerBusy.CompareAndSwap(false, true) {
		return nil, sandbox.Invalid("container %s runs another sandbox within it", host.ID())
	}
	started := false
	defer func() {
		if !started {
			host.innerBusy.Store(false)
		}
	}()
	for _, m := range spec.Mounts {
		if err := p.copyInto(ctx, host.container, m); err != nil {
			return nil, err
		}
	}
	if err := sandbox.ListenForRelayIn(host.inner, spec.Listen); err != nil {
		return nil, err
	}
	socket := filepath.Join(host.inner, sandbox.RelaySocket)
	defer func() {
		if err != nil {
			os.Remove(socket)
		}
	}()
	// An exec inherits the container's variables: those the container was given (the launching
	// member's secrets, its egress proxy's) are blanked unless the spec gives them anew.
	env := []string{"HOME=" + sandbox.WorkDirInImage}
	for _, k := range slices.Sorted(maps.Keys(host.env)) {
		if _, ok := spec.Env[k]; !ok {
			env = append(env, k+"=")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		env = append(env, k+"="+spec.Env[k])
	}
	argv := relayproto.Command(relayInContainer, true, fmt.Sprintf("127.0.0.1:%d", spec.Listen.Port),
		path.Join(innerPortInContainer, sandbox.RelaySocket), spec.Command)
	created, err := p.cli.ExecCreate(ctx, host.container, client.ExecCreateOptions{
		Cmd: argv, Env: env, WorkingDir: cmp.Or(spec.Dir, sandbox.WorkDirInImage), User: spec.User,
		AttachStdin: true, AttachStdout: true, AttachStderr: true,
	})
	if err != nil {
		return nil, fmt.Errorf("exec in container %s: %w", host.ID(), err)
	}
	att, err := p.cli.ExecAttach(ctx, created.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("start its exec in container %s: %w", host.ID(), err)
	}
	b := &inner{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, host: host, exec: created.ID, att: att, socket: socket}
	started = true
	b.follow(spec)
	return b, nil
}

// copyInto copies the directory m.Source into container id at m.Target (made, with the
// parents it lacks below the target's top directory, which must exist: /tmp), its files' modes
// kept, owned by the container's root: first the target's folders, then the tree into it
// (archive.WriteTar).
func (p *Provider) copyInto(ctx context.Context, id string, m sandbox.Mount) error {
	if m.Writable {
		return sandbox.Invalid("mount %s: a sandbox within a container is shown copies, read-only in intent: not a writable mount", m.Target)
	}
	top, below, ok := strings.Cut(path.Clean(m.Target)[1:], "/")
	if !ok || top == "" || below == "" {
		return sandbox.Invalid("mount %s: a sandbox within a container is shown copies below a top directory of its container's (/tmp/…)", m.Target)
	}
	fi, err := os.Stat(m.Source)
	if err != nil {
		return fmt.Errorf("copy %s into container %s: %w", m.Source, id, err)
	}
	// Into the top directory, which neither stream has an entry for: an engine applies an
	// entry's mode and owner to a directory that exists (/tmp would lose its 1777).
	copies := []struct {
		dest  string
		write func(io.Writer) error
	}{
		{"/" + top, func(w io.Writer) error { return dirEntries(w, below, fi.Mode().Perm()) }},
		{m.Target, func(w io.Writer) error { _, err := archive.WriteTar(w, m.Source, nil); return err }},
	}
	for _, c := range copies {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(c.write(pw)) }()
		_, err := p.cli.CopyToContainer(ctx, id, client.CopyToContainerOptions{DestinationPath: c.dest, Content: pr})
		pr.CloseWithError(errors.New("the copy ended")) // the writer stops, if the engine stopped reading
		if err != nil {
			return fmt.Errorf("copy %s into container %s at %s: %w", m.Source, id, m.Target, err)
		}
	}
	return nil
}

// dirEntries writes a tar stream of the folder rel (a relative path) and its parents, the
// parents 0755 and rel itself mode, owned by root.
func dirEntries(w io.Writer, rel string, mode fs.FileMode) error {
	tw := tar.NewWriter(w)
	var dirs []string
	for d := rel; d != "."; d = path.Dir(d) {
		dirs = append([]string{d}, dirs...)
	}
	epoch := time.Unix(0, 0)
	for _, d := range dirs {
		m := int64(0o755)
		if d == rel {
			m = int64(mode)
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: m, ModTime: epoch}); err != nil {
			return err
		}
	}
	return tw.Close()
}

// inner is a sandbox within a container: an exec of it.
type inner struct {
	*sandbox.Lifecycle
	p      *Provider
	host   *box
	exec   string
	att    client.ExecAttachResult
	stdout *io.PipeReader
	socket string // its listener's socket, on this host
}

var _ sandbox.Sandbox = (*inner)(nil)

// Stdin takes nothing: the exec's stdin is the relay's lifeline (the command's is /dev/null).
func (b *inner) Stdin() io.WriteCloser { return discard{} }
func (b *inner) Stdout() io.ReadCloser { return b.stdout }
func (b *inner) WorkDir() string       { return b.host.work }
func (b *inner) Devices() []string     { return nil }

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// follow demultiplexes the exec's stream into stdout and the log; once it ends, the exec has
// ended, and its exit status says how.
func (b *inner) follow(spec sandbox.Spec) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	b.stdout = outR
	go func() {
		sandbox.ReadLines(errR, "stderr", b.LogRing(), spec.OnLog)
		io.Copy(io.Discard, errR) //nolint:errcheck // drain, so the demultiplexer never blocks
	}()
	go func() {
		_, err := stdcopy.StdCopy(outW, errW, b.att.Reader)
		outW.CloseWithError(cmp.Or(err, io.EOF))
		errW.Close()
		b.Exited("sandbox "+b.ID(), b.exitStatus())
	}()
}

// exitStatus is how the exec ended, once its stream has: its exit status (the engine may take
// a moment to record it).
func (b *inner) exitStatus() error {
	ctx := context.Background()
	for i := 0; ; i++ {
		res, err := b.p.cli.ExecInspect(ctx, b.exec, client.ExecInspectOptions{})
		switch {
		case err != nil:
			return fmt.Errorf("the exec in container %s: %w", b.host.ID(), err)
		case !res.Running:
			return sandbox.ExitStatus(res.ExitCode)
		case i == 50:
			return fmt.Errorf("the exec in container %s: its stream ended, and the engine says it runs", b.host.ID())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the command through its lifeline, kills it by its process id should it outlive the
// relay's grace, and removes its listener's socket.
func (b *inner) Stop(ctx context.Context) error {
	return b.StopOnce(func() error {
		var errs []error
		select {
		case <-b.Done():
		default:
			b.att.CloseWrite() //nolint:errcheck // the relay stops the command once its stdin ends
			select {
			case <-b.Done():
			case <-time.After(relayproto.LifelineGrace + 5*time.Second):
				if err := b.kill(); err != nil {
					errs = append(errs, err)
				}
				select {
				case <-b.Done():
				case <-time.After(10 * time.Second):
					errs = append(errs, fmt.Errorf("sandbox %s: its exec in container %s did not end", b.ID(), b.host.ID()))
				}
			}
		}
		b.att.Close()
		if err := os.Remove(b.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
		b.host.innerBusy.Store(false)
		b.p.slots.Release(b)
		return errors.Join(errs...)
	})
}

// kill kills the exec's process (the relay) by the id the engine reports on its host.
func (b *inner) kill() error {
	res, err := b.p.cli.ExecInspect(context.Background(), b.exec, client.ExecInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err) || err == nil && !res.Running:
		return nil
	case err != nil:
		return err
	case res.PID <= 0:
		return fmt.Errorf("sandbox %s: its exec runs on and the engine names no process to kill", b.ID())
	}
	// The id is the engine's host's: it is this worker's process only if it is in the container's
	// cgroup as this worker sees it (a worker in a container of its own sees other processes).
	if cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", res.PID)); err != nil || !strings.Contains(string(cg), b.host.container) {
		return fmt.Errorf("sandbox %s: its exec runs on, and process %d the engine names is not one of its container's here: it cannot be killed from this worker", b.ID(), res.PID)
	}
	if err := syscall.Kill(res.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("sandbox %s: kill its exec (pid %d): %w", b.ID(), res.PID, err)
	}
	return nil
}
