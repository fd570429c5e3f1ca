package clientreg

import (
	"net"
	"slices"
	"strconv"
	"strings"
)

// Metadata is what an authorization server knows about a client, whether
// it came from a Client ID Metadata Document ([Fetcher.Get]) or a dynamic
// registration request ([ValidateRegistration]). The JSON names are those
// of RFC 7591 §2. Once validated, GrantTypes, ResponseTypes and
// TokenEndpointAuthMethod hold their defaults when the client left them out.
type Metadata struct {
	// ClientID is the client_id: the document's URL for a metadata
	// document, empty after ValidateRegistration (the server assigns it).
	ClientID string `json:"client_id,omitempty"`
	// ClientName is the name shown to the user.
	ClientName string `json:"client_name,omitempty"`
	// ClientURI is the client's home page, https only.
	ClientURI string `json:"client_uri,omitempty"`
	// LogoURI is the client's logo, https only.
	LogoURI string `json:"logo_uri,omitempty"`
	// RedirectURIs are the registered redirect URIs; see
	// [Metadata.MatchRedirectURI].
	RedirectURIs []string `json:"redirect_uris"`
	// GrantTypes is a subset of authorization_code and refresh_token that
	// holds authorization_code. Default both.
	GrantTypes []string `json:"grant_types,omitempty"`
	// ResponseTypes is ["code"], the default and the only value accepted.
	ResponseTypes []string `json:"response_types,omitempty"`
	// TokenEndpointAuthMethod is how the client authenticates at the token
	// endpoint. Default "none".
	TokenEndpointAuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// Scope is the space-separated list of scopes the client may ask for.
	Scope string `json:"scope,omitempty"`
	// SoftwareID identifies the client software across its instances.
	SoftwareID string `json:"software_id,omitempty"`
	// SoftwareVersion is the version of the client software.
	SoftwareVersion string `json:"software_version,omitempty"`
}

// MatchRedirectURI reports whether uri is one of m's redirect URIs. The
// comparison is exact, byte for byte, with one exception from RFC 8252
// §7.3: when a registered URI is an http URI on a loopback host
// (127.0.0.1 or another 127/8 address, [::1], or localhost), uri matches it
// whatever its port, as long as everything else (scheme, host as written,
// path, query) is identical. Nothing is normalized: no case folding, no
// prefix matching, no query parameters added or dropped, and a uri with a
// fragment or user info never matches a loopback URI by port.
func (m *Metadata) MatchRedirectURI(uri string) bool {
	for _, r := range m.RedirectURIs {
		if r == uri {
			return true
		}
		rh, rrest, ok := splitLoopback(r)
		if !ok {
			continue
		}
		uh, urest, ok := splitLoopback(uri)
		if ok && rh == uh && rrest == urest {
			return true
		}
	}
	return false
}

// splitLoopback splits an http URI on a loopback host into its host as
// written (without the port; an IPv6 literal keeps its brackets) and what
// follows the authority. ok is false for anything else, including a URI
// with user info, a fragment, or a port that is not a number in 1-65535.
func splitLoopback(uri string) (host, rest string, ok bool) {
	after, found := strings.CutPrefix(uri, "http://")
	if !found || strings.Contains(uri, "#") {
		return "", "", false
	}
	end := strings.IndexAny(after, "/?")
	if end < 0 {
		end = len(after)
	}
	authority, rest := after[:end], after[end:]
	if strings.Contains(authority, "@") {
		return "", "", false // the host check below refuses it too; this says why
	}
	host = authority
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.HasSuffix(authority, "]") {
		h, port := authority[:i], authority[i+1:]
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.ContainsAny(port, "+-") {
			return "", "", false
		}
		host = h
	}
	if !isLoopbackHost(host) {
		return "", "", false
	}
	return host, rest, true
}

// isLoopbackHost reports whether host (no port; an IPv6 literal in
// brackets) is exactly "localhost", an IPv4 loopback literal, or the
// bracketed IPv6 loopback. Unlike internal/loopback it is case-sensitive
// and refuses a bare IPv6 literal, since it judges the host of a URI as
// written.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	if inner, ok := strings.CutPrefix(host, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		ip := net.ParseIP(inner)
		return ok && ip != nil && ip.To4() == nil && ip.IsLoopback()
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.To4() != nil && !strings.Contains(host, ":") && ip.IsLoopback()
}

// clone returns a deep copy of m, so that callers sharing one fetch can
// each change their own.
func (m *Metadata) clone() *Metadata {
	c := *m
	c.RedirectURIs = slices.Clone(m.RedirectURIs)
	c.GrantTypes = slices.Clone(m.GrantTypes)
	c.ResponseTypes = slices.Clone(m.ResponseTypes)
	return &c
}
