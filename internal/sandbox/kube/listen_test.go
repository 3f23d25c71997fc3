package kube_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
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
	long, err := p.Start(t.Context(), sandbox.Spec{ID: "long", Image: im.Of(t, root), Companion: true, Within: env, Command: []string{"/bin/sleep", "300"},
		Listen: &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) { ln.Close() }}})
	if err != nil {
		t.Fatal(err)
	}
	long.Stdin().Close() // as a brought agent's is: it does not end the lifeline
	begin := time.Now()
	if err := long.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if took := time.Since(begin); took > 8*time.Second || !errors.As(long.Err(), &status) || status.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Errorf("stopping a sandbox within a pod took %s and ended %v; want the relay's SIGTERM within its grace", took, long.Err())
	}
	select {
	case <-env.Done():
		t.Errorf("the pod ended with the sandbox within it: %v", env.Err())
	default:
	}
}
