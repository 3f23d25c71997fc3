package container

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// box is one container sandbox.
type box struct {
	*sandbox.Lifecycle
	p         *Provider
	container string
	work      string
	// sharedWork: work is another sandbox's (Spec.WorkDir), left in place at Stop.
	sharedWork bool
	// writableRoot: the container's root is writable (Spec.WritableRoot).
	writableRoot bool
	// port is the host directory of a listener's unix socket (Spec.Listen), "" without one.
	port string
	// inner is the host directory where a sandbox within this one listens (within.go), ""
	// for a container that takes none; innerBusy while one runs.
	inner     string
	innerBusy atomic.Bool
	// env are the variables the container was given (Spec.Env), which a sandbox within does
	// not inherit.
	env     map[string]string
	devices []string
	att     client.ContainerAttachResult
	stdout  *io.PipeReader
}

var _ sandbox.Sandbox = (*box)(nil)

func (b *box) Stdin() io.WriteCloser { return stdin{b.att} }
func (b *box) Stdout() io.ReadCloser { return b.stdout }
func (b *box) WorkDir() string       { return b.work }
func (b *box) Devices() []string     { return slices.Clone(b.devices) }
func (b *box) HasWritableRoot() bool { return b.writableRoot }

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
		why = sandbox.ExitStatus(res.StatusCode)
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
		if !b.sharedWork {
			if err := os.RemoveAll(b.work); err != nil {
				errs = append(errs, err)
			}
		}
		for _, d := range []string{b.port, b.inner} {
			if d == "" {
				continue
			}
			if err := os.RemoveAll(d); err != nil {
				errs = append(errs, err)
			}
		}
		b.p.gpus.Release(b.devices)
		b.p.slots.Release(b)
		return errors.Join(errs...)
	})
}
