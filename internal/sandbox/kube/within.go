package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/proctorhq/proctor/internal/relayproto"
	"github.com/proctorhq/proctor/internal/sandbox"
)

// A sandbox within another's pod (Spec.Within: a brought agent inside its environment) is an
// ephemeral container of that pod: it runs its own image, in the pod's work dir and /tmp (the
// same volumes), in the pod's network namespace, under the pod's resources (an ephemeral
// container has none of its own). Kubernetes neither removes nor stops an ephemeral container,
// so the relay runs in front of its command with its stdin as the lifeline: the box holds the
// attached stdin open, and Stop closes it, upon which the relay stops the command. The pod's
// deletion (the environment's stop) ends it too.

// startWithin adds spec's ephemeral container to host's pod, waits for it to run, attaches to
// it and makes its listener.
func (p *Provider) startWithin(ctx context.Context, spec sandbox.Spec, host *box) (_ *box, err error) {
	image, err := p.push(ctx, spec.Image, true)
	if err != nil {
		return nil, err
	}
	pods := p.o.Client.CoreV1().Pods(p.o.Namespace)
	pod, err := pods.Get(ctx, host.pod, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("the pod to run within: %w", err)
	}
	w, err := pods.Watch(context.WithoutCancel(ctx), metav1.ListOptions{LabelSelector: LabelSandbox + "=" + pod.Labels[LabelSandbox]})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	for _, m := range spec.Mounts {
		if err = p.copyIn(ctx, pod, w, m); err != nil {
			w.Stop()
			return nil, err
		}
		// As it is now: the copy's status updates came after the pod that added it.
		if pod, err = pods.Get(ctx, host.pod, metav1.GetOptions{}); err != nil {
			w.Stop()
			return nil, fmt.Errorf("the pod to run within: %w", err)
		}
	}
	name := "agent-" + sandbox.RandomSuffix()
	spec, token := withRelayToken(spec)
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, p.ephemeralContainer(spec, image, name))
	if pod, err = pods.UpdateEphemeralContainers(ctx, pod.Name, pod, metav1.UpdateOptions{}); err != nil {
		w.Stop()
		return nil, fmt.Errorf("add an ephemeral container to pod %s: %w", host.pod, err)
	}
	b := &box{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, pod: pod.Name, container: name, ephemeral: true, events: w}
	if pod, err = b.waitRunning(ctx, spec, pod); err != nil {
		// The container may yet start (its image still pulling), with no one to stop it.
		w.Stop()
		return nil, fmt.Errorf("%w (%w)", err, p.abandon(host.pod, "an agent's ephemeral container did not start in time"))
	}
	// Attached first: from here on, a failure stops it through the lifeline.
	inR, inW := io.Pipe()
	b.lifeline = inW
	b.attach(ctx, spec, pod, inR)
	if err := b.listen(ctx, spec, token); err != nil {
		inW.Close()
		// The relay's grace, whatever is left of the start's context.
		if !b.awaitEnd(context.Background()) {
			err = fmt.Errorf("%w (%w)", err, p.abandon(host.pod, "an agent's ephemeral container could not be stopped"))
		}
		return nil, err
	}
	return b, nil
}

// lifelineEnded follows an ephemeral container whose attachment, which holds its lifeline,
// ended before Stop (err says how, nil when its stream just ended): its command exited, or the
// relay stops it now (and its exit says so: ErrLost). One that does not end within the relay's
// grace runs with no one to stop it: its pod is deleted.
func (b *box) lifelineEnded(err error) {
	if !b.awaitEnd(context.Background()) {
		why := "the hold on an agent's ephemeral container ended and it did not stop"
		if err != nil {
			why += " (" + err.Error() + ")"
		}
		b.p.abandon(b.pod, why) //nolint:errcheck // logged
	}
}

// ephemeralContainer is the container that runs spec from image (with the relay) within a pod
// that Pod made: locked down as that pod's container is, with its volumes, and spec's mounts
// (copied in by copyIn) read-only from the /tmp volume.
func (p *Provider) ephemeralContainer(spec sandbox.Spec, image, name string) corev1.EphemeralContainer {
	command := relayCommand(spec, true)
	mounts := volumeMounts()
	for _, m := range spec.Mounts {
		mounts = append(mounts, corev1.VolumeMount{Name: agentVolume, MountPath: m.Target, ReadOnly: true})
	}
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: command[:1], Args: command[1:], Env: containerEnv(spec), WorkingDir: cmp.Or(spec.Dir, sandbox.WorkDirInImage), Stdin: true, StdinOnce: true,
		SecurityContext: lockedDown(false), VolumeMounts: mounts,
	}}
}

// copyIn shows m's image in pod: an ephemeral container of that image (with the relay added)
// copies its root file system into the pod's agent volume (the relay's copy mode), which the
// pod's own container does not mount: the environment can neither read nor change what the
// agent runs. copyIn waits, on w, until the copy has ended, successfully or not. A copy that
// neither ends nor fails within ctx leaves its container to end by itself (it only copies).
func (p *Provider) copyIn(ctx context.Context, pod *corev1.Pod, w watch.Interface, m sandbox.Mount) error {
	image, err := p.push(ctx, m.Image, true)
	if err != nil {
		return err
	}
	name, podName := "copy-"+sandbox.RandomSuffix(), pod.Name
	pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
		Command: []string{relayInImage, relayproto.CopyRootFlag, m.Target}, WorkingDir: "/",
		SecurityContext: lockedDown(false), VolumeMounts: []corev1.VolumeMount{{Name: agentVolume, MountPath: m.Target}},
		// Its last lines are its termination message when it fails: they say why.
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
	}})
	pods := p.o.Client.CoreV1().Pods(p.o.Namespace)
	if pod, err = pods.UpdateEphemeralContainers(ctx, podName, pod, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("add an ephemeral container to pod %s: %w", podName, err)
	}
	for {
		for _, st := range pod.Status.EphemeralContainerStatuses {
			if st.Name != name {
				continue
			}
			switch {
			case st.State.Terminated != nil && st.State.Terminated.ExitCode == 0:
				return nil
			case st.State.Terminated != nil:
				t := st.State.Terminated
				return fmt.Errorf("copying image %s into pod %s failed (exit status %d, %s): %s", m.Image.Ref, podName, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			case st.State.Waiting != nil && cannotStart[st.State.Waiting.Reason]:
				return fmt.Errorf("copying image %s into pod %s: %s: %s", m.Image.Ref, podName, st.State.Waiting.Reason, st.State.Waiting.Message)
			}
		}
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return fmt.Errorf("pod %s ended while image %s was copied into it", podName, m.Image.Ref)
		}
		next, err := nextPod(ctx, w, pod, "while image "+m.Image.Ref+" was copied into it")
		switch {
		case err != nil && errors.Is(err, ctx.Err()):
			return fmt.Errorf("copying image %s into pod %s did not end: %w", m.Image.Ref, podName, err)
		case err != nil:
			return err
		}
		pod = next
	}
}
