// Package kube is the Kubernetes sandbox provider: each sandbox is a pod in one namespace,
// created with client-go. The environment's image (a build's docker-save tarball) is pushed to
// a registry the cluster pulls from, and the pod runs it with its entrypoint replaced by
// Spec.Command; the provider attaches to the container's stdin, stdout and stderr (the MCP stdio
// transport, and the environment's log).
//
// Every pod runs with no service account token, no service links, a read-only root file system
// with writable /tmp and /tmp/work (emptyDir), all capabilities dropped, the CPU, memory and
// GPU (nvidia.com/gpu) requests of its Spec as requests and limits, and a label that a deny-all
// NetworkPolicy selects unless the Spec allows the network (then egress is the namespace's
// default; ingress to sandboxes is always denied). Pods carry the provider's owner label: New
// deletes the pods a previous worker of the same owner left (after a crash).
package kube

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/proctorhq/proctor/internal/sandbox"
)

// Labels on every pod the provider creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelOwner     = "proctor.dev/owner"
	LabelSandbox   = "proctor.dev/sandbox"
	// LabelNetwork is "none" (the deny-all policy selects it) or "egress".
	LabelNetwork = "proctor.dev/network"
	// ContainerName is the environment's container in each pod.
	ContainerName = "env"
	// GPUResource is what pods that ask for GPUs request.
	GPUResource corev1.ResourceName = "nvidia.com/gpu"
	// DenyAllPolicy and NoIngressPolicy are the NetworkPolicies New keeps in the namespace.
	DenyAllPolicy   = "proctor-sandbox-deny-all"
	NoIngressPolicy = "proctor-sandbox-no-ingress"
)

// Attacher connects to a running container's stdio, as `kubectl attach -i` does, until the
// stream ends or ctx does. NewAttacher is the real one.
type Attacher interface {
	Attach(ctx context.Context, namespace, pod, container string, stdin io.Reader, stdout, stderr io.Writer) error
}

// Options configure the provider.
type Options struct {
	// Client talks to the cluster; Attacher attaches to pods (see NewAttacher).
	Client   kubernetes.Interface
	Attacher Attacher
	// Namespace holds the sandbox pods and the network policies.
	Namespace string
	// Registry is the repository the environments' images are pushed to and the pods pull
	// from, e.g. "registry.example.com/proctor/envs"; RegistryOptions are ggcr remote options
	// (credentials, transport).
	Registry        string
	RegistryOptions []remote.Option
	// Owner marks this provider's pods (LabelOwner); default the host name. Two workers in
	// one namespace need different owners: each deletes the other's pods at start otherwise.
	Owner string
	// MaxSandboxes is how many pods may live at once; default 16.
	MaxSandboxes int
	// GPUs are the GPU budget of this worker (ids it hands out as tokens; the device plugin
	// picks the devices), of GPUType; pods asking for GPUs request nvidia.com/gpu.
	GPUs    []string
	GPUType string
	// ImagePullSecrets name the Secrets the pods pull their images with.
	ImagePullSecrets []string
	// NodeSelector places every sandbox pod; GPUNodeSelector is added for pods with GPUs.
	NodeSelector    map[string]string
	GPUNodeSelector map[string]string
	// StopGrace is the pods' termination grace; default 5s.
	StopGrace time.Duration
	// Logger receives lifecycle logs; default slog.Default().
	Logger *slog.Logger
}

// Provider runs sandboxes as pods. It implements sandbox.ImageRunner.
type Provider struct {
	o     Options
	owner string
	max   int
	grace time.Duration
	log   *slog.Logger
	gpus  *sandbox.GPUPool
	slots *sandbox.Slots

	mu      sync.Mutex
	pushing map[string]*sync.Mutex // image ref → push lock
	pushed  map[string]string      // image ref → the reference pods pull
}

var _ sandbox.ImageRunner = (*Provider)(nil)

