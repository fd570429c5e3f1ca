package outbound

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress is what [CheckDial] returns for an address a
// client guarded against server-side request forgery must not connect to.
var ErrForbiddenAddress = errors.New("outbound: address not allowed")

// forbiddenPrefixes are the IPv4 and IPv6 ranges a guarded client never
// connects to, besides what netip's IsLoopback, IsPrivate,
// IsLinkLocalUnicast, IsLinkLocalMulticast, IsInterfaceLocalMulticast,
// IsMulticast and IsUnspecified already cover.
var forbiddenPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),      // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),  // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),   // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),  // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),    // reserved, and the broadcast address
	netip.MustParsePrefix("::/96"),          // IPv4-compatible (deprecated)
	netip.MustParsePrefix("100::/64"),       // discard-only
	netip.MustParsePrefix("2001::/32"),      // Teredo, which tunnels to any IPv4 address
	netip.MustParsePrefix("2001:db8::/32"),  // documentation
	netip.MustParsePrefix("fec0::/10"),      // site-local (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"), // local-use NAT64
}

// nat64 and sixToFour embed an IPv4 address, which is checked in turn.
var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// ForbiddenAddr reports whether a client guarded against server-side
// request forgery (the client metadata fetcher, declared HTTP tools) must
// not connect to a: an
// address of this machine, of a private network, or one that leads to
// either. IPv4-mapped IPv6 addresses are judged as the IPv4 address they
// map, and NAT64 and 6to4 addresses as the IPv4 address they embed.
func ForbiddenAddr(a netip.Addr) bool {
	if !a.IsValid() {
		return true
	}
	a = a.Unmap().WithZone("")
	if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range forbiddenPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		return ForbiddenAddr(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(a):
		return ForbiddenAddr(netip.AddrFrom4([4]byte(b[2:6])))
	}
	return false
}

// CheckDial is a [net.Dialer]'s ControlContext that refuses, with
// [ErrForbiddenAddress], the addresses [ForbiddenAddr] reports. It runs
// once the address is resolved, for every address the dialer tries, just
// before the connection is made, so a DNS answer that changes between a check and the
// dial cannot get past it.
func CheckDial(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %q", ErrForbiddenAddress, address)
	}
	if ForbiddenAddr(ap.Addr()) {
		return fmt.Errorf("%w: %s is not a public address", ErrForbiddenAddress, ap.Addr())
	}
	return nil
}
