package sandbox

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// serveLines answers every connection on ln with one line naming its number, until ln closes.
func serveLines(ln net.Listener) {
	for n := 1; ; n++ {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintf(c, "served %d from outside\n", n)
		c.Close()
	}
}

func TestAListenerInsideIsTheSandboxsOnlyWayOut(t *testing.T) {
	host, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	go serveLines(host)
	p := newProvider(t, IsolationBubblewrap)

	var inside net.Listener
	out, sb := run(t, p, Spec{
		Command: []string{testBinary(t)},
		Env:     map[string]string{helperEnv: "inside", "ADDR": "127.0.0.1:7777", "HOST_ADDR": host.Addr().String()},
		Listen: &Listen{Port: 7777, Ready: func(ln net.Listener) {
			inside = ln
			go serveLines(ln)
		}},
	})
	if inside == nil {
		t.Fatal("Ready was not called")
	}
	defer inside.Close()
	if code := exitCode(t, sb); code != 0 || out != "served 1 from outside\n" {
		t.Errorf("the sandbox exited %d having read %q (stderr %q); want 0 and the line served outside", code, out, sb.logs.Tail(3))
	}
	// The listener is the sandbox's, not the host's: nothing listens on the host's 7777.
	if c, err := net.Dial("tcp", "127.0.0.1:7777"); err == nil {
		c.Close()
		t.Error("the listener inside the sandbox is reachable on the host's loopback")
	}
}

func TestAListenerInsideIsRefusedWhereItCannotBeMade(t *testing.T) {
	ready := func(net.Listener) { t.Error("Ready called for a sandbox that was refused") }
	spec := Spec{ID: "refused", Command: []string{testBinary(t)}, Listen: &Listen{Port: 7777, Ready: ready}}

	shared := spec
	shared.Network = true
	if _, err := newProvider(t, IsolationBubblewrap).Start(t.Context(), shared); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("a listener inside a sandbox that shares the host's network: %v, want ErrInvalidSpec", err)
	}
	if _, err := newProvider(t, IsolationNone).Start(t.Context(), spec); !errors.Is(err, ErrNoListen) {
		t.Errorf("a listener inside an unisolated sandbox: %v, want ErrNoListen", err)
	}
}

func TestASandboxUnderBubblewrapHasNoCapabilities(t *testing.T) {
	p := newProvider(t, IsolationBubblewrap)
	// Read by a program the sandbox's shell execs: what it holds after an exec, which a root
	// uid would otherwise regain.
	out, sb := run(t, p, Spec{Command: []string{"sh", "-c", "grep -E '^(Cap(Inh|Prm|Eff|Amb)|NoNewPrivs):' /proc/self/status"}})
	if code := exitCode(t, sb); code != 0 {
		t.Fatalf("exit %d: %q", code, sb.logs.Tail(3))
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines {
		name, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if name == "NoNewPrivs" && v != "1" || name != "NoNewPrivs" && strings.Trim(v, "0") != "" {
			t.Errorf("the sandbox's process: %s", line)
		}
	}
	if len(lines) != 5 {
		t.Errorf("read %q", out)
	}
}
