package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// InternetGreeting is what the stand-in internet answers every request with.
const InternetGreeting = "hello from the internet"

// inetLocks is where the lock files of the stand-ins' slots are: one host-wide place, since
// every test process on the host (go test runs packages side by side) shares its routes.
const inetLocks = "/run/proctor-inet"

// Internet starts a stand-in for a server on the internet, as a sandbox's egress reaches it, and
// returns its address (an IP and port 80) and the address of this host on the link to it: a
// network namespace of its own, joined to this host's by a veth pair on a /30 of TEST-NET-3
// (203.0.113.0/24: documentation addresses, in none of the ranges a sandbox is kept from), where
// an HTTP server answers InternetGreeting. The host's end of the pair is an address of this host
// (a public-looking one, as a cloud machine's may be); the stand-in's is not, as a server on the
// internet is not. It needs root and iproute2 (.ci/run installs it); everything is removed when
// the test ends.
//
// Each stand-in holds one of 63 slots (a /30 each) by a host-wide lock, so that test processes
// running side by side never route the same addresses, and a slot whose holder died (killed
// before its cleanup ran) is swept of what it left before it is used again.
func Internet(t testing.TB) (server, hostEnd string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Unavailable(t, "the stand-in internet makes a network namespace, which needs root")
		return "", ""
	}
	if _, err := exec.LookPath("ip"); err != nil {
		MissingTool(t, "ip (iproute2)")
	}
	n, lock, err := claimInternetSlot()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() }) // after the removals below (cleanups run last-first)
	name := fmt.Sprintf("proctor-inet-%d", n)
	hostLink, netLink := fmt.Sprintf("pinet%dh", n), fmt.Sprintf("pinet%dn", n)
	hostIP, netIP := fmt.Sprintf("203.0.113.%d", 4*n+1), fmt.Sprintf("203.0.113.%d", 4*n+2)
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// What a dead holder of this slot left: its namespace, and any link of this host on the
	// slot's addresses (deleting one end of a veth pair deletes both).
	exec.Command("ip", "netns", "delete", name).Run() //nolint:errcheck // usually not there
	if out, err := exec.Command("ip", "-o", "-4", "addr", "show", "to", hostIP+"/30").Output(); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) > 1 {
				exec.Command("ip", "link", "delete", f[1]).Run() //nolint:errcheck // gone already is fine
			}
		}
	}
	ip("netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "delete", name).Run() }) //nolint:errcheck // deleting it takes its end of the pair
	ip("link", "add", hostLink, "type", "veth", "peer", "name", netLink)
	t.Cleanup(func() { exec.Command("ip", "link", "delete", hostLink).Run() }) //nolint:errcheck // may be gone with the namespace
	ip("link", "set", netLink, "netns", name)
	ip("addr", "add", hostIP+"/30", "dev", hostLink)
	ip("link", "set", hostLink, "up")
	ip("-n", name, "addr", "add", netIP+"/30", "dev", netLink)
	ip("-n", name, "link", "set", netLink, "up")
	ip("-n", name, "link", "set", "lo", "up")

	ln, err := listenInNamespace("/run/netns/"+name, net.JoinHostPort(netIP, "80"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, InternetGreeting)
	})}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), hostIP
}

// listenInNamespace listens on addr in the network namespace at path: the socket is made on a
// thread that joined it (and ends with its goroutine), and belongs to that namespace for its life.
func listenInNamespace(path, addr string) (net.Listener, error) {
	ns, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread leaves the namespace by ending
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("join %s: %w", path, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	res := <-ch
	if res.err != nil {
		return nil, fmt.Errorf("listen on %s in %s: %w", addr, path, res.err)
	}
	return res.ln, nil
}

// claimInternetSlot takes the first free slot (1 to 63) of the host, by an exclusive lock on its
// file under inetLocks that this process holds until it closes the file, or until it dies.
func claimInternetSlot() (int, *os.File, error) {
	if err := os.MkdirAll(inetLocks, 0o755); err != nil {
		return 0, nil, err
	}
	for n := 1; n <= 63; n++ {
		f, err := os.OpenFile(fmt.Sprintf("%s/%d.lock", inetLocks, n), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return 0, nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			return n, f, nil
		}
		f.Close()
	}
	return 0, nil, fmt.Errorf("testenv: all 63 stand-in internets of this host are in use")
}
