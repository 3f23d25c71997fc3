// Package egress is a sandbox's only way out to the network: an HTTP forward proxy (CONNECT
// tunnels, and plain-HTTP requests in absolute form) that the worker serves on the listener
// inside the sandbox's own network namespace (sandbox.Spec.Listen). A sandbox allowed the
// network reaches the internet through it and nothing else: the proxy resolves every name
// itself, dials only the addresses it vetted (so a name that resolves to the host cannot be
// used to reach it), and refuses the loopback, private, shared and link-local ranges (cloud
// metadata included), the worker's own addresses, and, under an allowlist, every host not named.
//
// Programs honour it through the standard variables (Env): curl, wget, pip, npm, apt, git, Go's
// and Python's HTTP clients. A program that ignores them reaches nothing, as in a sandbox without
// the network: there is no route out of the namespace and no resolver in it.
//
// It imports the standard library only.
package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxConns bounds the connections a sandbox holds through its proxy at once: a sandbox that
// opens more is answered 503 until some close.
const MaxConns = 256

// dialTimeout bounds a connection to a destination.
const dialTimeout = 15 * time.Second

// Options configure a Proxy.
type Options struct {
	Policy Policy
	// Log, when set, is told of each destination the sandbox asks for, reached or refused (and
	// why), in a line fit for the attempt's logs.
	Log func(line string)
	// Lookup resolves a name to its addresses; nil: the host's resolver.
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Own are the worker's own addresses, refused like the loopback; nil: its interfaces'.
	Own []netip.Addr
	// Dial connects to an address the policy admitted; nil: a TCP dial. (Tests send admitted
	// addresses to servers of their own.)
	Dial func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
}

// Proxy is one sandbox's egress. It is an http.Handler for proxy requests (IsProxyRequest).
type Proxy struct {
	o         Options
	own       map[netip.Addr]bool
	transport *http.Transport

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

// ErrRefused wraps a destination the policy refuses.
var ErrRefused = errors.New("refused")

// New makes a proxy for o.
func New(o Options) (*Proxy, error) {
	if err := o.Policy.Check(); err != nil {
		return nil, err
	}
	if o.Lookup == nil {
		o.Lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	p := &Proxy{o: o, conns: map[net.Conn]struct{}{}}
	if o.Own == nil {
		p.own = hostAddrs()
	} else {
		p.own = map[netip.Addr]bool{}
		for _, a := range o.Own {
			p.own[a.Unmap()] = true
		}
	}
	p.transport = &http.Transport{
		Proxy:                 nil, // it is the proxy: never another
		DialContext:           func(ctx context.Context, _, addr string) (net.Conn, error) { return p.dial(ctx, addr) },
		ResponseHeaderTimeout: time.Minute,
		IdleConnTimeout:       30 * time.Second,
		MaxIdleConns:          16,
	}
	return p, nil
}

// IsProxyRequest says whether r is for the proxy: a CONNECT, or a request in absolute form
// (GET http://host/path), which no other server of a sandbox's listener receives.
func IsProxyRequest(r *http.Request) bool {
	return r.Method == http.MethodConnect || r.URL.IsAbs()
}

// Env is what a sandbox's processes are given to use the proxy at url (http://127.0.0.1:PORT):
// the variables every common client reads, in both cases, and the loopback left to itself.
func Env(url string) map[string]string {
	e := map[string]string{}
	for _, k := range []string{"http_proxy", "https_proxy", "all_proxy"} {
		e[k], e[strings.ToUpper(k)] = url, url
	}
	e["no_proxy"], e["NO_PROXY"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	return e
}

// ServeHTTP serves a proxy request; anything else is answered 400.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodConnect:
		p.tunnel(w, r)
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		p.forward(w, r)
	case r.URL.IsAbs():
		http.Error(w, "proctor egress: only http:// is forwarded; for https, CONNECT (clients do, given the proxy)", http.StatusBadRequest)
	default:
		http.Error(w, "proctor egress: not a proxy request", http.StatusBadRequest)
	}
}

// Close cuts every connection made through the proxy; later requests fail.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close() //nolint:errcheck // cut
	}
	p.transport.CloseIdleConnections()
	return nil
}

// tunnel serves CONNECT host:port: the destination, once admitted and dialled, is joined to the
// sandbox's connection byte for byte.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	dst, err := p.dial(r.Context(), r.Host)
	if err != nil {
		p.refuse(w, "CONNECT", r.Host, err)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		dst.Close() //nolint:errcheck // unused
		http.Error(w, "proctor egress: this connection cannot be tunnelled", http.StatusInternalServerError)
		return
	}
	hijacked, buf, err := hj.Hijack()
	if err != nil {
		dst.Close() //nolint:errcheck // unused
		return
	}
	src, ok := p.track(hijacked)
	if !ok {
		dst.Close() //nolint:errcheck // the proxy is closed
		return
	}
	p.logf("CONNECT %s: reached %s", r.Host, dst.RemoteAddr())
	if _, err := src.Write([]byte("HTTP/1.1 200 Connection Established\r\n\r\n")); err != nil {
		src.Close() //nolint:errcheck // the sandbox went away
		dst.Close() //nolint:errcheck // unused
		return
	}
	go func() {
		defer src.Close() //nolint:errcheck // the tunnel ended
		defer dst.Close() //nolint:errcheck // the tunnel ended
		done := make(chan struct{}, 2)
		// Through buf: what the sandbox sent after the CONNECT line may be read already.
		go func() { copyHalf(dst, buf.Reader); done <- struct{}{} }()
		go func() { copyHalf(src, dst); done <- struct{}{} }()
		<-done
		<-done
	}()
}

