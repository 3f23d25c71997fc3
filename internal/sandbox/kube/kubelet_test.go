package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/portforward"

	"github.com/proctorhq/proctor/internal/archive"
	"github.com/proctorhq/proctor/internal/image"
	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/testenv"
)

// kubelet stands in for a node of a cluster the tests cannot reach: it watches the fake
// clientset's pods and runs each (and the ephemeral containers added to it) as a kubelet would, pulling its image from the registry,
// unpacking it, and running its container's command in a process sandbox under bubblewrap
// (read-only root, the pod's network label deciding the network), with the pod's status kept
// as a kubelet keeps it. It is also the attacher: attaching reaches the container's stdio.
type kubelet struct {
	t       testing.TB
	client  *fake.Clientset
	ns      string
	runtime *sandbox.Process

	mu    sync.Mutex
	cond  *sync.Cond
	procs map[string]*proc // by pod name and container name: procKey
	// ephemeral are the ephemeral containers run, by procKey.
	ephemeral map[string]bool
	// sessions are the open port forwarding sessions.
	sessions map[httpstream.Connection]bool
	roots    map[string]root
	pulled   int
	// volumes are the pods' emptyDir volumes (but the work dir, which the process sandbox of the
	// pod's container makes), by procKey of the pod and the volume's name.
	volumes map[string]string
}

func procKey(pod, container string) string { return pod + "/" + container }

// proc is one pod's running container.
type proc struct {
	sb     sandbox.Sandbox
	stderr *lineQueue
	// drained is closed once an attachment has read the container's stdout to its end: the
	// runtime keeps a container's output until then (a container that exits at once, before the
	// provider attaches, is read all the same).
	drained   chan struct{}
	drainOnce sync.Once
}

func startKubelet(t testing.TB, client *fake.Clientset, ns string) *kubelet {
	t.Helper()
	rt, err := sandbox.NewProcess(sandbox.ProcessOptions{Root: t.TempDir(), MaxSandboxes: 64, Isolation: sandbox.IsolationBubblewrap, StopGrace: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Logf("bubblewrap: %v", err)
		testenv.MissingTool(t, "a usable bubblewrap")
	}
	k := &kubelet{t: t, client: client, ns: ns, runtime: rt, procs: map[string]*proc{}, ephemeral: map[string]bool{},
		sessions: map[httpstream.Connection]bool{}, roots: map[string]root{}, volumes: map[string]string{}}
	k.cond = sync.NewCond(&k.mu)
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			switch ev.Type {
			case watch.Added:
				go k.run(pod)
			case watch.Modified:
				k.runEphemerals(pod)
			case watch.Deleted:
				go k.kill(pod)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rt.Close(ctx) //nolint:errcheck // the test is over
	})
	return k
}

// setStatus writes a container's state, and the pod's phase (unless empty), as the kubelet
// reports them.
func (k *kubelet) setStatus(podName string, c corev1.Container, ephemeral bool, phase corev1.PodPhase, state corev1.ContainerState) {
	pods := k.client.CoreV1().Pods(k.ns)
	pod, err := pods.Get(context.Background(), podName, metav1.GetOptions{})
	if err != nil {
		return // deleted
	}
	if phase != "" {
		pod.Status.Phase = phase
	}
	statuses := &pod.Status.ContainerStatuses
	if ephemeral {
		statuses = &pod.Status.EphemeralContainerStatuses
	}
	*statuses = slices.DeleteFunc(*statuses, func(st corev1.ContainerStatus) bool { return st.Name == c.Name })
	*statuses = append(*statuses, corev1.ContainerStatus{Name: c.Name, State: state, Image: c.Image})
	if _, err := pods.UpdateStatus(context.Background(), pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		k.t.Errorf("kubelet: update the status of %s: %v", podName, err)
	}
}

// root is an unpacked image: its root file system and its config's environment.
type root struct {
	dir string
	env []string
}

