package clientreg

import (
	"fmt"
	"net/url"
	"strings"
)

// IsURLClientID reports whether clientID has the form of a Client ID
// Metadata Document URL (it starts with "https://", or "http://" when
// insecureAllowHTTP, as [FetchOptions.InsecureAllowHTTP] says), so that an
// authorization server can tell it from a client_id it issued itself and
// hand it to [Fetcher.Get]. It does not validate the URL; Get does.
func IsURLClientID(clientID string, insecureAllowHTTP bool) bool {
	return strings.HasPrefix(clientID, "https://") || (insecureAllowHTTP && strings.HasPrefix(clientID, "http://"))
}

// ValidateClientIDURL returns an error wrapping [ErrInvalidClientID] unless
// clientID is a URL a Client ID Metadata Document may be fetched from
// (draft-ietf-oauth-client-id-metadata-document §3): "https://" in lower
// case (or "http://" when insecureAllowHTTP), a host, a path other than
// "/", no fragment, no user info, no "." or ".." path segment (nor one
// written with %2E), only the characters RFC 3986 allows in a URI, at
// most 2048 bytes. A query and a port are
// allowed. The URL is not normalized: the document's client_id must
// equal it byte for byte.
func ValidateClientIDURL(clientID string, insecureAllowHTTP bool) error {
	if err := checkClientIDURL(clientID, insecureAllowHTTP); err != "" {
		return fmt.Errorf("%w: %s", ErrInvalidClientID, err)
	}
	return nil
}

func checkClientIDURL(clientID string, insecureAllowHTTP bool) string {
	if len(clientID) > maxURILength {
		return fmt.Sprintf("longer than %d bytes", maxURILength)
	}
	if !strings.HasPrefix(clientID, "https://") && !(insecureAllowHTTP && strings.HasPrefix(clientID, "http://")) {
		return "not an https URL"
	}
	if strings.Contains(clientID, "#") {
		return "has a fragment"
	}
	u, err := url.Parse(clientID)
	if err != nil || strings.IndexFunc(clientID, notURIChar) >= 0 {
		return "not a valid URL"
	}
	if u.User != nil {
		return "has user info"
	}
	if u.Hostname() == "" {
		return "has no host"
	}
	p := u.EscapedPath()
	if p == "" || p == "/" {
		return "has no path"
	}
	for seg := range strings.SplitSeq(p, "/") {
		if d, err := url.PathUnescape(seg); err == nil && (d == "." || d == "..") {
			return "has a dot segment in its path"
		}
	}
	return ""
}

// notURIChar reports whether r may not appear in a URI (RFC 3986 §2:
// unreserved, reserved and "%").
func notURIChar(r rune) bool {
	switch {
	case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		return false
	}
	return !strings.ContainsRune("-._~:/?#[]@!$&'()*+,;=%", r)
}
