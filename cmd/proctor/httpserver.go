package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/proctorhq/proctor/internal/config"
)

// httpServer serves the API on a listener until shutdown.
type httpServer struct {
	srv     *http.Server
	addr    string
	done    chan error
	limiter *connLimiter // nil when unbounded
}

// httpLimits are the bounds of the API's HTTP server (config: --http-*).
type httpLimits struct {
	read, write, idle time.Duration
	maxConns          int
	// maxConnsPerAddr caps the connections from one remote address (0: no cap); probeReserve
	// is how many connections past maxConns may still ask /healthz and /readyz.
	maxConnsPerAddr, probeReserve int
}

// probeReserve is the number of connections past --http-max-conns kept for health probes: a
// kubelet or load balancer asks two or three at once per node.
const probeReserve = 16

func limitsOf(cfg *config.Config) httpLimits {
	return httpLimits{read: cfg.HTTPReadTimeout, write: cfg.HTTPWriteTimeout, idle: cfg.HTTPIdleTimeout, maxConns: cfg.HTTPMaxConns,
		maxConnsPerAddr: cfg.HTTPMaxConnsPerAddr, probeReserve: probeReserve}
}

func startHTTP(addr string, h http.Handler, lim httpLimits, log *slog.Logger) (*httpServer, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return serveHTTP(l, h, lim, log), nil
}

// serveHTTP serves h on l, within lim.
func serveHTTP(l net.Listener, h http.Handler, lim httpLimits, log *slog.Logger) *httpServer {
	var limiter *connLimiter
	if lim.maxConns > 0 || lim.maxConnsPerAddr > 0 {
		limiter = newConnLimiter(l, lim)
		l, h = limiter, limiter.guardReserve(h)
	}
	hs := &httpServer{
		srv: &http.Server{
			Handler: h,
			// A slow or idle client cannot hold a connection for ever: the headers within 10 s,
			// the whole request within read, the answer within write, and an idle keep-alive
			// connection closes after idle.
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       lim.read,
			WriteTimeout:      lim.write,
			IdleTimeout:       lim.idle,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		addr:    l.Addr().String(),
		done:    make(chan error, 1),
		limiter: limiter,
	}
	if limiter != nil {
		hs.srv.ConnState = limiter.connState
		hs.srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		}
	}
	go func() {
		err := hs.srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		hs.done <- err
	}()
	return hs
}

// connLimiter bounds the connections served at once, and keeps one client from taking them all:
//
//   - at most perAddr connections from one remote address: past that a new one is closed at once;
//   - at most max connections in all: past pressure (seven eighths of max), the oldest idle
//     keep-alive connections are closed to make room, since they cost their client only a
//     reconnect;
//   - reserve connections past max, which may only ask /healthz or /readyz (answered, then closed);
//     any other request on one waits up to reserveWait for a slot, else 503. Only once the
//     reserve is full too does Accept wait (the client waits in the kernel's backlog meanwhile).
//
// The http.Server reports each connection's state (ConnState) and names the connection of each
// request (ConnContext), so that the limiter knows which are idle and which are in the reserve.
type connLimiter struct {
	net.Listener
	max, reserve, perAddr int
	pressure              int
	reserveWait           time.Duration

	mu       sync.Mutex
	served   int            // connections holding one of the max slots
	reserved int            // connections in the reserve
	byAddr   map[string]int // open connections by remote address
	idle     map[*limitedConn]time.Time
	refused  int // connections closed at once for their address (for tests and logs)
	evicted  int // idle connections closed under pressure
	changed  chan struct{}
	closed   chan struct{}
	once     sync.Once
}

func newConnLimiter(l net.Listener, lim httpLimits) *connLimiter {
	return &connLimiter{
		Listener: l, max: lim.maxConns, reserve: lim.probeReserve, perAddr: lim.maxConnsPerAddr,
		pressure: lim.maxConns - lim.maxConns/8, reserveWait: 5 * time.Second,
		byAddr: map[string]int{}, idle: map[*limitedConn]time.Time{},
		changed: make(chan struct{}), closed: make(chan struct{}),
	}
}

func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := remoteHost(c)
		l.mu.Lock()
		if l.perAddr > 0 && l.byAddr[addr] >= l.perAddr {
			l.refused++
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.byAddr[addr]++
		l.mu.Unlock()
		lc := &limitedConn{Conn: c, l: l, addr: addr}
		if err := l.admit(lc); err != nil {
			c.Close()
			l.forget(addr)
			return nil, err
		}
		return lc, nil
	}
}

