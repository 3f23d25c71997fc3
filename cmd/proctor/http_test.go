package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHTTPServerBoundsSlowIdleAndManyClients: a body that trickles is cut off at the read
// timeout, an idle keep-alive connection is closed at the idle timeout, and connections past the
// cap wait to be accepted until one closes.
func TestHTTPServerBoundsSlowIdleAndManyClients(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		io.WriteString(w, "ok")     //nolint:errcheck
	})
	hs, err := startHTTP("127.0.0.1:0", h, httpLimits{read: time.Second, write: 2 * time.Second, idle: time.Second, maxConns: 2},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer hs.shutdown(5 * time.Second)

	closedWithin := func(c net.Conn, d time.Duration) bool {
		c.SetReadDeadline(time.Now().Add(d))
		_, err := io.ReadAll(c)
		ne, isNet := err.(net.Error)
		return !(isNet && ne.Timeout())
	}

	// A body of 100 bytes sent one byte a second.
	slow, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(slow, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nx") //nolint:errcheck
	start := time.Now()
	if !closedWithin(slow, 4*time.Second) {
		t.Errorf("a trickling body held its connection past %s", time.Since(start))
	}
	slow.Close()

	// An idle keep-alive connection after one request.
	idle, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") //nolint:errcheck
	br := bufio.NewReader(idle)
	res, err := http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first request: %v %v", res, err)
	}
	io.Copy(io.Discard, res.Body) //nolint:errcheck
	if !closedWithin(idle, 4*time.Second) {
		t.Error("an idle keep-alive connection stayed open past the idle timeout")
	}
	idle.Close()

	// Two connections take both slots; a third is answered only once one of them closes.
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", hs.addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	time.Sleep(100 * time.Millisecond)
	third, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	io.WriteString(third, "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") //nolint:errcheck
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _ := third.Read(make([]byte, 1)); n > 0 {
		t.Fatal("a connection past the cap was served")
	}
	held[0].Close()
	third.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, _ := io.ReadAll(third)
	if !strings.Contains(string(b), "200 OK") {
		t.Errorf("the waiting connection got %q once a slot freed", b)
	}
	held[1].Close()
}
