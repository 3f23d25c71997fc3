package kube_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
)

// TestKubernetesProviderSuite runs the provider suite against the Kubernetes provider on a fake
// API server whose pods a stand-in kubelet runs (see kubelet): the same behaviour as the other
// providers, but for the work dir, which lives on the pod's node.
func TestKubernetesProviderSuite(t *testing.T) {
	c := newCluster(t)
	var im sandboxtest.Images
	sandboxtest.Run(t, sandboxtest.Harness{
		New: func(t *testing.T, max int) sandbox.Provider { return c.provider(t, max) },
		Spec: func(t *testing.T, root string, argv ...string) sandbox.Spec {
			return sandbox.Spec{Command: argv, Image: im.Of(t, root)}
		},
		NoHostWorkDir: true,
	})
	if c.kubelet.pulled != 1 {
		t.Errorf("the kubelet pulled %d images, want the suite's one", c.kubelet.pulled)
	}
}

// TestPodIsLockedDown checks the pod a sandbox runs in: no token, no service links, no
// privileges, a read-only root, its resources as requests and limits, GPUs with the GPU nodes'
// selector and toleration, and the labels the network policy and the sweep select.
func TestPodIsLockedDown(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, 4, func(o *kube.Options) {
		o.Owner = "Worker_7.example"
		o.NodeSelector = map[string]string{"pool": "sandboxes"}
		o.GPUNodeSelector = map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
		o.ImagePullSecrets = []string{"registry-pull"}
	})
	spec := sandbox.Spec{ID: "4bf92f35-77b3-4da6-a3ce-929d0e0e4736-2", Command: []string{"/app/env", "--transport", "stdio"},
		Env: map[string]string{"TOKEN": "t", "HOME": "/root"}, Resources: sandbox.Resources{CPU: 1.5, MemoryMB: 512, GPU: sandbox.GPURequest{Count: 2, Type: "h100"}}}
	pod := p.Pod(spec, "registry.example.com/envs@sha256:abc", 2)
	ps, ctr := pod.Spec, pod.Spec.Containers[0]
	if *ps.AutomountServiceAccountToken || *ps.EnableServiceLinks || ps.ServiceAccountName != "" || ps.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod spec: token %v, service links %v, account %q, restart %s", *ps.AutomountServiceAccountToken, *ps.EnableServiceLinks, ps.ServiceAccountName, ps.RestartPolicy)
	}
	sc := ctr.SecurityContext
	if *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" ||
		ps.SecurityContext.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("security: %+v, pod %+v", sc, ps.SecurityContext)
	}
	// A writable root (a Harbor task's image): the container's own layer, the rest as locked.
	spec.WritableRoot = true
	if sc := p.Pod(spec, "registry.example.com/envs@sha256:abc", 2).Spec.Containers[0].SecurityContext; *sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("with a writable root: %+v", sc)
	}
	spec.WritableRoot = false
	want := map[corev1.ResourceName]string{corev1.ResourceCPU: "1500m", corev1.ResourceMemory: "512Mi", kube.GPUResource: "2"}
	for name, q := range want {
		if got := ctr.Resources.Limits[name]; got.String() != q {
			t.Errorf("limit %s = %s, want %s", name, got.String(), q)
		}
		if got := ctr.Resources.Requests[name]; got.String() != q {
			t.Errorf("request %s = %s, want %s", name, got.String(), q)
		}
	}
	if ps.HostUsers != nil {
		t.Errorf("hostUsers %v without UserNamespaces, want the cluster's default", *ps.HostUsers)
	}
	withUserNS := c.provider(t, 1, func(o *kube.Options) { o.UserNamespaces = true })
	if hu := withUserNS.Pod(spec, "registry.example.com/envs@sha256:abc", 0).Spec.HostUsers; hu == nil || *hu {
		t.Errorf("hostUsers %v with UserNamespaces, want false: a user namespace of the pod's own", hu)
	}
	if len(ps.ImagePullSecrets) != 1 || ps.ImagePullSecrets[0].Name != "registry-pull" {
		t.Errorf("image pull secrets %v", ps.ImagePullSecrets)
	}
	if ps.NodeSelector["pool"] != "sandboxes" || ps.NodeSelector["nvidia.com/gpu.product"] == "" || len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != "nvidia.com/gpu" {
		t.Errorf("placement: selector %v, tolerations %v", ps.NodeSelector, ps.Tolerations)
	}
	if ctr.Env[0].Name != "HOME" || ctr.Env[0].Value != sandbox.WorkDirInImage || len(ctr.Env) != 2 || ctr.Env[1].Name != "TOKEN" {
		t.Errorf("env %v: HOME is the work dir, then the spec's", ctr.Env)
	}
	if !ctr.Stdin || !ctr.StdinOnce || ctr.TTY || ctr.Command[0] != "/app/env" || strings.Join(ctr.Args, " ") != "--transport stdio" || ctr.WorkingDir != sandbox.WorkDirInImage {
		t.Errorf("container: %+v", ctr)
	}
	l := pod.Labels
	if l[kube.LabelManagedBy] != "proctor" || l[kube.LabelOwner] != "worker-7.example" || l[kube.LabelNetwork] != "none" ||
		!strings.HasPrefix(pod.Name, "sb-4bf92f35-77b3-4da6-a3ce-929d0e0e4736-2-") || len(pod.Name) > 63 || pod.Annotations["proctor.dev/sandbox-id"] != spec.ID {
		t.Errorf("pod %s, labels %v, annotations %v", pod.Name, l, pod.Annotations)
	}
	// The pod is what the API server accepts: it round-trips through the fake clientset.
	if _, err := c.client.CoreV1().Pods(c.ns).Create(t.Context(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Error(err)
	}
	spec.Network = true
	if p.Pod(spec, "x", 0).Labels[kube.LabelNetwork] != "egress" {
		t.Error("a spec with the network is not labelled egress")
	}
	if a, b := p.Pod(spec, "x", 0).Name, p.Pod(spec, "x", 0).Name; a == b {
		t.Errorf("two pods of one spec share the name %s", a)
	}
}

