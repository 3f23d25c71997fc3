package httpapi

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// authThrottle limits failed authentications per client address, so that keys cannot be guessed
// at speed: each address has a bucket of failures that refills over time, and an address whose
// bucket is empty is answered 429 with Retry-After before its credentials are even checked.
// Successful requests cost nothing.
type authThrottle struct {
	mu      sync.Mutex
	burst   float64
	refill  time.Duration // time to earn back one failure
	clients map[string]*failureBucket
	now     func() time.Time
}

type failureBucket struct {
	tokens float64
	at     time.Time
}

// Failed authentications allowed per address: a burst of 20, then one every 3 seconds.
const (
	authBurst  = 20
	authRefill = 3 * time.Second
	// maxTracked bounds the addresses remembered; past it, those whose buckets are full again
	// are forgotten.
	maxTracked = 100_000
)

func newAuthThrottle() *authThrottle {
	return &authThrottle{burst: authBurst, refill: authRefill, clients: map[string]*failureBucket{}, now: time.Now}
}

func (t *authThrottle) bucket(addr string, now time.Time) *failureBucket {
	b := t.clients[addr]
	if b == nil {
		if len(t.clients) >= maxTracked {
			t.forgetRested(now)
		}
		b = &failureBucket{tokens: t.burst, at: now}
		t.clients[addr] = b
	}
	b.tokens = min(t.burst, b.tokens+float64(now.Sub(b.at))/float64(t.refill))
	b.at = now
	return b
}

func (t *authThrottle) forgetRested(now time.Time) {
	for addr, b := range t.clients {
		if b.tokens+float64(now.Sub(b.at))/float64(t.refill) >= t.burst {
			delete(t.clients, addr)
		}
	}
}

// wait is how long addr must wait before it may try again, or 0.
func (t *authThrottle) wait(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	b := t.bucket(addr, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(t.refill))
}

// failed spends one of addr's failures.
func (t *authThrottle) failed(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(addr, t.now())
	b.tokens = max(0, b.tokens-1)
}

// clientHost is a peer address without its port. (Behind a proxy every client shares the
// proxy's address; the proxy should then throttle too.)
func clientHost(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return remoteAddr
	}
	return host
}

// retryAfter is the Retry-After value for a wait: whole seconds, at least one.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}