// volume is the host directory of the pod's volume name, made the first time a container
// mounts it (writable by every user, as an emptyDir is to the pod's containers).
func (k *kubelet) volume(pod, name string) string {
	k.mu.Lock()
	defer k.mu.Unlock()
	key := procKey(pod, name)
	if dir, ok := k.volumes[key]; ok {
		return dir
	}
	dir := k.t.TempDir()
	os.Chmod(dir, 0o1777) //nolint:errcheck // a test's temp dir
	k.volumes[key] = dir
	return dir
}

// root pulls and unpacks an image once.
func (k *kubelet) root(ref string) (root, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if r, ok := k.roots[ref]; ok {
		return r, nil
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return root{}, err
	}
	img, err := remote.Image(r)
	if err != nil {
		return root{}, err
	}
	dir := k.t.TempDir()
	cfg, err := image.Unpack(img, dir, archive.DefaultLimits)
	if err != nil {
		return root{}, err
	}
	k.roots[ref] = root{dir: dir, env: cfg.Env}
	k.pulled++
	return k.roots[ref], nil
}

func (k *kubelet) run(pod *corev1.Pod) {
	if pod.Spec.NodeSelector["kubernetes.io/hostname"] == "nowhere" {
		// No node matches: the scheduler says so, and nothing runs.
		pods := k.client.CoreV1().Pods(k.ns)
		if cur, err := pods.Get(context.Background(), pod.Name, metav1.GetOptions{}); err == nil {
			cur.Status.Phase = corev1.PodPending
			cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
				Message: "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."}}
			pods.UpdateStatus(context.Background(), cur, metav1.UpdateOptions{}) //nolint:errcheck // it may be gone
		}
		return
	}
	k.runContainer(pod, pod.Spec.Containers[0], false)
}

// runEphemerals runs those of the pod's ephemeral containers that have not run yet, each in the
// work dir of the pod's container (in a network namespace of its own, unlike a pod's: dialPod
// tries each of a pod's containers).
func (k *kubelet) runEphemerals(pod *corev1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ec := range pod.Spec.EphemeralContainers {
		if key := procKey(pod.Name, ec.Name); !k.ephemeral[key] {
			k.ephemeral[key] = true
			go k.runContainer(pod, corev1.Container{Name: ec.Name, Image: ec.Image, Command: ec.Command, Args: ec.Args, Env: ec.Env,
				VolumeMounts: ec.VolumeMounts, Stdin: ec.Stdin, TerminationMessagePolicy: ec.TerminationMessagePolicy}, true)
		}
	}
}