// TestNewKeepsThePoliciesAndSweepsItsOwnPods: the namespace gets the deny-all and no-ingress
// policies (kept, not duplicated, at every start), and a worker's start deletes the pods a
// previous worker of its owner left, and no one else's.
func TestNewKeepsThePoliciesAndSweepsItsOwnPods(t *testing.T) {
	c := newCluster(t)
	leftover := func(name, owner string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.ns, Labels: map[string]string{kube.LabelManagedBy: "proctor", kube.LabelOwner: owner}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: kube.ContainerName, Image: "gone"}}}}
		if _, err := c.client.CoreV1().Pods(c.ns).Create(t.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leftover("sb-mine", "w1")
	leftover("sb-theirs", "w2")
	for range 2 {
		c.provider(t, 4, func(o *kube.Options) { o.Owner = "w1" })
	}
	pods, _ := c.client.CoreV1().Pods(c.ns).List(t.Context(), metav1.ListOptions{})
	if len(pods.Items) != 1 || pods.Items[0].Name != "sb-theirs" {
		t.Errorf("pods after w1 started: %v, want only w2's", pods.Items)
	}
	nps, _ := c.client.NetworkingV1().NetworkPolicies(c.ns).List(t.Context(), metav1.ListOptions{})
	if len(nps.Items) != 3 {
		t.Fatalf("%d network policies, want 3", len(nps.Items))
	}
	for _, np := range nps.Items {
		sel := np.Spec.PodSelector.MatchLabels
		switch np.Name {
		case kube.DenyAllPolicy:
			if sel[kube.LabelNetwork] != "none" || len(np.Spec.PolicyTypes) != 2 || len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 {
				t.Errorf("deny-all: %+v", np.Spec)
			}
		case kube.PublicEgressPolicy:
			// Out to public addresses and the cluster's DNS only: the private, shared and
			// link-local ranges (cloud metadata), both families, are left out.
			var to []string
			for _, r := range np.Spec.Egress {
				for _, peer := range r.To {
					if peer.IPBlock != nil {
						to = append(to, peer.IPBlock.CIDR+" except "+strings.Join(peer.IPBlock.Except, ","))
					} else if peer.PodSelector.MatchLabels["k8s-app"] != "kube-dns" || len(r.Ports) != 2 || r.Ports[0].Port.IntValue() != 53 {
						t.Errorf("public egress: a peer %+v on ports %+v", peer, r.Ports)
					}
				}
			}
			all := strings.Join(to, "; ")
			if sel[kube.LabelNetwork] != "egress" || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Egress" || len(to) != 2 {
				t.Errorf("public egress: %+v", np.Spec)
			}
			for _, r := range []string{"10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "127.0.0.0/8", "100.64.0.0/10", "fc00::/7", "fe80::/10"} {
				if !strings.Contains(all, r) {
					t.Errorf("public egress lets pods reach %s: %s", r, all)
				}
			}
		case kube.NoIngressPolicy:
			if sel[kube.LabelManagedBy] != "proctor" || len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != "Ingress" || len(np.Spec.Ingress) != 0 {
				t.Errorf("no-ingress: %+v", np.Spec)
			}
		default:
			t.Errorf("unexpected policy %s", np.Name)
		}
	}
	if _, err := kube.New(t.Context(), kube.Options{Client: c.client, Attacher: c.kubelet, Namespace: "nowhere", Registry: c.registry}); err == nil || !strings.Contains(err.Error(), "namespace nowhere") {
		t.Errorf("a missing namespace: %v", err)
	}
}

