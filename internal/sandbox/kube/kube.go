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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/proctorhq/proctor/internal/egress"
	"github.com/proctorhq/proctor/internal/relayproto"
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
	// DenyAllPolicy, PublicEgressPolicy and NoIngressPolicy are the NetworkPolicies New keeps
	// in the namespace.
	DenyAllPolicy      = "proctor-sandbox-deny-all"
	PublicEgressPolicy = "proctor-sandbox-public-egress"
	NoIngressPolicy    = "proctor-sandbox-no-ingress"
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
	// Relay is the path on this host of a static proctor-relay binary (cmd/proctor-relay) and
	// Forwarder reaches pods' ports (see NewForwarder): with both, a sandbox.Spec.Listen is
	// honoured. The pod runs its image with the relay added as one more layer, in front of its
	// command; the relay listens on the port inside the pod and relays each connection through
	// one the worker keeps open to it by port forwarding, so that the pod needs no network path
	// to the worker (and the deny-all policy stays). Without them, a Listen is refused with
	// ErrNoListen.
	Relay     string
	Forwarder Forwarder
	// UserNamespaces runs each pod in a user namespace of its own (hostUsers: false): its users,
	// root included, are unprivileged users of the node. The cluster must support it (Kubernetes
	// 1.33, or 1.30 with the UserNamespacesSupport gate; a runtime and volumes with idmapped
	// mounts); where it does not, the pods fail to start, which is why it is asked for.
	UserNamespaces bool
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
	relay v1.Layer // nil without Options.Relay

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
	var relay v1.Layer
	if o.Relay != "" {
		if o.Forwarder == nil {
			return nil, errors.New("kubernetes provider: an agent relay needs a forwarder to reach it (kube.NewForwarder)")
		}
		var err error
		if relay, err = relayLayer(o.Relay); err != nil {
			return nil, fmt.Errorf("kubernetes provider: %w", err)
		}
	}
	p := &Provider{o: o, owner: o.Owner, max: cmp.Or(o.MaxSandboxes, 16), grace: cmp.Or(o.StopGrace, 5*time.Second),
		log: cmp.Or(o.Logger, slog.Default()), pushing: map[string]*sync.Mutex{}, pushed: map[string]string{}, relay: relay}
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
// the network can reach nothing and be reached by nothing; those that may reach public addresses
// only (never the cluster's, its nodes' private networks or cloud metadata: the ranges
// egress.Refused names) and the cluster's DNS; no sandbox accepts connections. A cluster
// enforces them only with a network plugin that implements NetworkPolicy (Calico, Cilium, …);
// a node with a public address is not in those ranges, and must be kept out by the cluster.
func NetworkPolicies(namespace string) []*networkingv1.NetworkPolicy {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelManagedBy: "proctor"}}
	}
	v4 := &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}
	v6 := &networkingv1.IPBlock{CIDR: "::/0"}
	for _, p := range egress.Refused() {
		if p.Addr().Is4() {
			v4.Except = append(v4.Except, p.String())
		} else if p.Bits() > 0 {
			v6.Except = append(v6.Except, p.String())
		}
	}
	udp, tcp, dns := corev1.ProtocolUDP, corev1.ProtocolTCP, intstr.FromInt32(53)
	return []*networkingv1.NetworkPolicy{
		{ObjectMeta: meta(PublicEgressPolicy), Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelManagedBy: "proctor", LabelNetwork: "egress"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{
				{To: []networkingv1.NetworkPolicyPeer{{IPBlock: v4}, {IPBlock: v6}}},
				{To: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "kube-dns"}},
				}}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &dns}, {Protocol: &tcp, Port: &dns}}},
			},
		}},
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

