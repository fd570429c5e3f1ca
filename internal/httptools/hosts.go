package httptools

import (
	"net"
	"strings"
)

// hostAllowed reports whether a request to scheme://host may be sent:
// http or https, to a host of allowed, an entry without a port standing
// for the scheme's default port.
func hostAllowed(allowed []string, scheme, host string) bool {
	if scheme != "http" && scheme != "https" {
		return false
	}
	want := withPort(scheme, host)
	for _, a := range allowed {
		if withPort(scheme, a) == want {
			return true
		}
	}
	return false
}

// withPort returns host lowercased, as host:port, the port the scheme's
// default when host has none.
func withPort(scheme, host string) string {
	host = strings.ToLower(host)
	if h, p, err := net.SplitHostPort(host); err == nil {
		return net.JoinHostPort(h, p)
	}
	port := "443"
	if scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), port)
}