// admit gives c a slot, else a place in the reserve, else waits for a slot.
func (l *connLimiter) admit(c *limitedConn) error {
	if l.max <= 0 {
		return nil
	}
	for {
		l.mu.Lock()
		victims := l.evictLocked(l.served + 1 - l.pressure)
		switch {
		case l.served < l.max:
			l.served++
			c.slot = true
		case l.reserved < l.reserve:
			l.reserved++
			c.reserved = true
		}
		changed := l.changed
		l.mu.Unlock()
		for _, v := range victims {
			v.Close()
		}
		if c.slot || c.reserved {
			return nil
		}
		if len(victims) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-l.closed:
			return net.ErrClosed
		}
	}
}

// promote moves c from the reserve to a slot, waiting up to reserveWait for one.
func (l *connLimiter) promote(ctx context.Context, c *limitedConn) bool {
	timer := time.NewTimer(l.reserveWait)
	defer timer.Stop()
	for {
		l.mu.Lock()
		victims := l.evictLocked(l.served + 1 - l.pressure)
		ok := l.served < l.max
		if ok {
			l.served++
			l.reserved--
			c.slot, c.reserved = true, false
			l.notifyLocked()
		}
		changed := l.changed
		l.mu.Unlock()
		for _, v := range victims {
			v.Close()
		}
		if ok {
			return true
		}
		if len(victims) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		}
	}
}

// evictLocked takes up to n of the oldest idle connections out of the idle set, for the caller
// to close once the lock is released.
func (l *connLimiter) evictLocked(n int) []*limitedConn {
	if n <= 0 || len(l.idle) == 0 {
		return nil
	}
	victims := make([]*limitedConn, 0, len(l.idle))
	for c := range l.idle {
		victims = append(victims, c)
	}
	slices.SortFunc(victims, func(a, b *limitedConn) int { return l.idle[a].Compare(l.idle[b]) })
	victims = victims[:min(n, len(victims))]
	for _, c := range victims {
		delete(l.idle, c)
	}
	l.evicted += len(victims)
	return victims
}

// connState is the http.Server's ConnState hook: it keeps the set of idle connections.
func (l *connLimiter) connState(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if state == http.StateIdle {
		l.idle[c] = time.Now()
		// A waiting Accept may now close it.
		l.notifyLocked()
	} else {
		delete(l.idle, c)
	}
}

func (l *connLimiter) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *connLimiter) forget(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
		delete(l.byAddr, addr)
	}
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.idle, c)
	if c.slot {
		l.served--
	}
	if c.reserved {
		l.reserved--
	}
	if l.byAddr[c.addr]--; l.byAddr[c.addr] <= 0 {
		delete(l.byAddr, c.addr)
	}
	l.notifyLocked()
}

// counts reports the connections open (in slots and in the reserve), refused for their address
// and closed idle under pressure.
func (l *connLimiter) counts() (served, reserved, refused, evicted int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.served, l.reserved, l.refused, l.evicted
}

// Close also ends an Accept waiting for a slot, so that a shutdown is not held up.
func (l *connLimiter) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// guardReserve answers a request on a reserve connection: a probe is served and its connection
// closed after; anything else waits for a slot, else 503.
func (l *connLimiter) guardReserve(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Context().Value(connKey{}).(*limitedConn)
		if c != nil && c.inReserve() {
			if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
				w.Header().Set("Connection", "close")
			} else if !l.promote(r.Context(), c) {
				w.Header().Set("Connection", "close")
				w.Header().Set("Retry-After", "1")
				http.Error(w, "the server is at its connection limit; retry shortly", http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

type connKey struct{}

func remoteHost(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}

type limitedConn struct {
	net.Conn
	l              *connLimiter
	addr           string
	slot, reserved bool // guarded by l.mu
	once           sync.Once
}

func (c *limitedConn) inReserve() bool {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	return c.reserved
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// shutdown stops accepting, lets in-flight requests finish within timeout, then closes the rest.
func (hs *httpServer) shutdown(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := hs.srv.Shutdown(ctx)
	if err != nil {
		hs.srv.Close()
	}
	return errors.Join(err, <-hs.done)
}

// stopLogged is shutdown for a deferred stop: a failure is logged, named by what the server
// serves.
func (hs *httpServer) stopLogged(timeout time.Duration, log *slog.Logger, what string) {
	if err := hs.shutdown(timeout); err != nil {
		log.Warn(what+" shutdown", "error", err)
	}
}

// cmdHealthcheck asks url (the API's /readyz by default; a worker's /healthz on its
// --metrics-addr) and fails unless it answers 200: images without curl use it for their health
// checks.
func cmdHealthcheck(ctx context.Context, args []string, stdout io.Writer) error {
	url := "http://127.0.0.1:8080/readyz"
	if len(args) == 1 {
		url = args[0]
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s: %s", url, res.Status, strings.TrimSpace(string(body)))
	}
	fmt.Fprintf(stdout, "%s: %s\n", url, res.Status)
	return nil
}
