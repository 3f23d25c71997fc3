package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// refused are the ranges no sandbox reaches, whatever its policy: the host itself (loopback), the
// networks a host lives in (private, shared, link-local, where cloud metadata answers at
// 169.254.169.254), and what is no destination on the internet (unspecified, multicast,
// reserved). IPv4 inside IPv6 (mapped, NAT64) is checked as IPv4.
var refused = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
		"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
		"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8",
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// Refused returns the ranges no sandbox reaches, whatever its policy (for rules of another kind
// that keep sandboxes out of them, such as a cluster's network policy).
func Refused() []netip.Prefix { return append([]netip.Prefix(nil), refused...) }

// nat64 embeds an IPv4 address in its last four bytes.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Policy says where a sandbox's connections may go.
type Policy struct {
	// Hosts, when not empty, are the only destinations: a name ("pypi.org"), every name under a
	// domain ("*.pythonhosted.org"), or an address. Empty: any host on the internet. Either way
	// nothing in the refused ranges, and none of the host's own addresses, is reached.
	Hosts []string
}

// Check refuses a Policy whose hosts are not names, wildcards or addresses.
func (p Policy) Check() error {
	for _, h := range p.Hosts {
		name := strings.TrimPrefix(h, "*.")
		if _, err := netip.ParseAddr(name); err == nil && name == h {
			continue
		}
		if name == "" || strings.ContainsAny(name, "/:*@ ") || strings.HasPrefix(name, ".") {
			return fmt.Errorf("allowed host %q: want a name (example.com), every name under a domain (*.example.com) or an address", h)
		}
	}
	return nil
}

// admits says whether the policy lets host (a name or an address, as the sandbox asked for it)
// be dialled at all, before its addresses are looked at.
func (p Policy) admits(host string) bool {
	if len(p.Hosts) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, h := range p.Hosts {
		h = strings.ToLower(strings.TrimSuffix(h, "."))
		if h == host {
			return true
		}
		if rest, ok := strings.CutPrefix(h, "*."); ok && strings.HasSuffix(host, "."+rest) {
			return true
		}
	}
	return false
}

// reason says why addr may not be dialled, "" when it may: one of the refused ranges, or an
// address of this host (own).
func reason(addr netip.Addr, own map[netip.Addr]bool) string {
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	for _, p := range refused {
		if p.Contains(addr) {
			switch {
			case addr.IsLoopback():
				return "the loopback"
			case addr.IsPrivate(), p.String() == "100.64.0.0/10":
				return "a private address"
			case addr.IsLinkLocalUnicast():
				return "a link-local address (cloud metadata answers there)"
			}
			return "no address on the internet (" + p.String() + ")"
		}
	}
	if own[addr] {
		return "an address of the worker's host"
	}
	return ""
}

// hostAddrs are the addresses of this host's interfaces.
func hostAddrs() map[netip.Addr]bool {
	own := map[netip.Addr]bool{}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return own
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				own[ip.Unmap()] = true
			}
		}
	}
	return own
}