// runContainer runs the pod's container c (an ephemeral one's fields as a container's) until it
// exits, keeping its status.
func (k *kubelet) runContainer(pod *corev1.Pod, c corev1.Container, ephemeral bool) {
	phase := func(p corev1.PodPhase) corev1.PodPhase {
		if ephemeral {
			return "" // the pod's phase is its containers'
		}
		return p
	}
	rootfs, err := k.root(c.Image)
	if err != nil {
		k.setStatus(pod.Name, c, ephemeral, phase(corev1.PodPending), corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: err.Error()}})
		return
	}
	// The image's environment, then the container's, as the runtime merges them.
	env := map[string]string{}
	for _, kv := range rootfs.env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	spec := sandbox.Spec{ID: pod.Name + "-" + c.Name, Command: append(append([]string{}, c.Command...), c.Args...), Env: env, RootFS: rootfs.dir,
		Network: pod.Labels[kube.LabelNetwork] == "egress"}
	if ephemeral {
		main := k.waitProc(procKey(pod.Name, kube.ContainerName))
		if main == nil {
			k.setStatus(pod.Name, c, ephemeral, "", corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: "the pod does not run"}})
			return
		}
		spec.WorkDir = main.sb.WorkDir()
	}
	// The pod's volumes, as host directories that its containers share (a subPath of one made
	// as the kubelet makes it); the work dir is the main container's, above.
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == sandbox.WorkDirInImage {
			continue
		}
		dir := filepath.Join(k.volume(pod.Name, vm.Name), vm.SubPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			k.t.Errorf("kubelet: volume %s: %v", vm.Name, err)
		}
		spec.Mounts = append(spec.Mounts, sandbox.Mount{Source: dir, Target: vm.MountPath, Writable: !vm.ReadOnly})
	}
	if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		spec.Resources.MemoryMB = int(q.Value() >> 20)
	}
	if q, ok := c.Resources.Limits[corev1.ResourceCPU]; ok {
		spec.Resources.CPU = float64(q.MilliValue()) / 1000
	}
	stderr := newLineQueue()
	spec.OnLog = func(l sandbox.LogLine) { stderr.add(l.Line) }
	sb, err := k.runtime.Start(context.Background(), spec)
	if err != nil {
		// As containerd says of a command the image lacks; other failures as themselves.
		msg := err.Error()
		if errors.Is(err, sandbox.ErrInvalidSpec) {
			msg = fmt.Sprintf("failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create failed: "+
				"unable to start container process: exec: %q: stat %s: no such file or directory: unknown", spec.Command[0], spec.Command[0])
		}
		k.setStatus(pod.Name, c, ephemeral, phase(corev1.PodFailed), corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 128, Reason: "StartError", Message: msg}})
		return
	}
	k.mu.Lock()
	pr := &proc{sb: sb, stderr: stderr, drained: make(chan struct{})}
	k.procs[procKey(pod.Name, c.Name)] = pr
	k.cond.Broadcast()
	k.mu.Unlock()
	k.setStatus(pod.Name, c, ephemeral, phase(corev1.PodRunning), corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}})
	<-sb.Done()
	stderr.close()
	if c.Stdin { // one that cannot be attached to keeps its output in its logs
		select {
		case <-pr.drained:
		case <-time.After(10 * time.Second):
		}
	}
	code := 0
	var exit *exec.ExitError
	if errors.As(sb.Err(), &exit) {
		code = exit.ExitCode()
		if code < 0 {
			code = 137
		}
	}
	ended := corev1.PodSucceeded
	if code != 0 {
		ended = corev1.PodFailed
	}
	message := ""
	if code != 0 && c.TerminationMessagePolicy == corev1.TerminationMessageFallbackToLogsOnError {
		for _, l := range sb.Logs() {
			message += l.Line + "\n"
		}
	}
	k.setStatus(pod.Name, c, ephemeral, phase(ended), corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code),
		Reason: map[bool]string{true: "Completed", false: "Error"}[code == 0], Message: message}})
	sb.Stop(context.Background()) //nolint:errcheck // it has exited
}

// kill stops a deleted pod's containers within its grace.
func (k *kubelet) kill(pod *corev1.Pod) {
	grace := time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	var wg sync.WaitGroup
	for _, p := range k.podProcs(pod.Name) {
		wg.Go(func() { p.sb.Stop(ctx) }) //nolint:errcheck // the pod is gone either way
	}
	wg.Wait()
}

// podProcs are the pod's running containers, its own first.
func (k *kubelet) podProcs(pod string) []*proc {
	k.mu.Lock()
	defer k.mu.Unlock()
	var ps []*proc
	if p := k.procs[procKey(pod, kube.ContainerName)]; p != nil {
		ps = append(ps, p)
	}
	for key, p := range k.procs {
		if strings.HasPrefix(key, pod+"/") && key != procKey(pod, kube.ContainerName) {
			ps = append(ps, p)
		}
	}
	return ps
}

// waitProc waits up to 10 seconds for the container of key to run.
func (k *kubelet) waitProc(key string) *proc {
	deadline := time.Now().Add(10 * time.Second)
	k.mu.Lock()
	defer k.mu.Unlock()
	for k.procs[key] == nil && time.Now().Before(deadline) {
		k.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		k.mu.Lock()
	}
	return k.procs[key]
}

// Attach reaches a running pod's container: stdin to it, its stdout, and its stderr lines.
func (k *kubelet) Attach(ctx context.Context, namespace, pod, container string, stdin io.Reader, stdout, stderr io.Writer) error {
	if namespace != k.ns {
		return fmt.Errorf("attach: no container %s/%s/%s", namespace, pod, container)
	}
	p := k.waitProc(procKey(pod, container))
	if p == nil {
		return fmt.Errorf("attach: pod %s is not running", pod)
	}
	go func() {
		io.Copy(p.sb.Stdin(), stdin) //nolint:errcheck // ends with either side
		p.sb.Stdin().Close()
	}()
	errs := make(chan struct{})
	go func() {
		defer close(errs)
		for line := range p.stderr.lines() {
			fmt.Fprintln(stderr, line)
		}
	}()
	io.Copy(stdout, p.sb.Stdout()) //nolint:errcheck // ends with the container
	p.drainOnce.Do(func() { close(p.drained) })
	<-errs
	return nil
}

