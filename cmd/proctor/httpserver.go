package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/proctorhq/proctor/internal/config"
)

// httpServer serves the API on a listener until shutdown.
type httpServer struct {
	srv  *http.Server
	addr string
	done chan error
}

// httpLimits are the bounds of the API's HTTP server (config: --http-*).
type httpLimits struct {
	read, write, idle time.Duration
	maxConns          int
}

func limitsOf(cfg *config.Config) httpLimits {
	return httpLimits{read: cfg.HTTPReadTimeout, write: cfg.HTTPWriteTimeout, idle: cfg.HTTPIdleTimeout, maxConns: cfg.HTTPMaxConns}
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
	if lim.maxConns > 0 {
		l = &limitListener{Listener: l, slots: make(chan struct{}, lim.maxConns), closed: make(chan struct{})}
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
		addr: l.Addr().String(),
		done: make(chan error, 1),
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

// limitListener accepts at most cap(slots) connections at once; the next Accept waits for one
// to close (the client waits in the kernel's backlog meanwhile).
type limitListener struct {
	net.Listener
	slots  chan struct{}
	closed chan struct{}
	once   sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close also ends an Accept waiting for a slot, so that a shutdown is not held up.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
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
