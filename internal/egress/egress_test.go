package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// world is the internet as a test's proxy sees it: names resolve by its table, and an admitted
// address is reached at the test's server that stands in for it (public is where the servers
// listen, on the loopback, which the proxy itself would refuse).
type world struct {
	names  map[string][]string
	public map[string]string // admitted address (ip:port) -> the stand-in's address
	mu     sync.Mutex
	dialed []string
	lines  []string
}

func (w *world) options(policy Policy, own ...string) Options {
	o := Options{Policy: policy, Own: []netip.Addr{}}
	for _, a := range own {
		o.Own = append(o.Own, netip.MustParseAddr(a))
	}
	o.Lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range w.names[host] {
			out = append(out, netip.MustParseAddr(a))
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("no such host %s", host)
		}
		return out, nil
	}
	o.Dial = func(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
		w.mu.Lock()
		w.dialed = append(w.dialed, addr.String())
		to, ok := w.public[addr.String()]
		w.mu.Unlock()
		if !ok {
			return nil, fmt.Errorf("connect %s: no route", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", to)
	}
	o.Log = func(line string) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.lines = append(w.lines, line)
	}
	return o
}

// serve serves p as a sandbox's listener would, and returns a client that uses it as its proxy.
func serve(t *testing.T, p *Proxy) (*http.Client, string) {
	t.Helper()
	srv := httptest.NewServer(p)
	t.Cleanup(func() { p.Close(); srv.Close() })
	u, _ := url.Parse(srv.URL)
	return &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}, Timeout: 10 * time.Second}, srv.Listener.Addr().String()
}

// connect sends CONNECT target through the proxy at addr and returns the status line and, on
// 200, the tunnel.
func connect(t *testing.T, addr, target string) (string, net.Conn) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		c.Close()
		return res.Status + ": " + string(body), nil
	}
	return res.Status, c
}

// echoServer answers each line it reads with the line upper-cased.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintln(c, strings.ToUpper(sc.Text()))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func TestAPublicDestinationIsReachedThroughATunnelAndAsPlainHTTP(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path %s, proxy headers %q %q", r.URL.Path, r.Header.Get("Proxy-Authorization"), r.Header.Get("Proxy-Connection"))
	}))
	defer web.Close()
	w := &world{names: map[string][]string{"example.test": {"203.0.113.7"}, "echo.test": {"203.0.113.8"}},
		public: map[string]string{"203.0.113.7:80": web.Listener.Addr().String(), "203.0.113.8:7000": echoServer(t)}}
	p, err := New(w.options(Policy{}))
	if err != nil {
		t.Fatal(err)
	}
	client, addr := serve(t, p)

	req, _ := http.NewRequest("GET", "http://example.test/index.html", nil)
	req.Header.Set("Proxy-Authorization", "Basic c2VjcmV0")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != `path /index.html, proxy headers "" ""` {
		t.Errorf("GET through the proxy = %d %q, want the page without the proxy's own headers", res.StatusCode, body)
	}

	status, tun := connect(t, addr, "echo.test:7000")
	if tun == nil {
		t.Fatalf("CONNECT echo.test:7000 = %s", status)
	}
	defer tun.Close()
	fmt.Fprintln(tun, "hello")
	line, err := bufio.NewReader(tun).ReadString('\n')
	if err != nil || line != "HELLO\n" {
		t.Errorf("through the tunnel: %q, %v", line, err)
	}
	if got := strings.Join(w.lines, "\n"); !strings.Contains(got, "CONNECT echo.test:7000: reached") || !strings.Contains(got, "GET http://example.test/index.html: 200") {
		t.Errorf("the egress log:\n%s", got)
	}
}