// ServeHTTP serves the API server's pods/portforward, as a kubelet does behind it, over SPDY (a
// WebSocket upgrade is refused, as an API server older than 1.31 refuses it, and the client
// falls back): each pair of an error and a data stream is a connection to the stream's port on
// the pod's own loopback, dialed inside the pod's network namespace.
func (k *kubelet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.URL.Path, "/") // /api/v1/namespaces/NS/pods/POD/portforward
	if len(parts) != 8 || parts[3] != "namespaces" || parts[4] != k.ns || parts[5] != "pods" || parts[7] != "portforward" {
		http.NotFound(w, r)
		return
	}
	pod := parts[6]
	if r.Method != http.MethodPost {
		http.Error(w, "WebSocket port forwarding is not served here", http.StatusBadRequest)
		return
	}
	if _, err := httpstream.Handshake(r, w, []string{portforward.PortForwardProtocolV1Name}); err != nil {
		return
	}
	streams, served := make(chan httpstream.Stream, 16), make(chan struct{})
	defer close(served)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
		select {
		case streams <- s:
			return nil
		case <-served:
			return errors.New("the session is over")
		}
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	k.mu.Lock()
	k.sessions[conn] = true
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		delete(k.sessions, conn)
		k.mu.Unlock()
	}()
	errStreams := map[string]httpstream.Stream{}
	for {
		select {
		case <-conn.CloseChan():
			return
		case s := <-streams:
			id := s.Headers().Get(corev1.PortForwardRequestIDHeader)
			switch s.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				errStreams[id] = s
			case corev1.StreamTypeData:
				port, _ := strconv.Atoi(s.Headers().Get(corev1.PortHeader))
				go func(data, errs httpstream.Stream) {
					k.forward(pod, port, data, errs)
					// As the kubelet does: a stream it is done with is removed, so that what
					// still comes on it is dropped rather than held up, and the session with it.
					conn.RemoveStreams(data, errs)
				}(s, errStreams[id])
				delete(errStreams, id)
			}
		}
	}
}

// dropSessions ends every port forwarding session, as an API server's restart does.
func (k *kubelet) dropSessions() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for conn := range k.sessions {
		conn.Close()
	}
}

// forward connects data to port on pod's loopback, or writes why it cannot to errs.
func (k *kubelet) forward(pod string, port int, data, errs httpstream.Stream) {
	defer data.Close()
	defer errs.Close()
	c, err := k.dialPod(pod, port)
	if err != nil {
		fmt.Fprintf(errs, "error forwarding port %d to pod %s: %v", port, pod, err)
		return
	}
	defer c.Close()
	go func() {
		if _, err := io.Copy(c, data); err != nil {
			io.Copy(io.Discard, data) //nolint:errcheck // an unread stream holds up the session
		}
		c.(*net.TCPConn).CloseWrite()
	}()
	io.Copy(data, c) //nolint:errcheck // ends with either side
}

// dialPod connects to port on the loopback of the running pod's network namespace: from a
// thread that joined it, and ends with its goroutine (a socket stays in the namespace it was
// made in).
func (k *kubelet) dialPod(pod string, port int) (net.Conn, error) {
	procs := k.podProcs(pod)
	if len(procs) == 0 {
		return nil, fmt.Errorf("pod %s is not running", pod)
	}
	var err error
	for _, p := range procs {
		var c net.Conn
		if c, err = dialContainer(p, port); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// dialContainer connects to port in the network namespace of p's sandbox.
func dialContainer(p *proc, port int) (net.Conn, error) {
	// The sandbox's processes but bubblewrap's first, which stays in this namespace. (This
	// thread's: a thread that joined a pod's stays out of the scheduler, but the main thread
	// may be one, and /proc/self/ns is the main thread's.)
	ours, err := os.Stat("/proc/thread-self/ns/net")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range p.sb.(interface{ Pids() []int }).Pids() {
		if theirs, err := os.Stat(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && !os.SameFile(ours, theirs) {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, fmt.Errorf("sandbox %s has no process in a network namespace of its own", p.sb.ID())
	}
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends in the pod's namespace
		ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pids[0]))
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: err}
			return
		}
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// lineQueue holds a container's stderr lines until the attached client reads them.
type lineQueue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []string
	closed bool
}

