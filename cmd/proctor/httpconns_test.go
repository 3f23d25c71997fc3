package main

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	goruntime "runtime"
	"sync"
	"testing"
	"time"
)

// TestHTTPServerOneClientCannotStarveOthers (issue 29, item 8): one address that opens
// connection after connection has those past --http-max-conns-per-addr closed at once; idle
// keep-alive connections from many addresses, together past the cap, are closed oldest first so
// that new clients are still served; connections that send nothing and fill every slot leave the
// probe reserve; and through all of it another client's /healthz answers within 100 ms, while
// the server's connections and goroutines stay bounded.
func TestHTTPServerOneClientCannotStarveOthers(t *testing.T) {
	const maxConns, perAddr, reserve = 64, 16, 4
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }) //nolint:errcheck
	base := goruntime.NumGoroutine()
	hs, err := startHTTP("127.0.0.1:0", h, httpLimits{read: 30 * time.Second, write: 30 * time.Second, idle: time.Minute,
		maxConns: maxConns, maxConnsPerAddr: perAddr, probeReserve: reserve}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer hs.shutdown(5 * time.Second)

	// Every connection the attackers open, closed at the end.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// dialFrom opens a connection from a loopback address of its own (all of 127/8 is loopback).
	dialFrom := func(host int) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(host))}, Timeout: 2 * time.Second}
		c, err := d.Dial("tcp", hs.addr)
		if err != nil {
			t.Fatalf("dial from 127.0.0.%d: %v", host, err)
		}
		conns = append(conns, c)
		return c
	}
	// get asks / on c and tells whether it was answered 200 within 2 s; false when the server
	// closed the connection without an answer.
	get := func(c net.Conn) bool {
		t.Helper()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		defer c.SetDeadline(time.Time{})
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return false
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("a request was neither answered nor refused within 2 s")
		}
		if err != nil {
			return false
		}
		io.Copy(io.Discard, res.Body) //nolint:errcheck
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	// bounded checks what the server holds against its limits.
	bounded := func(phase string) {
		t.Helper()
		served, reserved, _, _ := hs.limiter.counts()
		if served > maxConns || reserved > reserve {
			t.Errorf("%s: %d connections in slots and %d in the reserve, want at most %d and %d", phase, served, reserved, maxConns, reserve)
		}
		if n := goruntime.NumGoroutine(); n > base+maxConns+reserve+32 {
			t.Errorf("%s: %d goroutines, want at most %d", phase, n, base+maxConns+reserve+32)
		}
	}

	// Another client probes /healthz on a fresh connection (as a kubelet does) throughout.
	stop, probed := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var probes int
	var slowest time.Duration
	var failures []string
	go func() {
		defer close(probed)
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			start := time.Now()
			res, err := client.Get("http://" + hs.addr + "/healthz")
			took := time.Since(start)
			mu.Lock()
			probes++
			slowest = max(slowest, took)
			if err != nil {
				failures = append(failures, err.Error())
			} else {
				if res.StatusCode != http.StatusOK {
					failures = append(failures, res.Status)
				}
				res.Body.Close()
			}
			mu.Unlock()
		}
	}()
	// probedAgain waits until the prober has asked twice more, so that each phase is probed.
	probedAgain := func() {
		mu.Lock()
		want := probes + 2
		mu.Unlock()
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
			mu.Lock()
			n := probes
			mu.Unlock()
			if n >= want {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		t.Error("the prober made no progress within 5 s")
	}

	// 1. One address keeps 48 keep-alive connections: 16 are served, 32 closed at once.
	servedOne, refusedOne := 0, 0
	for range 3 * perAddr {
		if get(dialFrom(2)) {
			servedOne++
		} else {
			refusedOne++
		}
	}
	if servedOne != perAddr || refusedOne != 2*perAddr {
		t.Errorf("one address with %d connections: %d served and %d refused, want %d and %d", 3*perAddr, servedOne, refusedOne, perAddr, 2*perAddr)
	}
	if _, _, refused, _ := hs.limiter.counts(); refused != 2*perAddr {
		t.Errorf("the server counted %d refused connections, want %d", refused, 2*perAddr)
	}
	probedAgain()
	bounded("one address")

	// 2. Six more addresses leave 96 idle connections (112 with the first, past the cap of 64):
	// every new one is served, the oldest idle ones closed to make room.
	for host := 3; host <= 8; host++ {
		for i := range perAddr {
			if !get(dialFrom(host)) {
				t.Fatalf("connection %d from 127.0.0.%d was not served while idle ones held the slots", i, host)
			}
		}
	}
	if _, _, _, evicted := hs.limiter.counts(); evicted < 7*perAddr-maxConns {
		t.Errorf("%d idle connections closed under pressure, want at least %d", evicted, 7*perAddr-maxConns)
	}
	probedAgain()
	bounded("idle connections past the cap")

	// 3. Four more addresses open 64 connections and send nothing: they take every slot (the
	// idle ones go first), and the probes still pass through the reserve.
	for host := 9; host <= 12; host++ {
		for range perAddr {
			dialFrom(host)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		// A silent connection that came while a probe held the last slot waits in the reserve.
		if served, reserved, _, _ := hs.limiter.counts(); served+reserved >= maxConns {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the silent connections did not take every slot within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	probedAgain()
	bounded("silent connections in every slot")

	close(stop)
	<-probed
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d probes, the slowest %s; %d attacker connections", probes, slowest, len(conns))
	if len(failures) > 0 {
		t.Errorf("%d of %d probes failed, first: %s", len(failures), probes, failures[0])
	}
	if slowest > 100*time.Millisecond {
		t.Errorf("the slowest /healthz took %s, want at most 100ms", slowest)
	}
}