func TestTheHostAndItsNetworksAreRefusedWhateverTheName(t *testing.T) {
	w := &world{names: map[string][]string{
		"metadata.test":   {"169.254.169.254"},
		"internal.test":   {"10.1.2.3"},
		"home.test":       {"192.168.1.1"},
		"self.test":       {"198.51.100.20"}, // the worker's own public address
		"rebind.test":     {"127.0.0.1"},
		"ula.test":        {"fd00::1"},
		"cgnat.test":      {"100.64.0.9"},
		"mixed.test":      {"10.0.0.1", "203.0.113.9"},
		"unresolved.test": nil,
	}, public: map[string]string{"203.0.113.9:443": echoServer(t)}}
	p, err := New(w.options(Policy{}, "198.51.100.20"))
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, p)
	for target, why := range map[string]string{
		"127.0.0.1:7233":              "the loopback",
		"[::1]:7233":                  "the loopback",
		"[::ffff:127.0.0.1]:9464":     "the loopback",
		"10.0.0.5:5432":               "a private address",
		"172.20.0.1:443":              "a private address",
		"169.254.169.254:80":          "link-local",
		"[64:ff9b::a9fe:a9fe]:80":     "link-local",
		"[fe80::1]:80":                "link-local",
		"metadata.test:80":            "link-local",
		"internal.test:443":           "a private address",
		"home.test:443":               "a private address",
		"self.test:443":               "an address of the worker's host",
		"rebind.test:8080":            "the loopback",
		"ula.test:443":                "a private address",
		"cgnat.test:443":              "a private address",
		"0.0.0.0:80":                  "no address on the internet",
		"224.0.0.1:80":                "no address on the internet",
		"unresolved.test:443":         "does not resolve",
		"example.test":                "no host:port",
		"example.test:0":              "no port 1–65535",
		"203.0.113.9:99999":           "no port 1–65535",
		"[::ffff:169.254.169.254]:80": "link-local",
	} {
		status, tun := connect(t, addr, target)
		if tun != nil {
			tun.Close()
			t.Errorf("CONNECT %s was let through, want it refused (%s)", target, why)
			continue
		}
		if !strings.Contains(status, why) {
			t.Errorf("CONNECT %s = %s, want it refused saying %q", target, status, why)
		}
	}
	// A name that resolves to a private and a public address is reached at the public one only.
	status, tun := connect(t, addr, "mixed.test:443")
	if tun == nil {
		t.Fatalf("CONNECT mixed.test:443 = %s", status)
	}
	tun.Close()
	for _, d := range w.dialed {
		if d != "203.0.113.9:443" {
			t.Errorf("the proxy dialled %s", d)
		}
	}
}

func TestAnAllowlistAdmitsOnlyTheHostsItNames(t *testing.T) {
	echo := echoServer(t)
	w := &world{names: map[string][]string{"pypi.org": {"203.0.113.1"}, "files.pythonhosted.org": {"203.0.113.2"},
		"pythonhosted.org": {"203.0.113.3"}, "evil.test": {"203.0.113.4"}},
		public: map[string]string{"203.0.113.1:443": echo, "203.0.113.2:443": echo, "203.0.113.3:443": echo, "203.0.113.4:443": echo, "203.0.113.5:443": echo}}
	p, err := New(w.options(Policy{Hosts: []string{"PyPI.org.", "*.pythonhosted.org", "203.0.113.5"}}))
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, p)
	for target, allowed := range map[string]bool{
		"pypi.org:443": true, "files.pythonhosted.org:443": true, "203.0.113.5:443": true,
		"pythonhosted.org:443": false, "evil.test:443": false, "203.0.113.4:443": false, "pypi.org.evil.test:443": false,
	} {
		status, tun := connect(t, addr, target)
		if tun != nil {
			tun.Close()
		}
		if (tun != nil) != allowed {
			t.Errorf("CONNECT %s under the allowlist = %s, want allowed %v", target, status, allowed)
		}
		if !allowed && !strings.Contains(status, "not among the hosts the task allows") {
			t.Errorf("CONNECT %s = %s, want it refused as not allowed", target, status)
		}
	}
	for _, bad := range []string{"", "*.", "http://x.org", "x.org:443", "*.*.x.org", "a b"} {
		if err := (Policy{Hosts: []string{bad}}).Check(); err == nil {
			t.Errorf("an allowed host %q was accepted", bad)
		}
	}
}

func TestCloseCutsTheTunnelsAndRefusesMore(t *testing.T) {
	w := &world{names: map[string][]string{"echo.test": {"203.0.113.8"}}, public: map[string]string{"203.0.113.8:7000": echoServer(t)}}
	p, err := New(w.options(Policy{}))
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, p)
	status, tun := connect(t, addr, "echo.test:7000")
	if tun == nil {
		t.Fatalf("CONNECT = %s", status)
	}
	defer tun.Close()
	p.Close()
	tun.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := tun.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "timeout") {
		t.Errorf("a tunnel after Close: %v, want it cut", err)
	}
	if status, tun := connect(t, addr, "echo.test:7000"); tun != nil || !strings.Contains(status, "closed") {
		t.Errorf("CONNECT after Close = %s", status)
	}
}
