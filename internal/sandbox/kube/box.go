package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/proctorhq/proctor/internal/relayproto"
	"github.com/proctorhq/proctor/internal/sandbox"
)

// box is one pod sandbox.
type box struct {
	*sandbox.Lifecycle
	p       *Provider
	pod     string
	devices []string
	stdin   *io.PipeWriter
	stdout  *io.PipeReader
	events  watch.Interface
	tunnel  *tunnel // the listener of Spec.Listen; nil without
	// container is the pod's container the sandbox is: ContainerName, or an ephemeral
	// container's name for a sandbox within another's pod (see within.go), whose stdin is the
	// relay's lifeline.
	container string
	ephemeral bool
	lifeline  *io.PipeWriter
	// writableRoot: the container's root is writable (Spec.WritableRoot).
	writableRoot bool
}

var _ sandbox.Sandbox = (*box)(nil)

// HasWritableRoot says whether the pod's container has a writable root (Spec.WritableRoot).
func (b *box) HasWritableRoot() bool { return b.writableRoot }

// Stdin is the container's stdin; an ephemeral container's command reads none (its stdin is
// the relay's lifeline), and what is written is dropped.
func (b *box) Stdin() io.WriteCloser {
	if b.ephemeral {
		return discard{}
	}
	return b.stdin
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

func (b *box) Stdout() io.ReadCloser { return b.stdout }
func (b *box) Devices() []string     { return slices.Clone(b.devices) }

// WorkDir is empty: the work dir is the pod's, on its node, not on this host.
func (b *box) WorkDir() string { return "" }

// Pod is the sandbox's pod's name.
func (b *box) Pod() string { return b.pod }

// waitRunning waits until the pod's container runs (or has already run and exited), and returns
// the pod as last seen; it turns what keeps the container from running into an error: a command
// the image lacks is ErrInvalidSpec.
func (b *box) waitRunning(ctx context.Context, spec sandbox.Spec, pod *corev1.Pod) (*corev1.Pod, error) {
	for {
		if st := b.status(pod); st != nil {
			switch {
			case st.State.Running != nil:
				return pod, nil
			case st.State.Terminated != nil:
				t := st.State.Terminated
				if t.Reason == "StartError" || t.Reason == "ContainerCannotRun" {
					return nil, startError(spec, t.Message)
				}
				return pod, nil // it ran, and exited: wait records why
			case st.State.Waiting != nil:
				if w := st.State.Waiting; cannotStart[w.Reason] {
					return nil, startError(spec, w.Reason+": "+w.Message)
				}
			}
		}
		if pod.Status.Phase == corev1.PodFailed {
			return nil, fmt.Errorf("pod %s failed: %s %s", pod.Name, pod.Status.Reason, pod.Status.Message)
		}
		next, err := nextPod(ctx, b.events, pod, "before it started")
		switch {
		case err != nil && errors.Is(err, ctx.Err()):
			why := ""
			for _, c := range pod.Status.Conditions {
				if c.Status != corev1.ConditionTrue && c.Message != "" {
					why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
				}
			}
			return nil, fmt.Errorf("pod %s did not start%s: %w", pod.Name, why, err)
		case err != nil:
			return nil, err
		}
		pod = next
	}
}

// nextPod waits on w for pod's next state (an event of another pod is skipped). It answers why
// none will come: ctx's end (ctx.Err(), for the caller to say what it waited for), or the watch's
// end or the pod's deletion, said as happening during.
func nextPod(ctx context.Context, w watch.Interface, pod *corev1.Pod, during string) (*corev1.Pod, error) {
	for {
		select {
		case <-ctx.Done():
			return pod, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return pod, fmt.Errorf("pod %s: the watch ended %s", pod.Name, during)
			}
			if ev.Type == watch.Deleted {
				return pod, fmt.Errorf("pod %s was deleted %s", pod.Name, during)
			}
			if got, isPod := ev.Object.(*corev1.Pod); isPod && got.Name == pod.Name {
				return got, nil
			}
		}
	}
}

// cannotStart are the waiting reasons of a container that will not start without a change.
var cannotStart = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true,
	"CreateContainerError": true, "CreateContainerConfigError": true, "RunContainerError": true}

func startError(spec sandbox.Spec, why string) error {
	if strings.Contains(why, "executable file not found") || strings.Contains(why, "no such file or directory") ||
		strings.Contains(why, "permission denied") || strings.Contains(why, "is a directory") {
		return sandbox.Invalid("%s cannot run in image %s: %s", spec.Command[0], spec.Image.Ref, why)
	}
	return fmt.Errorf("the container did not start: %s", why)
}

// status is the status of b's container in pod, nil while there is none.
func (b *box) status(pod *corev1.Pod) *corev1.ContainerStatus {
	statuses := pod.Status.ContainerStatuses
	if b.ephemeral {
		statuses = pod.Status.EphemeralContainerStatuses
	}
	for i := range statuses {
		if statuses[i].Name == b.container {
			return &statuses[i]
		}
	}
	return nil
}