// CanMount is true: a sandbox within a pod is shown images' files (Spec.Mounts with an Image),
// copied into the pod's /tmp volume (see within.go).
func (p *Provider) CanMount() bool { return true }

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
	if spec.WorkDir != "" {
		return nil, sandbox.Invalid("sandbox %s: the kubernetes provider runs no pod in another's work dir", spec.ID)
	}
	for _, m := range spec.Mounts {
		// A pod runs on another node: only an image's files can be shown in it, copied into the
		// pod's agent volume by a container of that image; one image a sandbox.
		if spec.Within == nil || m.Image == nil || m.Writable || len(spec.Mounts) > 1 || path.Clean(m.Target) != m.Target ||
			!strings.HasPrefix(m.Target, "/tmp/") || m.Target == sandbox.WorkDirInImage || strings.HasPrefix(m.Target, sandbox.WorkDirInImage+"/") {
			return nil, sandbox.Invalid("sandbox %s: the kubernetes provider shows one image's files, read-only, under /tmp (outside the work dir), "+
				"in a sandbox within a pod (mount at %q)", spec.ID, m.Target)
		}
	}
	if spec.Listen != nil && p.relay == nil {
		return nil, fmt.Errorf("sandbox %s: no relay to put in the pod (kube.Options.Relay): %w", spec.ID, sandbox.ErrNoListen)
	}
	if spec.Listen != nil && spec.Listen.Port == relayBackPort {
		return nil, sandbox.Invalid("sandbox %s: port %d is the relay's own", spec.ID, relayBackPort)
	}
	if err := sandbox.WithinWritableRoot(spec, "kubernetes"); err != nil {
		return nil, err
	}
	if spec.User != "" {
		return nil, sandbox.Invalid("sandbox %s: the kubernetes provider runs a pod's containers as their images say: not as user %q", spec.ID, spec.User)
	}
	if spec.Within != nil {
		host, ok := spec.Within.(*box)
		switch {
		case !ok || host.p != p || host.ephemeral:
			return nil, sandbox.Invalid("sandbox %s: within %s, which is not a pod of this provider", spec.ID, spec.Within.ID())
		case spec.Listen == nil:
			// The relay in front of it is how it is stopped (see within.go).
			return nil, sandbox.Invalid("sandbox %s: the kubernetes provider runs a sandbox within a pod only with a listener inside (Spec.Listen)", spec.ID)
		case spec.Resources.GPU.Count > 0:
			return nil, sandbox.Invalid("sandbox %s: a sandbox within a pod takes no GPUs of its own", spec.ID)
		}
		return p.slots.Start(spec, func() (sandbox.Sandbox, error) { return p.startWithin(ctx, spec, host) })
	}
	return p.slots.Start(spec, func() (sandbox.Sandbox, error) { return p.start(ctx, spec) })
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
	image, err := p.push(ctx, spec.Image, spec.Listen != nil)
	if err != nil {
		return nil, err
	}
	var token string
	if spec.Listen != nil {
		spec, token = withRelayToken(spec)
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
	b := &box{Lifecycle: sandbox.NewLifecycle(spec.ID), p: p, pod: pod.Name, container: ContainerName, devices: devices, events: w, writableRoot: spec.WritableRoot}
	if pod, err = b.waitRunning(ctx, spec, pod); err != nil {
		return nil, err
	}
	if spec.Listen != nil {
		if err := b.listen(ctx, spec, token); err != nil {
			return nil, err
		}
		undo = append(undo, func() { b.tunnel.Close() })
	}
	inR, inW := io.Pipe()
	b.stdin = inW
	b.attach(ctx, spec, pod, inR)
	return b, nil
}

// withRelayToken is spec with a fresh token for its relay's back port in its environment (the
// relay takes it out before it starts the command), and the token.
func withRelayToken(spec sandbox.Spec) (sandbox.Spec, string) {
	b := make([]byte, 16)
	rand.Read(b) //nolint:errcheck // never fails (crypto/rand)
	token := hex.EncodeToString(b)
	spec.Env = maps.Clone(spec.Env)
	if spec.Env == nil {
		spec.Env = map[string]string{}
	}
	spec.Env[relayproto.TokenEnv] = token
	return spec, token
}

// listen makes spec's listener: a tunnel to the relay in b's container (which token opens),
// handed to Ready.
func (b *box) listen(ctx context.Context, spec sandbox.Spec, token string) error {
	forward := func(ctx context.Context) (Forwarding, error) {
		return b.p.o.Forwarder.Forward(ctx, b.p.o.Namespace, b.pod)
	}
	fw, err := forward(ctx)
	if err != nil {
		return err
	}
	b.tunnel = newTunnel(fw, func(ctx context.Context) (Forwarding, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return forward(ctx)
	}, token, b.pod, b.p.log)
	spec.Listen.Ready(b.tunnel)
	return nil
}

// attach attaches to b's container, running in pod: stdin to it, its stdout as b's, its stderr
// lines as spec's logs; and follows the pod until the container has exited.
func (b *box) attach(ctx context.Context, spec sandbox.Spec, pod *corev1.Pod, stdin io.Reader) {
	outR, outW := io.Pipe()
	errR, errW := io.Pipe()
	b.stdout = outR
	attached := make(chan struct{})
	go func() {
		defer close(attached)
		err := b.p.o.Attacher.Attach(context.WithoutCancel(ctx), b.p.o.Namespace, pod.Name, b.container, stdin, outW, errW)
		if r, ok := stdin.(*io.PipeReader); ok {
			r.CloseWithError(cmp.Or(err, io.EOF))
		}
		outW.CloseWithError(cmp.Or(err, io.EOF))
		errW.Close()
		if b.ephemeral && !b.Stopping() {
			go b.lifelineEnded(err)
		}
	}()
	go func() {
		sandbox.ReadLines(errR, "stderr", b.LogRing(), spec.OnLog)
		io.Copy(io.Discard, errR) //nolint:errcheck // drain, so the stream never blocks
	}()
	go b.wait(attached, pod)
}
