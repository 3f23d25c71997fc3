package kube

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/proctorhq/proctor/internal/relayproto"
)

// Where a brought agent's pod (Spec.Listen) has the relay and its ports: the relay listens on
// the spec's port for the agent, and on relayBackPort for the worker's connections.
const (
	relayInImage  = "/.proctor/relay"
	relayBackPort = 8418
	// tunnelIdle is how many idle connections the worker keeps open to the relay: each carries
	// the next connection the agent makes, so that it waits for no dial through the API server.
	tunnelIdle = 4
)

// tunnel is the listener a pod's Spec.Listen is handed: it keeps tunnelIdle connections open to
// the relay's back port through a port forwarding session, each opening with the relay's
// greeting and the worker's token, and accepts each once the relay has given it a connection of the agent's (and says so with
// one byte, which the worker answers with the same byte). A session that breaks (the API server restarted, a proxy's idle timeout) is opened
// anew.
type tunnel struct {
	// forward opens a session; ctx ends with the tunnel.
	forward func(ctx context.Context) (Forwarding, error)
	ctx     context.Context
	cancel  context.CancelFunc
	opening sync.Mutex // held while a session is opened: one at a time
	token   string
	hello   string // the relay's greeting for token
	pod     string
	log     *slog.Logger
	next    chan net.Conn
	done    chan struct{}
	once    sync.Once

	mu   sync.Mutex
	fw   Forwarding // the session, nil while none is open
	idle map[net.Conn]bool
}

func newTunnel(fw Forwarding, forward func(context.Context) (Forwarding, error), token, pod string, log *slog.Logger) *tunnel {
	t := &tunnel{fw: fw, forward: forward, token: token, pod: pod, log: log, next: make(chan net.Conn), done: make(chan struct{}),
		idle: map[net.Conn]bool{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.hello = relayproto.Hello(token)
	for range tunnelIdle {
		go t.keep()
	}
	return t
}

// keep keeps one idle connection open to the relay, and hands it to Accept once it carries one
// of the agent's, until the tunnel closes. A dial that fails (the relay not listening yet, as
// the pod starts) is tried again, waiting longer each time, up to a second.
func (t *tunnel) keep() {
	wait := 10 * time.Millisecond
	for {
		err := t.carry()
		if err == nil {
			wait = 10 * time.Millisecond
			continue
		}
		select {
		case <-t.done:
			return
		case <-time.After(wait):
		}
		t.log.Debug("sandbox: a connection to the agent's relay failed; trying again", "pod", t.pod, "error", err)
		wait = min(2*wait, time.Second)
	}
}

// session is the open port forwarding session, opened anew when there is none (never under mu,
// which Close takes: the opening ends with the tunnel's context).
func (t *tunnel) session() (Forwarding, error) {
	t.opening.Lock()
	defer t.opening.Unlock()
	t.mu.Lock()
	fw := t.fw
	t.mu.Unlock()
	if fw != nil {
		return fw, nil
	}
	fw, err := t.forward(t.ctx)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	select {
	case <-t.done:
		fw.Close()
		return nil, net.ErrClosed
	default:
	}
	t.fw = fw
	t.log.Info("sandbox: port forwarding to a brought agent's pod opened anew", "pod", t.pod)
	return fw, nil
}

// broken drops fw, a session a dial through failed: the next dial opens another.
func (t *tunnel) broken(fw Forwarding) {
	t.mu.Lock()
	mine := t.fw == fw
	if mine {
		t.fw = nil
	}
	t.mu.Unlock()
	if mine {
		fw.Close() // it writes to the connection, which may be stalled: never under mu
	}
}

// carry opens one connection to the relay, waits for the relay to give it one of the agent's,
// and hands it to Accept.
func (t *tunnel) carry() error {
	fw, err := t.session()
	if err != nil {
		return err
	}
	c, err := fw.Dial(relayBackPort)
	if err != nil {
		t.broken(fw)
		return err
	}
	// The relay speaks first, proving it knows the token: nothing is sent through a connection
	// the kubelet could not make (the relay not listening yet), nor to a listener of another's.
	c.SetReadDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // a pipe's
	greeting := make([]byte, len(t.hello)+1)
	if _, err := io.ReadFull(c, greeting); err != nil || !hmac.Equal(greeting, []byte(t.hello+"\n")) {
		c.Close()
		return fmt.Errorf("the relay's greeting: %q, %v", greeting, err)
	}
	c.SetReadDeadline(time.Time{}) //nolint:errcheck // a pipe's
	if _, err := io.WriteString(c, t.token+"\n"); err != nil {
		c.Close()
		return fmt.Errorf("greeting the relay: %w", err)
	}
	t.mu.Lock()
	select {
	case <-t.done:
		t.mu.Unlock()
		return c.Close()
	default:
	}
	t.idle[c] = true
	t.mu.Unlock()
	var b [1]byte
	_, err = io.ReadFull(c, b[:])
	t.mu.Lock()
	delete(t.idle, c)
	t.mu.Unlock()
	if err != nil {
		c.Close()
		return fmt.Errorf("waiting for the relay: %w", err)
	}
	// The relay waits for this answer before it relays the agent's connection: through a
	// session that broke, none comes, and the relay gives the connection to another.
	if _, err := c.Write(b[:]); err != nil {
		c.Close()
		return fmt.Errorf("answering the relay: %w", err)
	}
	select {
	case t.next <- c:
		return nil
	case <-t.done:
		return c.Close()
	}
}

func (t *tunnel) Accept() (net.Conn, error) {
	select {
	case c := <-t.next:
		return c, nil
	case <-t.done:
		return nil, net.ErrClosed
	}
}

// Close stops keeping connections, closes the idle ones and ends the session (and with it the
// connections Accept gave).
func (t *tunnel) Close() error {
	var err error
	t.once.Do(func() {
		close(t.done)
		t.cancel()
		t.mu.Lock()
		idle, fw := t.idle, t.fw
		t.idle, t.fw = map[net.Conn]bool{}, nil
		t.mu.Unlock()
		for c := range idle {
			c.Close()
		}
		if fw != nil {
			err = fw.Close()
		}
		// The keepers end once their calls do; a dial through a session that is closing may
		// wait for the stream's reply until it times out, so Close does not wait for them.
	})
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (t *tunnel) Addr() net.Addr { return podAddr{pod: t.pod, port: relayBackPort} }

// podAddr is a port on a pod's loopback, reached by port forwarding.
type podAddr struct {
	pod  string
	port int
}

func (podAddr) Network() string  { return "portforward" }
func (a podAddr) String() string { return fmt.Sprintf("%s:%d", a.pod, a.port) }