// wait follows the pod, last seen as pod, until its container has exited or the pod is gone,
// and records why.
func (b *box) wait(attached <-chan struct{}, pod *corev1.Pod) {
	events := b.events
	defer func() {
		if events != nil {
			events.Stop()
		}
	}()
	// It may have exited before it was attached to.
	why := b.exited(pod)
	for why == nil {
		ev, ok := <-events.ResultChan()
		if !ok {
			// The watch ended (the API server closes them now and then): read the pod again,
			// and watch anew from there.
			time.Sleep(200 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			pods := b.p.o.Client.CoreV1().Pods(b.p.o.Namespace)
			pod, err := pods.Get(ctx, b.pod, metav1.GetOptions{})
			cancel()
			if err == nil {
				if why = b.exited(pod); why == nil {
					events, err = pods.Watch(context.Background(), metav1.ListOptions{LabelSelector: LabelSandbox + "=" + pod.Labels[LabelSandbox],
						ResourceVersion: pod.ResourceVersion})
				}
			}
			if apierrors.IsNotFound(err) {
				why = fmt.Errorf("the pod was deleted: %w", sandbox.ErrLost)
			} else if err != nil {
				why = fmt.Errorf("following the pod: %w: %w", err, sandbox.ErrLost)
			}
			continue
		}
		if ev.Type == watch.Deleted {
			why = fmt.Errorf("the pod was deleted: %w", sandbox.ErrLost)
			if pod, isPod := ev.Object.(*corev1.Pod); isPod {
				why = cmp.Or(b.exited(pod), why)
			}
			continue
		}
		if pod, isPod := ev.Object.(*corev1.Pod); isPod && pod.Name == b.pod {
			why = b.exited(pod)
		}
	}
	// The output of an exited container is complete once its stream ends.
	select {
	case <-attached:
	case <-time.After(2 * time.Second):
	}
	var status sandbox.ExitStatus
	if b.ephemeral && !b.Stopping() && errors.As(why, &status) && status.ExitCode() == relayproto.StoppedStatus &&
		slices.Contains(b.LogRing().Tail(5), relayproto.LifelineEnded) {
		why = fmt.Errorf("the worker's hold on the container broke, and the relay stopped its command (%v): %w", why, sandbox.ErrLost)
	}
	b.Exited(fmt.Sprintf("sandbox %s (pod %s)", b.ID(), b.pod), why)
}

// exited says why b's container in pod has exited, nil while it has not.
// A container stopped because its pod was deleted by someone else (a drain, an eviction, kubectl)
// or because the pod ended without it (an eviction) is lost (ErrLost): its exit status is the
// host's doing, not its command's.
func (b *box) exited(pod *corev1.Pod) error {
	st := b.status(pod)
	if st == nil || st.State.Terminated == nil {
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return fmt.Errorf("the pod %s: %s: %w", strings.ToLower(string(pod.Status.Phase)), cmp.Or(pod.Status.Message, pod.Status.Reason), sandbox.ErrLost)
		}
		return nil
	}
	t := st.State.Terminated
	var why error = sandbox.ExitStatus(t.ExitCode)
	if t.Reason != "" && t.Reason != "Completed" && t.Reason != "Error" {
		why = fmt.Errorf("%w (%s)", why, t.Reason)
	}
	if pod.DeletionTimestamp != nil && !b.Stopping() {
		why = fmt.Errorf("the pod was deleted under it (%v): %w", why, sandbox.ErrLost)
	}
	return why
}

// Stop deletes the pod (SIGTERM, SIGKILL after the grace) and releases its slot and GPUs. An
// ephemeral container is stopped through its lifeline instead (the relay's grace), its pod left.
func (b *box) Stop(ctx context.Context) error {
	if b.ephemeral {
		return b.StopOnce(func() error {
			var err error
			b.lifeline.Close()
			if !b.awaitEnd(ctx) {
				err = fmt.Errorf("the ephemeral container %s of pod %s did not end: %w", b.container, b.pod, b.p.abandon(b.pod, "its agent could not be stopped"))
			}
			if b.tunnel != nil {
				b.tunnel.Close()
			}
			b.p.slots.Release(b)
			return err
		})
	}
	return b.StopOnce(func() error {
		ctx := context.WithoutCancel(ctx)
		grace := sandbox.GraceWithin(ctx, b.p.grace)
		secs := max(0, int64(grace.Round(time.Second)/time.Second))
		var errs []error
		if err := b.p.o.Client.CoreV1().Pods(b.p.o.Namespace).Delete(ctx, b.pod, metav1.DeleteOptions{GracePeriodSeconds: &secs}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete pod: %w", err))
		}
		select {
		case <-b.Done():
		case <-time.After(grace + 10*time.Second):
			errs = append(errs, fmt.Errorf("the pod did not end within %s of its deletion", grace+10*time.Second))
		}
		b.stdin.Close()
		if b.tunnel != nil {
			b.tunnel.Close()
		}
		b.p.gpus.Release(b.devices)
		b.p.slots.Release(b)
		return errors.Join(errs...)
	})
}

// awaitEnd waits for an ephemeral container whose lifeline is closed to end: within the relay's
// grace and some, or ctx.
func (b *box) awaitEnd(ctx context.Context) bool {
	t := time.NewTimer(relayproto.LifelineGrace + 10*time.Second)
	defer t.Stop()
	select {
	case <-b.Done():
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	select {
	case <-b.Done():
		return true
	default:
		return false
	}
}

// abandon deletes pod, an environment's pod in which a command runs that the worker no longer
// controls (an agent whose lifeline could not be held or closed): the environment cannot be
// trusted with it, and its attempt is tried again elsewhere.
func (p *Provider) abandon(pod, why string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	zero := int64(0)
	err := p.o.Client.CoreV1().Pods(p.o.Namespace).Delete(ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil && !apierrors.IsNotFound(err) {
		p.log.Error("sandbox: could not delete a pod with a command out of control", "pod", pod, "why", why, "error", err)
		return fmt.Errorf("%s, and deleting its pod failed: %w", why, err)
	}
	p.log.Warn("sandbox: deleted a pod with a command out of control", "pod", pod, "why", why)
	return fmt.Errorf("%s: its pod was deleted", why)
}