// TestImagesArePushedOnceAndPulledByDigest: the first worker to run an image pushes it; another
// worker finds it in the registry; pods pull it by digest.
func TestImagesArePushedOnceAndPulledByDigest(t *testing.T) {
	c := newCluster(t)
	var im sandboxtest.Images
	img := im.Of(t, sandboxtest.Root(t))
	for _, owner := range []string{"w1", "w2"} {
		p := c.provider(t, 4, func(o *kube.Options) { o.Owner = owner })
		sb, err := p.Start(t.Context(), sandbox.Spec{ID: "push-" + owner, Command: []string{"/bin/true"}, Image: img})
		if err != nil {
			t.Fatal(err)
		}
		<-sb.Done()
		pod, err := c.client.CoreV1().Pods(c.ns).Get(t.Context(), sb.(interface{ Pod() string }).Pod(), metav1.GetOptions{})
		if err != nil || !strings.HasPrefix(pod.Spec.Containers[0].Image, c.registry+"@sha256:") {
			t.Errorf("the pod's image: %v %v", pod, err)
		}
		if err := sb.Stop(t.Context()); err != nil {
			t.Error(err)
		}
	}
	if n := c.pushes.Load(); n != 1 {
		t.Errorf("the image was pushed %d times, want once", n)
	}
}

// TestGPUsAreABudget: a GPU worker's pods request nvidia.com/gpu, and it asks for no more GPUs
// at once than it was given.
func TestGPUsAreABudget(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, 4, func(o *kube.Options) { o.GPUs, o.GPUType = []string{"0", "1"}, "t4" })
	img := new(sandboxtest.Images).Of(t, sandboxtest.Root(t))
	gpu := func(id string, n int, typ string) (sandbox.Sandbox, error) {
		return p.Start(t.Context(), sandbox.Spec{ID: id, Command: []string{"/bin/sleep", "300"}, Image: img, Resources: sandbox.Resources{GPU: sandbox.GPURequest{Count: n, Type: typ}}})
	}
	a, err := gpu("a", 2, "t4")
	if err != nil {
		t.Fatal(err)
	}
	pod, _ := c.client.CoreV1().Pods(c.ns).Get(t.Context(), a.(interface{ Pod() string }).Pod(), metav1.GetOptions{})
	if q := pod.Spec.Containers[0].Resources.Limits[kube.GPUResource]; q.Value() != 2 {
		t.Errorf("the pod asks for %v GPUs, want 2", q.Value())
	}
	if _, err := gpu("b", 1, "t4"); !errors.Is(err, sandbox.ErrNoGPU) {
		t.Errorf("a third GPU: %v, want ErrNoGPU", err)
	}
	if _, err := gpu("c", 1, "h100"); !errors.Is(err, sandbox.ErrNoGPU) {
		t.Errorf("another type: %v, want ErrNoGPU", err)
	}
	a.Stop(t.Context())
	b, err := gpu("b", 1, "t4")
	if err != nil {
		t.Fatalf("a GPU after the others were released: %v", err)
	}
	b.Stop(t.Context())
	if p.Running() != 0 {
		t.Errorf("Running() = %d", p.Running())
	}
}

