// Package outbound builds the HTTP transport of the clients Portcullis
// calls other services with: the authorization server (keys,
// introspection), the APIs behind built-in tools, and http upstreams.
package outbound

import (
	"net"
	"net/http"
	"time"
)

// IdleConnsPerHost is how many idle connections to one host a transport
// keeps. Each request in flight holds a connection of its own, so a pool
// smaller than the requests in flight closes a connection after most of
// them and dials one before the next (with TLS, a handshake each); Go's
// default is 2.
const IdleConnsPerHost = 64

// Transport returns a new transport that bounds every phase of a request
// but the body read (the caller's context or client timeout covers that):
// 5 s to connect, 5 s for the TLS handshake, 10 s for the response
// headers. It honours the proxy environment variables, attempts HTTP/2,
// keeps [IdleConnsPerHost] idle connections per host without a total cap,
// and closes them after 90 s idle.
func Transport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
		ExpectContinueTimeout: time.Second,
		IdleConnTimeout:       90 * time.Second,
		MaxIdleConnsPerHost:   IdleConnsPerHost,
		ForceAttemptHTTP2:     true,
	}
}
