package kube_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/proctorhq/proctor/internal/sandbox"
	"github.com/proctorhq/proctor/internal/sandbox/sandboxtest"
	"github.com/proctorhq/proctor/internal/testenv"
)

// BenchmarkRelayTunnel measures what the way a brought agent's pod reaches its worker adds to an
// HTTP call (the agent's model or tool call): from inside the pod, through the relay and a port
// forwarding session of the (fake) API server, to the worker's server, against the same server
// called on the worker's loopback. Both clients keep their connections alive, as the SDKs do.
func BenchmarkRelayTunnel(b *testing.B) {
	c := newCluster(b)
	p := c.provider(b, 1, c.withRelay(b))
	defer p.Close(context.Background())
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"ok":true}`) })
	direct := httptest.NewServer(handler)
	defer direct.Close()
	var served net.Listener
	sb, err := p.Start(b.Context(), sandbox.Spec{ID: "agent", Command: []string{"/bin/sleep", "300"}, Image: new(sandboxtest.Images).Of(b, sandboxtest.Root(b)),
		Listen: &sandbox.Listen{Port: 7777, Ready: func(ln net.Listener) {
			served = ln
			go http.Serve(ln, handler) //nolint:errcheck // ends with ln
		}}})
	if err != nil {
		b.Fatal(err)
	}
	defer sb.Stop(context.Background())
	defer served.Close()
	pod := sb.(interface{ Pod() string }).Pod()
	// The relay listens once its process has started, a moment after the pod runs.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		conn, err := c.kubelet.dialPod(pod, 7777)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal(err)
		}
	}
	// The agent's side: a client whose connections are made inside the pod's network namespace.
	inside := &http.Client{Transport: &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		return c.kubelet.dialPod(pod, 7777)
	}}}
	call := func(client *http.Client, url string) func() error {
		return func() error {
			res, err := client.Get(url)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			if body, _ := io.ReadAll(res.Body); string(body) != `{"ok":true}` {
				return fmt.Errorf("answer %q", body)
			}
			return nil
		}
	}
	testenv.MeasureAddedLatency(b, "relayed", call(direct.Client(), direct.URL), call(inside, "http://127.0.0.1:7777/"))
}
