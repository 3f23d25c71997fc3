package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// Forwarder opens port forwarding sessions to pods, as `kubectl port-forward` does: it is how
// the worker reaches the relay inside a brought agent's pod (Spec.Listen), from wherever it
// runs, through the API server alone. NewForwarder is the real one.
type Forwarder interface {
	Forward(ctx context.Context, namespace, pod string) (Forwarding, error)
}

// Forwarding is one session to a pod: each Dial is a connection to a port on the pod's own
// loopback. Close ends the session and every connection of it.
type Forwarding interface {
	Dial(port int) (net.Conn, error)
	Close() error
}

// NewForwarder forwards through the API server's pods/portforward subresource, over WebSocket,
// or SPDY where the API server is older than WebSockets support (as kubectl does). The worker's
// role needs create on pods/portforward.
func NewForwarder(cfg *rest.Config, client kubernetes.Interface) Forwarder {
	return &apiForwarder{cfg: cfg, client: client}
}

type apiForwarder struct {
	cfg    *rest.Config
	client kubernetes.Interface
}

func (f *apiForwarder) Forward(ctx context.Context, namespace, pod string) (Forwarding, error) {
	u := f.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(f.cfg)
	if err != nil {
		return nil, err
	}
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, f.cfg)
	if err != nil {
		return nil, err
	}
	dialer := portforward.NewFallbackDialer(ws, spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u),
		func(err error) bool { return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) })
	type result struct {
		conn httpstream.Connection
		err  error
	}
	ch := make(chan result, 1)
	go func() { // the dialers take no context
		conn, _, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		ch <- result{conn, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("port forwarding to pod %s: %w", pod, r.err)
		}
		return &session{conn: r.conn, pod: pod}, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, fmt.Errorf("port forwarding to pod %s: %w", pod, ctx.Err())
	}
}

// session is a port forwarding connection: each Dial opens the pair of streams the protocol
// asks for (one for errors, one for data), with a fresh request id.
type session struct {
	conn httpstream.Connection
	pod  string
	next atomic.Int64
}

func (s *session) Close() error { return s.conn.Close() }

func (s *session) Dial(port int) (net.Conn, error) {
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatInt(s.next.Add(1), 10))
	errs, err := s.conn.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("port forwarding to pod %s: %w", s.pod, err)
	}
	errs.Close() // nothing is written to it
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := s.conn.CreateStream(h)
	if err != nil {
		s.conn.RemoveStreams(errs)
		return nil, fmt.Errorf("port forwarding to pod %s: %w", s.pod, err)
	}
	// A stream has no deadlines, which net/http needs of a connection (it ends a pending read
	// with one): the stream is bridged to one end of a pipe, and the other end is the conn.
	near, far := net.Pipe()
	c := &streamConn{Conn: near, data: data}
	errsRead := make(chan struct{})
	go func() {
		defer close(errsRead)
		c.failOnError(errs)
	}()
	var both sync.WaitGroup
	both.Add(2)
	go func() {
		defer both.Done()
		if _, err := io.Copy(far, data); err != nil {
			// The conn was closed here. What more comes is dropped, but read: a stream of a
			// session left unread holds up every other (the session delivers in order).
			io.Copy(io.Discard, data) //nolint:errcheck // ends with the stream
		}
		// The kubelet's error, if any, comes on the other stream: the conn's end says it
		// when it has come by then.
		select {
		case <-errsRead:
		case <-time.After(time.Second):
		}
		far.Close()
	}()
	go func() {
		defer both.Done()
		// Closing the conn ends this copy once it has written what it read: the stream is
		// closed for writing after the last byte, never reset under it.
		io.Copy(data, far) //nolint:errcheck // ends with either side
		data.Close()
	}()
	go func() {
		both.Wait()
		s.conn.RemoveStreams(data, errs)
	}()
	return c, nil
}

// streamConn is one forwarded connection.
type streamConn struct {
	net.Conn
	data    httpstream.Stream
	failure atomic.Pointer[error]
}

// failOnError ends the connection with the error the kubelet reports on its error stream (the
// port not listening, say).
func (c *streamConn) failOnError(errs httpstream.Stream) {
	msg, err := io.ReadAll(errs)
	if err == nil && len(msg) > 0 {
		failure := errors.New(string(msg))
		c.failure.Store(&failure)
		c.data.Reset() //nolint:errcheck // the connection may be gone
		c.Conn.Close()
	}
}

func (c *streamConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil {
		if f := c.failure.Load(); f != nil {
			err = *f
		}
	}
	return n, err
}