// TestAPodThatIsNotScheduledFailsTheStartWithTheReason: no node takes the pod within the
// start's deadline; the start says why, and leaves no pod and no slot behind.
func TestAPodThatIsNotScheduledFailsTheStartWithTheReason(t *testing.T) {
	c := newCluster(t)
	img := new(sandboxtest.Images).Of(t, sandboxtest.Root(t))
	// The image is in the registry already: the deadline is the scheduler's, but for the new
	// provider's check of its digest there (a tarball hashed, a HEAD), which a loaded machine
	// takes a second or more for.
	sb, err := c.provider(t, 1).Start(t.Context(), sandbox.Spec{ID: "first", Command: []string{"/bin/true"}, Image: img})
	if err != nil {
		t.Fatal(err)
	}
	sb.Stop(t.Context())
	p := c.provider(t, 4, func(o *kube.Options) { o.NodeSelector = map[string]string{"kubernetes.io/hostname": "nowhere"} })
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	_, err = p.Start(ctx, sandbox.Spec{ID: "lost", Command: []string{"/bin/true"}, Image: img})
	if err == nil || !strings.Contains(err.Error(), "Unschedulable: 0/1 nodes are available") || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start = %v, want the scheduler's reason", err)
	}
	if p.Running() != 0 {
		t.Errorf("Running() = %d after a failed start", p.Running())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		pods, _ := c.client.CoreV1().Pods(c.ns).List(t.Context(), metav1.ListOptions{})
		if len(pods.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unscheduled pod was left: %v", pods.Items[0].Name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTheWatchEndingIsNotTheSandboxEnding: the API server closes watches now and then; the
// provider reads the pod again, watches anew, and still sees how the environment ends.
func TestTheWatchEndingIsNotTheSandboxEnding(t *testing.T) {
	c := newCluster(t)
	var mu sync.Mutex
	var watches []*watch.ProxyWatcher
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	c.client.PrependWatchReactor("pods", func(action k8stesting.Action) (bool, watch.Interface, error) {
		if !strings.Contains(action.(k8stesting.WatchActionImpl).WatchRestrictions.Labels.String(), kube.LabelSandbox) {
			return false, nil, nil // the kubelet's
		}
		real, err := c.client.Tracker().Watch(podsGVR, action.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		out := make(chan watch.Event)
		pw := watch.NewProxyWatcher(out)
		go func() {
			defer close(out)
			defer real.Stop()
			for {
				select {
				case ev, ok := <-real.ResultChan():
					if !ok {
						return
					}
					select {
					case out <- ev:
					case <-pw.StopChan():
						return
					}
				case <-pw.StopChan():
					return
				}
			}
		}()
		mu.Lock()
		watches = append(watches, pw)
		mu.Unlock()
		return true, pw, nil
	})
	p := c.provider(t, 1)
	sb, err := p.Start(t.Context(), sandbox.Spec{ID: "rewatch", Command: []string{"/bin/sh", "-c", "read line; exit 4"},
		Image: new(sandboxtest.Images).Of(t, sandboxtest.Root(t))})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	mu.Lock()
	watches[0].Stop() // the API server ends the watch
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(watches)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the provider did not watch the pod again")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sb.Err() != nil {
		t.Fatalf("a closed watch ended the sandbox: %v", sb.Err())
	}
	io.WriteString(sb.Stdin(), "go\n")
	select {
	case <-sb.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the exit was not seen through the second watch")
	}
	if err := sb.Err(); !errors.Is(err, sandbox.ErrExited) || !strings.Contains(err.Error(), "exit status 4") {
		t.Errorf("Err = %v, want exit status 4", err)
	}
}
