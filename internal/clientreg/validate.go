package clientreg

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on metadata fields, in bytes.
const (
	maxNameLength     = 256  // client_name, software_id, software_version
	maxURILength      = 2048 // client_uri, logo_uri, each redirect URI, a client_id URL
	maxScopeLength    = 1024 // scope
	grantAuthCode     = "authorization_code"
	grantRefreshToken = "refresh_token"
	authMethodNone    = "none"
)

// dangerousSchemes are refused as redirect URIs by name, so the error says
// why, although none of them has the dot a private-use scheme needs.
var dangerousSchemes = []string{"javascript", "vbscript", "data", "file", "blob", "about", "filesystem", "view-source", "jar"}

// validateMetadata checks m and fills in its defaults. authMethods are the
// token_endpoint_auth_method values accepted; refuseMethod, when it says
// something for a method, explains its refusal.
func validateMetadata(m *Metadata, maxRedirectURIs int, authMethods []string, refuseMethod func(string) string) *RegistrationError {
	if len(m.RedirectURIs) == 0 {
		return redirectErr("redirect_uris is required and must hold at least one URI")
	}
	if len(m.RedirectURIs) > maxRedirectURIs {
		return redirectErr(fmt.Sprintf("redirect_uris holds %d URIs, more than the %d allowed", len(m.RedirectURIs), maxRedirectURIs))
	}
	for i, u := range m.RedirectURIs {
		if why := checkRedirectURI(u); why != "" {
			return redirectErr(fmt.Sprintf("redirect_uris[%d]: %s", i, why))
		}
	}

	if len(m.GrantTypes) == 0 {
		m.GrantTypes = []string{grantAuthCode, grantRefreshToken}
	}
	for _, g := range m.GrantTypes {
		if g != grantAuthCode && g != grantRefreshToken {
			return metadataErr(fmt.Sprintf("grant_types: %q is not supported; use authorization_code and refresh_token", clip(g)))
		}
	}
	if !slices.Contains(m.GrantTypes, grantAuthCode) {
		return metadataErr("grant_types must include authorization_code")
	}
	if len(m.ResponseTypes) == 0 {
		m.ResponseTypes = []string{"code"}
	}
	for _, r := range m.ResponseTypes {
		if r != "code" {
			return metadataErr(fmt.Sprintf("response_types: %q is not supported; only code is", clip(r)))
		}
	}
	if m.TokenEndpointAuthMethod == "" {
		m.TokenEndpointAuthMethod = authMethodNone
	}
	if !slices.Contains(authMethods, m.TokenEndpointAuthMethod) {
		why := refuseMethod(m.TokenEndpointAuthMethod)
		if why == "" {
			why = "is not supported; use " + strings.Join(authMethods, ", ")
		}
		return metadataErr(fmt.Sprintf("token_endpoint_auth_method %q %s", clip(m.TokenEndpointAuthMethod), why))
	}

	for _, f := range []struct{ name, value string }{
		{"client_name", m.ClientName},
		{"software_id", m.SoftwareID},
		{"software_version", m.SoftwareVersion},
	} {
		if why := checkText(f.value, maxNameLength); why != "" {
			return metadataErr(f.name + " " + why)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"client_uri", m.ClientURI},
		{"logo_uri", m.LogoURI},
	} {
		if f.value == "" {
			continue
		}
		if why := checkHTTPSURI(f.value); why != "" {
			return metadataErr(f.name + " " + why)
		}
	}
	if why := checkScope(m.Scope); why != "" {
		return metadataErr("scope " + why)
	}
	return nil
}

// checkRedirectURI returns why uri may not be a redirect URI, or "". A
// redirect URI is absolute, has no fragment and no user info, is at most
// maxURILength bytes, and is one of: https with a host; http on a loopback
// host (RFC 8252 §7.3, §8.3); a private-use scheme in reverse-domain form,
// with a dot (RFC 8252 §7.1).
func checkRedirectURI(uri string) string {
	if len(uri) > maxURILength {
		return fmt.Sprintf("is longer than %d bytes", maxURILength)
	}
	if strings.Contains(uri, "#") {
		return "must not have a fragment"
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "is not a valid URI"
	}
	if u.Scheme == "" {
		return "must be an absolute URI"
	}
	if slices.Contains(dangerousSchemes, u.Scheme) {
		return fmt.Sprintf("the %s: scheme is never allowed", u.Scheme)
	}
	if u.User != nil || strings.Contains(u.Host, "@") {
		return "must not have user info"
	}
	switch u.Scheme {
	case "https":
		if u.Host == "" || u.Hostname() == "" {
			return "must have a host"
		}
		return ""
	case "http":
		if _, _, ok := splitLoopback(uri); !ok {
			return "http is allowed only on a loopback host (127.0.0.1, [::1] or localhost); use https"
		}
		return ""
	}
	if !strings.Contains(u.Scheme, ".") || strings.HasPrefix(u.Scheme, ".") || strings.HasSuffix(u.Scheme, ".") || strings.Contains(u.Scheme, "..") {
		return fmt.Sprintf("the %s: scheme is not allowed; use https, http on a loopback host, or a private-use scheme in reverse-domain form such as com.example.app:/callback", clip(u.Scheme))
	}
	if u.Opaque == "" && u.Path == "" && u.Host == "" {
		return "a private-use scheme URI needs a path"
	}
	return ""
}

// checkHTTPSURI returns why uri may not be a client_uri or logo_uri, or "".
func checkHTTPSURI(uri string) string {
	if len(uri) > maxURILength {
		return fmt.Sprintf("is longer than %d bytes", maxURILength)
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" {
		return "must be an https URL with a host"
	}
	if u.User != nil {
		return "must not have user info"
	}
	return ""
}

// checkText returns why s may not be a display string, or "": too long,
// not UTF-8, or holding a control or bidirectional formatting character.
func checkText(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("is longer than %d bytes", max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return "must not hold control characters"
		}
	}
	return ""
}

// checkScope returns why s is not an RFC 6749 §3.3 scope, or "": tokens
// of %x21 / %x23-5B / %x5D-7E separated by single spaces.
func checkScope(s string) string {
	if s == "" {
		return ""
	}
	if len(s) > maxScopeLength {
		return fmt.Sprintf("is longer than %d bytes", maxScopeLength)
	}
	for tok := range strings.SplitSeq(s, " ") {
		if tok == "" {
			return "must be scope tokens separated by single spaces"
		}
		for i := 0; i < len(tok); i++ {
			c := tok[i]
			if c < 0x21 || c == '"' || c == '\\' || c > 0x7e {
				return "holds a character a scope token may not"
			}
		}
	}
	return ""
}

// clip shortens a value the client sent before it goes into a description.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

func redirectErr(desc string) *RegistrationError {
	return &RegistrationError{Code: CodeInvalidRedirectURI, Description: desc}
}

func metadataErr(desc string) *RegistrationError {
	return &RegistrationError{Code: CodeInvalidClientMetadata, Description: desc}
}
