package kube

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// Where a brought agent's pod (Spec.Listen) has the relay and its ports: the relay listens on
// the spec's port for the agent, and on relayBackPort for the worker's connections.
const (
	relayInImage  = "/.proctor/relay"
	relayBackPort = 8418
	// tunnelIdle is how many idle connections the worker keeps open to the relay: each carries
	// the next connection the agent makes, so that it waits for no dial through the API server.
	tunnelIdle = 4
	// lifelineGrace is the relay's between SIGTERM and SIGKILL once its lifeline ends
	// (cmd/proctor-relay).
	lifelineGrace = 5 * time.Second
)

// tunnel is the listener a pod's Spec.Listen is handed: it keeps tunnelIdle connections open to
// the relay's back port through a port forwarding session, and accepts each once the relay
// has given it a connection of the agent's (and says so with one byte).
type tunnel struct {
	fw   Forwarding
	pod  string
	log  *slog.Logger
	next chan net.Conn
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup

	mu   sync.Mutex
	idle map[net.Conn]bool
}

func newTunnel(fw Forwarding, pod string, log *slog.Logger) *tunnel {
	t := &tunnel{fw: fw, pod: pod, log: log, next: make(chan net.Conn), done: make(chan struct{}), idle: map[net.Conn]bool{}}
	t.wg.Add(tunnelIdle)
	for range tunnelIdle {
		go t.keep()
	}
	return t
}

// keep keeps one idle connection open to the relay, and hands it to Accept once it carries one
// of the agent's, until the tunnel closes. A dial that fails (the relay not listening yet, as
// the pod starts) is tried again, waiting longer each time, up to a second.
func (t *tunnel) keep() {
	defer t.wg.Done()
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

// carry opens one connection to the relay, waits for the relay to give it one of the agent's,
// and hands it to Accept.
func (t *tunnel) carry() error {
	c, err := t.fw.Dial(relayBackPort)
	if err != nil {
		return err
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
		t.mu.Lock()
		for c := range t.idle {
			c.Close()
		}
		t.mu.Unlock()
		err = t.fw.Close()
		t.wg.Wait()
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
