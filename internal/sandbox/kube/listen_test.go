package kube_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/kube"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
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
