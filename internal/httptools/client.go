package httptools

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 5

// errRedirect is what a redirect the API may not follow ends a request
// with.
var errRedirect = errors.New("httptools: redirect refused")

// newTransport returns the transport of one API below its credential:
// its own, which connects only to public addresses unless
// allow_private_addresses is on (checked at each dial, after DNS
// resolution) and verifies TLS as tls says. wrap, when set, wraps it
// (tracing).
func newTransport(o *Options, wrap func(http.RoundTripper) http.RoundTripper) (http.RoundTripper, error) {
	t := outbound.Transport()
	t.ResponseHeaderTimeout = 0 // the call's timeout bounds it
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	if !o.AllowPrivateAddresses {
		dialer.ControlContext = outbound.CheckDial
		// A proxy would make the connection the check sees the proxy's.
		t.Proxy = nil
	}
	t.DialContext = dialer.DialContext
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: o.TLS.InsecureSkipVerify} //nolint:gosec // named Insecure…, off by default
	if o.TLS.CAFile != "" {
		pem, err := os.ReadFile(o.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("httptools: %s: tls.ca_file: %w", o.Name, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("httptools: %s: tls.ca_file: %s holds no PEM certificate", o.Name, o.TLS.CAFile)
		}
		tc.RootCAs = pool
	}
	t.TLSClientConfig = tc
	if wrap != nil {
		return wrap(t), nil
	}
	return t, nil
}

// tokenClient makes the requests to an API's token endpoints: the API's
// allow-list is for the API.
var tokenClient = &http.Client{Transport: outbound.Transport(), Timeout: 30 * time.Second}

// newClient returns a client of the API whose requests rt sends (with
// the credential): redirects are followed only to the allowed hosts, over
// http or https.
func newClient(o *Options, rt http.RoundTripper) *http.Client {
	allowed := slices.Clone(o.AllowHosts)
	return &http.Client{
		Transport: rt,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("%w: more than %d redirects", errRedirect, maxRedirects)
			}
			if !hostAllowed(allowed, req.URL.Scheme, req.URL.Host) {
				return fmt.Errorf("%w: to %s, a host the API may not reach", errRedirect, req.URL.Host)
			}
			return nil
		},
	}
}
