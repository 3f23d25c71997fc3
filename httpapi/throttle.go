package httpapi

import (
	"net"
	"strconv"
	"sync"
	"time"
)

// authThrottle limits failed authentications per client address: each address has a bucket of
// failures that refills over time, and once it is empty the address's further failures are
// answered 429 with Retry-After instead of 401.
//
// Only failures count, and only failures are refused: credentials are checked before the bucket
// is, so that a valid key or session passes from any address. Behind a shared proxy every client
// has the proxy's address, and one client's bad key must not lock out the others. A throttled
// guess costs what any failed one does (one indexed lookup, as a request to a public route) and
// is answered at once: no delay holds its connection, and a success refills nothing, so a client
// with a key of its own cannot reset its address's budget. The price is that a 429 no longer hides
// whether a guess was right; keys and session tokens carry 256 random bits (models.randomToken),
// beyond guessing at any request rate, so the throttle's work is to tell failing clients to back
// off, not to keep secrets.
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

// failed counts a failed authentication of addr. Within addr's budget it spends one failure and
// answers 0; past it, it answers how long addr must wait before a failure is earned back, and
// spends nothing more, so that a throttled address recovers at the same pace however often it
// keeps failing.
func (t *authThrottle) failed(addr string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.bucket(addr, t.now())
	if b.tokens >= 1 {
		b.tokens--
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(t.refill))
}

// throttledMessage is the answer to a failure past its address's budget.
const throttledMessage = "too many failed authentications from this address; retry later"

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
