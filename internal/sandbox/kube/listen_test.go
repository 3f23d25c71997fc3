package kube_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pod whose spec asks for a listener inside finds it at 127.0.0.1:PORT from its first
// instruction, served by whoever holds the listener on this side of the API server: the relay
// added to its image passes each connection through one the worker keeps open by port
// forwarding, more connections at once than it keeps idle included. The relay passes the
// command's exit status on, and such a companion takes no slot.
func TestAListenerInsideAPodIsReachedThroughTheRelay(t *testing.T) {
	c := newCluster(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := c.provider(t, 1, c.withRelay(t))
	defer p.Close(context.Background())
	sandboxtest.Listening(t, p, im.Of(t, root))

	plain := c.provider(t, 1)
	defer plain.Close(context.Background())
	if _, err := plain.Start(t.Context(), sandbox.Spec{ID: "x", Command: []string{"/bin/true"}, Image: im.Of(t, root),
		Listen: &sandbox.Listen{Port: 7777, Ready: func(net.Listener) {}}}); !errors.Is(err, sandbox.ErrNoListen) {
		t.Errorf("a listener inside without a relay: %v, want ErrNoListen", err)
	}
}

// A relay that would not run in any image (linked dynamically), or one with no way to reach it,
// is refused when the provider starts, saying why.
func TestARelayThePodsCannotRunIsRefused(t *testing.T) {
	c := newCluster(t)
	withRelay := c.withRelay(t)
	_, err := kube.New(t.Context(), kube.Options{Client: c.client, Attacher: c.kubelet, Namespace: c.ns, Registry: c.registry, Relay: "/bin/sh",
		Forwarder: kube.NewForwarder(nil, nil)})
	if err == nil || !strings.Contains(err.Error(), "linked dynamically") {
		t.Errorf("New with /bin/sh as the relay: %v, want a refusal saying it is linked dynamically", err)
	}
	o := kube.Options{Client: c.client, Attacher: c.kubelet, Namespace: c.ns, Registry: c.registry}
	withRelay(&o)
	o.Forwarder = nil
	if _, err := kube.New(t.Context(), o); err == nil || !strings.Contains(err.Error(), "forwarder") {
		t.Errorf("New with a relay and no forwarder: %v, want a refusal naming the forwarder", err)
	}
}

// A sandbox within another's pod (a brought agent inside its environment) is an ephemeral
// container of that pod, locked down as the pod's own: it works in the pod's work dir, finds its
// listener inside from its first instruction, and is stopped through the relay's lifeline
// within the relay's grace, the pod left running.
func TestASandboxWithinAPodIsAnEphemeralContainerOfIt(t *testing.T) {
	c := newCluster(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := c.provider(t, 1, c.withRelay(t))
	defer p.Close(context.Background())
	env, err := p.Start(t.Context(), sandbox.Spec{ID: "env", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop(context.Background())
	podName := env.(interface{ Pod() string }).Pod()

	out, err := sandboxtest.RunListening(t, p, sandbox.Spec{ID: "agent", Image: im.Of(t, root), Companion: true, Within: env,
		Command: []string{"/bin/sh", "-c", `echo "written in $PWD" > answer.txt && /bin/busybox wget -q -O- http://127.0.0.1:7777/inside`}}, 7777)
	var status sandbox.ExitStatus
	if out != "served /inside;" || !errors.As(err, &status) || status.ExitCode() != 0 {
		t.Errorf("a sandbox within the pod: %q, %v; want the served body and exit status 0", out, err)
	}
	b, err := os.ReadFile(filepath.Join(c.kubelet.waitProc(podName+"/"+kube.ContainerName).sb.WorkDir(), "answer.txt"))
	if err != nil || string(b) != "written in "+sandbox.WorkDirInImage+"\n" {
		t.Errorf("the pod's work dir holds %q (%v); want the file the sandbox within it wrote", b, err)
	}
	pod, err := c.client.CoreV1().Pods(c.ns).Get(t.Context(), podName, metav1.GetOptions{})
	if err != nil || len(pod.Spec.EphemeralContainers) != 1 {
		t.Fatalf("the pod's ephemeral containers: %v, %v", pod, err)
	}
	ec := pod.Spec.EphemeralContainers[0]
	if sc := ec.SecurityContext; *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || len(sc.Capabilities.Drop) != 1 ||
		ec.Command[0] != "/.proctor/relay" || ec.Args[0] != "--lifeline" || ec.WorkingDir != sandbox.WorkDirInImage ||
		len(ec.VolumeMounts) != 2 || ec.VolumeMounts[1].Name != "work" {
		t.Errorf("the ephemeral container: %+v", ec)
	}

	// One that would run on is stopped through its lifeline, and the pod runs on.
	startLong := func(id string) sandbox.Sandbox {
		long, err := p.Start(t.Context(), sandbox.Spec{ID: id, Image: im.Of(t, root), Companion: true, Within: env, Command: []string{"/bin/sleep", "300"},
			Listen: &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) { ln.Close() }}})
		if err != nil {
			t.Fatal(err)
		}
		long.Stdin().Close() // as a brought agent's is: it does not end the lifeline
		return long
	}
	long := startLong("long")
	begin := time.Now()
	if err := long.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took := time.Since(begin); took > 8*time.Second || !errors.As(long.Err(), &status) || status.ExitCode() != 251 || errors.Is(long.Err(), sandbox.ErrLost) {
		t.Errorf("stopping a sandbox within a pod took %s and ended %v; want the relay's stop (status 251) within its grace", took, long.Err())
	}
	// One whose lifeline breaks (its attachment lost) is stopped by the relay too, and ends lost:
	// the host's doing, not its command's.
	broken := startLong("broken")
	pod, _ = c.client.CoreV1().Pods(c.ns).Get(t.Context(), podName, metav1.GetOptions{})
	c.kubelet.waitProc(podName + "/" + pod.Spec.EphemeralContainers[2].Name).sb.Stdin().Close()
	select {
	case <-broken.Done():
		if !errors.Is(broken.Err(), sandbox.ErrLost) {
			t.Errorf("a sandbox within a pod whose lifeline broke ended %v; want ErrLost", broken.Err())
		}
	case <-time.After(30 * time.Second):
		t.Error("a sandbox within a pod whose lifeline broke still runs after 30s")
	}
	broken.Stop(context.Background())
	select {
	case <-env.Done():
		t.Errorf("the pod ended with the sandbox within it: %v", env.Err())
	default:
	}
}

// A brought agent inside its environment's pod runs from the environment's image, its own image
// copied into a volume of the pod that the environment's container does not mount, by a
// container of that image (the relay's copy mode), shown read-only, and its program run by that
// image's own loader (sandboxtest.Inside).
func TestASandboxWithinAPodIsShownAnotherImageCopiedIn(t *testing.T) {
	c := newCluster(t)
	root := sandboxtest.Root(t)
	var im sandboxtest.Images
	p := c.provider(t, 1, c.withRelay(t))
	defer p.Close(context.Background())
	env, err := p.Start(t.Context(), sandbox.Spec{ID: "env", Command: []string{"/bin/sleep", "300"}, Image: im.Of(t, root)})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop(context.Background())
	podName := env.(interface{ Pod() string }).Pod()
	sandboxtest.Inside(t, p, env, sandbox.Spec{Image: im.Of(t, root)})
	pod, err := c.client.CoreV1().Pods(c.ns).Get(t.Context(), podName, metav1.GetOptions{})
	if err != nil || len(pod.Spec.EphemeralContainers) != 2 {
		t.Fatalf("the pod's ephemeral containers: %v, %v", pod, err)
	}
	cp, agent := pod.Spec.EphemeralContainers[0], pod.Spec.EphemeralContainers[1]
	if !slices.Equal(cp.Command, []string{"/.proctor/relay", "--copy-root", sandbox.AgentRootInside}) || !*cp.SecurityContext.ReadOnlyRootFilesystem ||
		len(cp.VolumeMounts) != 1 || cp.VolumeMounts[0] != (corev1.VolumeMount{Name: "agent", MountPath: sandbox.AgentRootInside}) {
		t.Errorf("the copying container: %+v", cp)
	}
	if vm := agent.VolumeMounts[len(agent.VolumeMounts)-1]; vm != (corev1.VolumeMount{Name: "agent", MountPath: sandbox.AgentRootInside, ReadOnly: true}) {
		t.Errorf("the agent's container mounts %+v", agent.VolumeMounts)
	}
	// The environment's own container cannot reach the agent's files.
	for _, vm := range pod.Spec.Containers[0].VolumeMounts {
		if vm.Name == "agent" {
			t.Errorf("the pod's container mounts the agent's volume: %+v", vm)
		}
	}

	// Only an image's files, in a sandbox within a pod, read-only under /tmp.
	img := im.Of(t, root)
	for name, m := range map[string]sandbox.Mount{
		"a host directory": {Source: root, Target: sandbox.AgentRootInside},
		"writable":         {Image: img, Target: sandbox.AgentRootInside, Writable: true},
		"outside /tmp":     {Image: img, Target: "/opt/agent"},
		"in the work dir":  {Image: img, Target: sandbox.WorkDirInImage + "/agent"},
	} {
		if name == "a host directory" {
			// Nor one in a pod of its own.
			if _, err := p.Start(t.Context(), sandbox.Spec{ID: "n", Command: []string{"/bin/true"}, Image: img,
				Mounts: []sandbox.Mount{{Image: img, Target: sandbox.AgentRootInside}}}); !errors.Is(err, sandbox.ErrInvalidSpec) {
				t.Errorf("an image's files in a pod of its own: Start = %v, want ErrInvalidSpec", err)
			}
		}
		spec := sandbox.Spec{ID: "m", Command: []string{"/bin/true"}, Image: img, Mounts: []sandbox.Mount{m}, Within: env}
		if _, err := p.Start(t.Context(), spec); !errors.Is(err, sandbox.ErrInvalidSpec) {
			t.Errorf("%s: Start = %v, want ErrInvalidSpec", name, err)
		}
	}
}

// The relay's back port takes only the worker's connections: another process of the pod that
// connects there (in a pod shared with an environment, one of its) never receives the agent's
// requests. And a port forwarding session that breaks (an API server's restart) is opened anew:
// the agent's next calls are served.
func TestTheRelayTakesOnlyTheWorkersConnectionsAndOutlivesASession(t *testing.T) {
	c := newCluster(t)
	p := c.provider(t, 1, c.withRelay(t))
	defer p.Close(context.Background())
	img := new(sandboxtest.Images).Of(t, sandboxtest.Root(t))
	// A process that connects to the back port first and prints what it receives; then more
	// calls than the worker keeps connections idle for, so that later ones would pair with it.
	out, err := sandboxtest.RunListening(t, p, sandbox.Spec{ID: "rogue", Image: img, Command: []string{"/bin/sh", "-c",
		// The shell's echo writes each line as it comes (sed would hold it in its buffer until
		// it exits, which may be after the sandbox is gone).
		`(/bin/sleep 20 | /bin/busybox nc 127.0.0.1 8418 | while read -r l; do echo "rogue read: $l"; done) & /bin/sleep 0.5; ` +
			`for i in 1 2 3 4 5 6 7 8; do /bin/busybox wget -q -O- http://127.0.0.1:7777/$i || exit 1; done`}}, 7777)
	var status sandbox.ExitStatus
	// It reads the relay's greeting, which only proves the relay knows the token, and nothing more.
	if strings.Count(out, "served") != 8 || strings.Count(out, "rogue read") != 1 || strings.Contains(out, "GET") ||
		!errors.As(err, &status) || status.ExitCode() != 0 {
		t.Errorf("calls beside a process on the back port: %q, %v; want 8 served calls, none read by it", out, err)
	}

	served := make(chan struct{}, 16)
	sb, err := p.Start(t.Context(), sandbox.Spec{ID: "long", Image: img, Command: []string{"/bin/sleep", "300"},
		Listen: &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) {
			go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { //nolint:errcheck // ends with ln
				served <- struct{}{}
				io.WriteString(w, "ok")
			}))
		}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop(context.Background())
	pod := sb.(interface{ Pod() string }).Pod()
	call := func() error {
		conn, err := c.kubelet.dialPod(pod, 7777)
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
		b, err := io.ReadAll(conn)
		if !strings.HasSuffix(string(b), "ok") {
			return fmt.Errorf("answer %q: %v", b, err)
		}
		return nil
	}
	for deadline := time.Now().Add(10 * time.Second); call() != nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no call served before the session broke")
		}
	}
	c.kubelet.dropSessions()
	for i := range 6 {
		if err := call(); err != nil {
			t.Errorf("call %d after the port forwarding session broke: %v", i, err)
		}
	}
}