// New checks the namespace, keeps the sandbox network policies there, deletes the pods a
// previous provider of the same owner left, and returns a provider. Call Close when done.
func New(ctx context.Context, o Options) (*Provider, error) {
	switch {
	case o.Client == nil || o.Attacher == nil:
		return nil, errors.New("kubernetes provider: a client and an attacher are required")
	case o.Namespace == "":
		return nil, errors.New("kubernetes provider: a namespace is required")
	case o.Registry == "":
		return nil, errors.New("kubernetes provider: a registry the cluster pulls from is required (--kube-registry)")
	case o.MaxSandboxes < 0:
		return nil, fmt.Errorf("MaxSandboxes %d: must not be negative", o.MaxSandboxes)
	}
	if _, err := name.NewRepository(o.Registry); err != nil {
		return nil, fmt.Errorf("kubernetes provider: registry %q: %w", o.Registry, err)
	}
	p := &Provider{o: o, owner: o.Owner, max: cmp.Or(o.MaxSandboxes, 16), grace: cmp.Or(o.StopGrace, 5*time.Second),
		log: cmp.Or(o.Logger, slog.Default()), pushing: map[string]*sync.Mutex{}, pushed: map[string]string{}}
	p.slots = sandbox.NewSlots(p.max)
	if p.owner == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("kubernetes provider owner: %w", err)
		}
		p.owner = h
	}
	p.owner = labelValue(p.owner)
	var err error
	if p.gpus, err = sandbox.NewGPUPool(o.GPUs, o.GPUType); err != nil {
		return nil, err
	}
	// A worker whose role reaches only its namespace may not read namespaces: the policies
	// below fail clearly if it does not exist.
	if _, err := o.Client.CoreV1().Namespaces().Get(ctx, o.Namespace, metav1.GetOptions{}); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("kubernetes provider: namespace %s: %w", o.Namespace, err)
	}
	for _, np := range NetworkPolicies(o.Namespace) {
		if err := p.keep(ctx, np); err != nil {
			return nil, err
		}
	}
	if err := p.sweep(ctx); err != nil {
		return nil, err
	}
	p.log.Info("sandbox: kubernetes provider ready", "namespace", o.Namespace, "registry", o.Registry, "owner", p.owner,
		"capacity", p.max, "gpus", len(o.GPUs), "gpu_type", o.GPUType)
	return p, nil
}

// NetworkPolicies are the policies every sandbox namespace holds: sandboxes that may not use
// the network can reach nothing and be reached by nothing; no sandbox accepts connections.
func NetworkPolicies(namespace string) []*networkingv1.NetworkPolicy {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelManagedBy: "proctor"}}
	}
	return []*networkingv1.NetworkPolicy{
		{ObjectMeta: meta(DenyAllPolicy), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: "proctor", LabelNetwork: "none"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		}},
		{ObjectMeta: meta(NoIngressPolicy), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: "proctor"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}},
	}
}

// keep creates np, or updates the one there to it.
func (p *Provider) keep(ctx context.Context, np *networkingv1.NetworkPolicy) error {
	nps := p.o.Client.NetworkingV1().NetworkPolicies(p.o.Namespace)
	_, err := nps.Create(ctx, np, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var cur *networkingv1.NetworkPolicy
		if cur, err = nps.Get(ctx, np.Name, metav1.GetOptions{}); err == nil {
			cur.Spec, cur.Labels = np.Spec, np.Labels
			_, err = nps.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("kubernetes provider: network policy %s: %w", np.Name, err)
	}
	return nil
}

// sweep deletes the pods a previous provider of this owner left.
func (p *Provider) sweep(ctx context.Context) error {
	pods := p.o.Client.CoreV1().Pods(p.o.Namespace)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: LabelOwner + "=" + p.owner + "," + LabelManagedBy + "=proctor"})
	if err != nil {
		return fmt.Errorf("list leftover pods: %w", err)
	}
	zero := int64(0)
	for _, pod := range list.Items {
		if err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete leftover pod %s: %w", pod.Name, err)
		}
		p.log.Info("sandbox: deleted a pod left by an earlier worker", "pod", pod.Name, "sandbox", pod.Labels[LabelSandbox])
	}
	return nil
}

// RunsImages marks the provider as one that runs Spec.Image.
func (p *Provider) RunsImages() {}