func newLineQueue() *lineQueue {
	q := &lineQueue{}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *lineQueue) add(line string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.buf = append(q.buf, line)
	q.cond.Broadcast()
}

func (q *lineQueue) close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	q.cond.Broadcast()
}

// lines yields every line, waiting for more until the queue is closed.
func (q *lineQueue) lines() func(func(string) bool) {
	return func(yield func(string) bool) {
		for i := 0; ; i++ {
			q.mu.Lock()
			for i >= len(q.buf) && !q.closed {
				q.cond.Wait()
			}
			if i >= len(q.buf) {
				q.mu.Unlock()
				return
			}
			line := q.buf[i]
			q.mu.Unlock()
			if !yield(line) {
				return
			}
		}
	}
}

// cluster is a fake API server with a namespace, a kubelet and a registry.
type cluster struct {
	// pushes counts the manifests pushed to the registry.
	pushes   atomic.Int32
	client   *fake.Clientset
	kubelet  *kubelet
	registry string
	ns       string
	// api serves the kubelet's port forwarding, as the API server does.
	api string
}

func newCluster(t testing.TB) *cluster {
	t.Helper()
	const ns = "sandboxes"
	client := fake.NewClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	// As the API server does, an update of a pod's status or ephemeral containers changes those
	// alone (the fake tracker would write the whole pod, and a kubelet's status from an older
	// read would undo an ephemeral container just added).
	var subresources sync.Mutex
	client.PrependReactor("update", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		u := a.(k8stesting.UpdateAction)
		sub := u.GetSubresource()
		if sub != "status" && sub != "ephemeralcontainers" {
			return false, nil, nil
		}
		subresources.Lock()
		defer subresources.Unlock()
		in := u.GetObject().(*corev1.Pod)
		cur, err := client.Tracker().Get(u.GetResource(), u.GetNamespace(), in.Name)
		if err != nil {
			return true, nil, err
		}
		pod := cur.(*corev1.Pod).DeepCopy()
		if sub == "status" {
			pod.Status = in.Status
		} else {
			pod.Spec.EphemeralContainers = in.Spec.EphemeralContainers
		}
		return true, pod, client.Tracker().Update(u.GetResource(), pod, u.GetNamespace())
	})
	c := &cluster{client: client, kubelet: startKubelet(t, client, ns), ns: ns}
	h := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			c.pushes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(reg.Close)
	c.registry = strings.TrimPrefix(reg.URL, "http://") + "/proctor/envs"
	api := httptest.NewServer(c.kubelet)
	t.Cleanup(api.Close)
	c.api = api.URL
	return c
}

// withRelay gives the provider the agent relay, and port forwarding through the fake API server.
func (c *cluster) withRelay(t testing.TB) func(*kube.Options) {
	relay := testenv.StaticProgram(t, "cmd/proctor-relay")
	cfg := &rest.Config{Host: c.api}
	return func(o *kube.Options) {
		o.Relay, o.Forwarder = relay, kube.NewForwarder(cfg, kubernetes.NewForConfigOrDie(cfg))
	}
}

func (c *cluster) provider(t testing.TB, max int, opts ...func(*kube.Options)) *kube.Provider {
	t.Helper()
	o := kube.Options{Client: c.client, Attacher: c.kubelet, Namespace: c.ns, Registry: c.registry, Owner: "test-" + t.Name(),
		MaxSandboxes: max, StopGrace: time.Second, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	p, err := kube.New(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
