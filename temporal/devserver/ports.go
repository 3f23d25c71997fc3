package devserver

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports the server's services bind are picked free and bound a moment later, by the server; a
// port another socket takes in between fails that service's bind. Most such sockets are the
// kernel's picks for outgoing connections and for listeners on port 0, all in the ephemeral range
// (Linux: net.ipv4.ip_local_port_range, 32768–60999 by default), which tests open by the
// thousand. A bind failure of an internal service leaves it without a listener and crashes the
// whole process when it starts serving, so freePort picks below that range, at random, never the
// same port twice in a process.
var (
	handedOut   sync.Mutex
	handedPorts = map[int]bool{}
)

// lowestPickable is where freePort's range starts.
const lowestPickable = 10000

func freePort(ip string) (int, error) {
	hi := ephemeralLow() - 1
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 100 {
		p := lowestPickable + rand.IntN(hi-lowestPickable+1)
		if handedPorts[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close() //nolint:errcheck // a listener just opened
		handedPorts[p] = true
		return p, nil
	}
	// Nothing free below the ephemeral range (or no such range here): the kernel's pick.
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("devserver: find a free port: %w", err)
	}
	defer l.Close() //nolint:errcheck // a listener just opened
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ephemeralLow is the lowest port of the kernel's ephemeral range: 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= lowestPickable+1000 {
		return 32768
	}
	return lo
}