// Capacity is the most sandboxes the provider runs at once.
func (p *Provider) Capacity() int { return p.slots.Capacity() }

// Running is how many sandboxes hold a slot.
func (p *Provider) Running() int { return p.slots.Running() }

// Namespace is where the pods run.
func (p *Provider) Namespace() string { return p.o.Namespace }

// Close stops every sandbox and starts no more.
func (p *Provider) Close(ctx context.Context) error { return p.slots.Close(ctx) }

// Start pushes spec's image if the registry lacks it, creates its pod, waits for the container
// to run and attaches to it.
func (p *Provider) Start(ctx context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	if err := sandbox.CheckImageSpec(spec, "kubernetes"); err != nil {
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
	image, err := p.push(ctx, spec.Image)
	if err != nil {
		return nil, err
	}
	pod := p.Pod(spec, image, len(devices))
	pods := p.o.Client.CoreV1().Pods(p.o.Namespace)
	// The watch starts before the pod exists, so that no change of its state is missed; it
	// follows the pod for the sandbox's life, past the start's context.
	w, err := pods.Watch(context.WithoutCancel(ctx), metav1.ListOptions{LabelSelector: LabelSandbox + "=" + pod.Labels[LabelSandbox]})
	if err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	undo = append(undo, w.Stop)
	if pod, err = pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create pod: %w", err)
	}
	podName := pod.Name
	undo = append(undo, func() {
		zero := int64(0)
		pods.Delete(context.WithoutCancel(ctx), podName, metav1.DeleteOptions{GracePeriodSeconds: &zero}) //nolint:errcheck // the sweep at the next start catches what this misses
	})
	b := &box{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, pod: pod.Name, devices: devices, events: w}
	if pod, err = b.waitRunning(ctx, spec, pod); err != nil {
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	b.stdin, b.stdout = inW, outR
	attached := make(chan struct{})
	go func() {
		defer close(attached)
		err := p.o.Attacher.Attach(context.WithoutCancel(ctx), p.o.Namespace, pod.Name, ContainerName, inR, outW, errW)
		inR.CloseWithError(cmp.Or(err, io.EOF))
		outW.CloseWithError(cmp.Or(err, io.EOF))
		errW.Close()
	}()
	go func() {
		sandbox.ReadLines(errR, "stderr", b.LogRing(), spec.OnLog)
		io.Copy(io.Discard, errR) //nolint:errcheck // drain, so the stream never blocks
	}()
	go b.wait(attached, pod)
	return b, nil
}

// Pod is the pod that runs spec from image (a reference the cluster pulls) with gpus GPUs.
func (p *Provider) Pod(spec sandbox.Spec, image string, gpus int) *corev1.Pod {
	network := "none"
	if spec.Network {
		network = "egress"
	}
	// Two tries, or two sandboxes of one id, never share a pod name.
	sandboxLabel := labelValue(spec.ID) + "-" + strconv.FormatUint(rand.Uint64()%(36*36*36*36*36), 36)
	env := []corev1.EnvVar{{Name: "HOME", Value: sandbox.WorkDirInImage}}
	for _, k := range slices.Sorted(maps.Keys(spec.Env)) {
		if k != "HOME" {
			env = append(env, corev1.EnvVar{Name: k, Value: spec.Env[k]})
		}
	}
	res := corev1.ResourceList{}
	if spec.Resources.CPU > 0 {
		res[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(spec.Resources.CPU*1000), resource.DecimalSI)
	}
	if spec.Resources.MemoryMB > 0 {
		res[corev1.ResourceMemory] = *resource.NewQuantity(int64(spec.Resources.MemoryMB)<<20, resource.BinarySI)
	}
	selector := maps.Clone(p.o.NodeSelector)
	var tolerations []corev1.Toleration
	if gpus > 0 {
		res[GPUResource] = *resource.NewQuantity(int64(gpus), resource.DecimalSI)
		if selector == nil {
			selector = map[string]string{}
		}
		maps.Copy(selector, p.o.GPUNodeSelector)
		tolerations = append(tolerations, corev1.Toleration{Key: string(GPUResource), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	no, yes := false, true
	grace := int64(p.grace.Round(time.Second) / time.Second)
	var pullSecrets []corev1.LocalObjectReference
	for _, name := range p.o.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "sb-" + sandboxLabel, Namespace: p.o.Namespace,
			Labels: map[string]string{LabelManagedBy: "proctor", LabelOwner: p.owner, LabelSandbox: sandboxLabel, LabelNetwork: network},
			// The full id, which a label value may not hold.
			Annotations: map[string]string{"proctor.dev/sandbox-id": spec.ID},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			TerminationGracePeriodSeconds: &grace,
			NodeSelector:                  selector,
			Tolerations:                   tolerations,
			ImagePullSecrets:              pullSecrets,
			SecurityContext:               &corev1.PodSecurityContext{SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: ContainerName, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
				Command: spec.Command[:1], Args: spec.Command[1:], Env: env, WorkingDir: sandbox.WorkDirInImage,
				Stdin: true, StdinOnce: true,
				Resources: corev1.ResourceRequirements{Requests: res, Limits: res},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &no, ReadOnlyRootFilesystem: &yes,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "work", MountPath: sandbox.WorkDirInImage}},
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// push makes img pullable from the registry and returns the reference pods use (by digest).
func (p *Provider) push(ctx context.Context, img *sandbox.Image) (string, error) {
	p.mu.Lock()
	if ref, ok := p.pushed[img.Ref]; ok {
		p.mu.Unlock()
		return ref, nil
	}
	l := p.pushing[img.Ref]
	if l == nil {
		l = &sync.Mutex{}
		p.pushing[img.Ref] = l
	}
	p.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	p.mu.Lock()
	ref, ok := p.pushed[img.Ref]
	p.mu.Unlock()
	if ok {
		return ref, nil
	}
	f, err := os.CreateTemp("", "proctor-image-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := img.Load(ctx, f); err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	loaded, err := tarball.ImageFromPath(f.Name(), nil)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	digest, err := loaded.Digest()
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	tag, err := name.NewTag(p.o.Registry + ":" + tagOf(img.Ref))
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	opts := append([]remote.Option{remote.WithContext(ctx)}, p.o.RegistryOptions...)
	// Another worker may have pushed it already: the registry has the digest under the tag.
	if d, err := remote.Head(tag, opts...); err != nil || d.Digest != digest {
		if err := remote.Write(tag, loaded, opts...); err != nil {
			return "", fmt.Errorf("push image %s to %s: %w", img.Ref, tag, err)
		}
		p.log.Info("sandbox: pushed an image for the cluster", "image", img.Ref, "to", tag.String(), "digest", digest.String())
	}
	ref = tag.Context().Digest(digest.String()).String()
	p.mu.Lock()
	p.pushed[img.Ref] = ref
	p.mu.Unlock()
	return ref, nil
}

var notTagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// tagOf is a registry tag for an image ref: its own tag (a digest, for builds) when it has one.
func tagOf(ref string) string {
	t := ref
	if i := strings.LastIndex(ref, ":"); i >= 0 && !strings.Contains(ref[i:], "/") {
		t = ref[i+1:]
	}
	t = strings.Trim(notTagChars.ReplaceAllString(t, "-"), "-.")
	if len(t) > 128 {
		t = t[:128]
	}
	return cmp.Or(t, "latest")
}

var notLabelChars = regexp.MustCompile(`[^a-z0-9.-]+`)

// labelValue is s as a label value that can also start a pod name: lower case, at most 50
// characters, starting and ending with an alphanumeric character.
func labelValue(s string) string {
	v := notLabelChars.ReplaceAllString(strings.ToLower(s), "-")
	if len(v) > 50 {
		v = v[:50]
	}
	return cmp.Or(strings.Trim(v, "-."), "x")
}

// waitRunning waits until the pod's container runs (or has already run and exited), and returns
// the pod as last seen; it turns what keeps the container from running into an error: a command
// the image lacks is ErrInvalidSpec.
func (b *box) waitRunning(ctx context.Context, spec sandbox.Spec, pod *corev1.Pod) (*corev1.Pod, error) {
	for {
		if st := containerStatus(pod); st != nil {
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
		select {
		case <-ctx.Done():
			why := ""
			for _, c := range pod.Status.Conditions {
				if c.Status != corev1.ConditionTrue && c.Message != "" {
					why = fmt.Sprintf(" (%s: %s)", c.Reason, c.Message)
				}
			}
			return nil, fmt.Errorf("pod %s did not start%s: %w", pod.Name, why, ctx.Err())
		case ev, ok := <-b.events.ResultChan():
			if !ok {
				return nil, fmt.Errorf("pod %s: the watch ended before it started", pod.Name)
			}
			if ev.Type == watch.Deleted {
				return nil, fmt.Errorf("pod %s was deleted before it started", pod.Name)
			}
			if got, isPod := ev.Object.(*corev1.Pod); isPod && got.Name == pod.Name {
				pod = got
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

func containerStatus(pod *corev1.Pod) *corev1.ContainerStatus {
	for i := range pod.Status.ContainerStatuses {
		if pod.Status.ContainerStatuses[i].Name == ContainerName {
			return &pod.Status.ContainerStatuses[i]
		}
	}
	return nil
}

// box is one pod sandbox.
type box struct {
	*sandbox.Lifecycle
	p       *Provider
	pod     string
	devices []string
	stdin   *io.PipeWriter
	stdout  *io.PipeReader
	events  watch.Interface
}

var _ sandbox.Sandbox = (*box)(nil)

func (b *box) Stdin() io.WriteCloser { return b.stdin }
func (b *box) Stdout() io.ReadCloser { return b.stdout }
func (b *box) Devices() []string     { return slices.Clone(b.devices) }

// WorkDir is empty: the work dir is the pod's, on its node, not on this host.
func (b *box) WorkDir() string { return "" }

// Pod is the sandbox's pod's name.
func (b *box) Pod() string { return b.pod }

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
	why := exited(pod)
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
				if why = exited(pod); why == nil {
					events, err = pods.Watch(context.Background(), metav1.ListOptions{LabelSelector: LabelSandbox + "=" + pod.Labels[LabelSandbox],
						ResourceVersion: pod.ResourceVersion})
				}
			}
			if apierrors.IsNotFound(err) {
				why = errors.New("the pod was deleted")
			} else if err != nil {
				why = fmt.Errorf("following the pod: %w", err)
			}
			continue
		}
		if ev.Type == watch.Deleted {
			why = errors.New("the pod was deleted")
			if pod, isPod := ev.Object.(*corev1.Pod); isPod {
				why = cmp.Or(exited(pod), why)
			}
			continue
		}
		if pod, isPod := ev.Object.(*corev1.Pod); isPod && pod.Name == b.pod {
			why = exited(pod)
		}
	}
	// The output of an exited container is complete once its stream ends.
	select {
	case <-attached:
	case <-time.After(2 * time.Second):
	}
	b.Exited(fmt.Sprintf("sandbox %s (pod %s)", b.ID(), b.pod), why)
}

// exited says why the pod's container has exited, nil while it has not.
func exited(pod *corev1.Pod) error {
	st := containerStatus(pod)
	if st == nil || st.State.Terminated == nil {
		if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
			return fmt.Errorf("the pod %s: %s", strings.ToLower(string(pod.Status.Phase)), cmp.Or(pod.Status.Message, pod.Status.Reason))
		}
		return nil
	}
	t := st.State.Terminated
	why := fmt.Errorf("exit status %d", t.ExitCode)
	if t.Reason != "" && t.Reason != "Completed" && t.Reason != "Error" {
		why = fmt.Errorf("%w (%s)", why, t.Reason)
	}
	return why
}

// Stop deletes the pod (SIGTERM, SIGKILL after the grace) and releases its slot and GPUs.
func (b *box) Stop(ctx context.Context) error {
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
		b.p.gpus.Release(b.devices)
		b.p.slots.Release(b)
		return errors.Join(errs...)
	})
}