// copyHalf copies one direction of a tunnel and then closes the writing side of dst where it can,
// so the other end sees the end of the stream.
func copyHalf(dst net.Conn, src io.Reader) {
	io.Copy(dst, src) //nolint:errcheck // a tunnel ends when either side does
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // best effort
	}
}

// forward serves a plain-HTTP request in absolute form.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header = r.Header.Clone()
	dropHopHeaders(out.Header)
	res, err := p.transport.RoundTrip(out)
	if err != nil {
		p.refuse(w, r.Method, r.URL.Host, err)
		return
	}
	defer res.Body.Close()
	p.logf("%s %s: %d", r.Method, r.URL.Redacted(), res.StatusCode)
	dropHopHeaders(res.Header)
	for k, vs := range res.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(res.StatusCode)
	io.Copy(w, res.Body) //nolint:errcheck // the client went away, or the server did
}

// dropHopHeaders removes the headers that concern one hop only (and those the Connection
// header names), which a proxy does not pass on.
func dropHopHeaders(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range []string{"Connection", "Proxy-Connection", "Proxy-Authorization", "Proxy-Authenticate", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(k)
	}
}

// refuse answers a destination that could not be reached: 403 when the policy refused it, 502
// when it did not answer.
func (p *Proxy) refuse(w http.ResponseWriter, method, host string, err error) {
	code := http.StatusBadGateway
	if errors.Is(err, ErrRefused) {
		code = http.StatusForbidden
	}
	p.logf("%s %s: %v", method, host, err)
	http.Error(w, "proctor egress: "+err.Error(), code)
}

// dial connects to hostport once the policy admits it: the name (under an allowlist), then each
// address it resolves to. Only addresses that pass are dialled.
func (p *Proxy) dial(ctx context.Context, hostport string) (net.Conn, error) {
	if p.full() {
		return nil, fmt.Errorf("%s: the sandbox holds %d connections out already", hostport, MaxConns)
	}
	host, portText, err := net.SplitHostPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("%q is no host:port: %w", hostport, ErrRefused)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("%q has no port 1–65535: %w", hostport, ErrRefused)
	}
	if !p.o.Policy.admits(host) {
		return nil, fmt.Errorf("%s is not among the hosts the task allows: %w", host, ErrRefused)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		lctx, cancel := context.WithTimeout(ctx, dialTimeout)
		addrs, err = p.o.Lookup(lctx, host)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s does not resolve: %w", host, err)
		}
	}
	var allowed []netip.Addr
	why := ""
	for _, a := range addrs {
		if r := reason(a, p.own); r != "" {
			why = fmt.Sprintf("%s is %s", a, r)
			continue
		}
		allowed = append(allowed, a)
	}
	if len(allowed) == 0 {
		if why == "" {
			why = "it has no address"
		}
		return nil, fmt.Errorf("%s: %s: %w", host, why, ErrRefused)
	}
	dial := p.o.Dial
	if dial == nil {
		d := net.Dialer{Timeout: dialTimeout}
		dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", addr.String())
		}
	}
	var last error
	for _, a := range allowed {
		c, err := dial(ctx, netip.AddrPortFrom(a, uint16(port)))
		if err == nil {
			tc, ok := p.track(c)
			if !ok {
				return nil, errors.New("the sandbox's egress is closed")
			}
			return tc, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%s did not answer: %w", hostport, last)
}

// full says whether the sandbox holds MaxConns connections through the proxy.
func (p *Proxy) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns) >= 2*MaxConns // a tunnel holds two
}

// track keeps c, to cut at Close, until it is closed; false (c closed) when the proxy is.
func (p *Proxy) track(c net.Conn) (net.Conn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close() //nolint:errcheck // the proxy is closed
		return nil, false
	}
	p.conns[c] = struct{}{}
	return &tracked{Conn: c, p: p}, true
}

// tracked is a connection the proxy forgets once it is closed.
type tracked struct {
	net.Conn
	p    *Proxy
	once sync.Once
}

func (t *tracked) Close() error {
	t.once.Do(func() {
		t.p.mu.Lock()
		delete(t.p.conns, t.Conn)
		t.p.mu.Unlock()
	})
	return t.Conn.Close()
}

// CloseWrite ends the stream towards the peer where the connection can (TCP).
func (t *tracked) CloseWrite() error {
	if cw, ok := t.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (p *Proxy) logf(format string, args ...any) {
	if p.o.Log != nil {
		p.o.Log("egress: " + fmt.Sprintf(format, args...))
	}
}
