// Package loopback decides whether a host names the local machine, in one
// place for the listen address checks, the dev issuer's Host check and the
// /mcp Origin check.
package loopback

import (
	"net"
	"strings"
)

// Host reports whether hostport (a host with an optional port, as in a
// Host header, a listen address or a URL's host) names "localhost" or a
// loopback IP literal; an IPv6 literal may be bracketed. Names that merely
// resolve to a loopback address (127.0.0.1.nip.io, localhost.evil.example,
// *.localhost) are not loopback: whoever controls their DNS can rebind them.
// An empty host, which a listen address uses for every interface, is not
// loopback.
func Host(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
