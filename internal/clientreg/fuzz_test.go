package clientreg

import (
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
)

func FuzzValidateRegistration(f *testing.F) {
	for _, s := range []string{
		`{"redirect_uris":["https://app.example.com/cb"]}`,
		`{"redirect_uris":["http://127.0.0.1:8080/cb","http://[::1]/cb","http://localhost/cb"],"grant_types":["authorization_code"]}`,
		`{"redirect_uris":["com.example.app:/cb"],"client_name":"App","scope":"a b"}`,
		`{"redirect_uris":["javascript:alert(1)"]}`,
		`{"redirect_uris":["https://a/cb#x"],"client_uri":"http://a"}`,
		`{"redirect_uris":["http://user@127.0.0.1/cb"]}`,
		`[]`, `null`, `{}`, `{"redirect_uris":"x"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := ValidateRegistration(body, RegistrationOptions{})
		if err != nil {
			var rerr *RegistrationError
			if m != nil || !errors.As(err, &rerr) || (rerr.Code != CodeInvalidRedirectURI && rerr.Code != CodeInvalidClientMetadata) {
				t.Fatalf("ValidateRegistration = %+v, %v", m, err)
			}
			return
		}
		if len(m.RedirectURIs) == 0 || m.ClientID != "" {
			t.Fatalf("accepted %+v", m)
		}
		for _, u := range m.RedirectURIs {
			if why := redirectURIBreaksTheRules(u); why != "" {
				t.Fatalf("accepted redirect URI %q: %s", u, why)
			}
		}
		for _, g := range m.GrantTypes {
			if g != "authorization_code" && g != "refresh_token" {
				t.Fatalf("accepted grant type %q", g)
			}
		}
		if !slices.Equal(m.ResponseTypes, slices.Repeat([]string{"code"}, len(m.ResponseTypes))) || len(m.ResponseTypes) == 0 {
			t.Fatalf("accepted response types %q", m.ResponseTypes)
		}
		if !slices.Contains([]string{"none", "client_secret_basic", "client_secret_post"}, m.TokenEndpointAuthMethod) {
			t.Fatalf("accepted auth method %q", m.TokenEndpointAuthMethod)
		}
		for _, u := range []string{m.ClientURI, m.LogoURI} {
			if u != "" && !strings.HasPrefix(u, "https://") {
				t.Fatalf("accepted client or logo URI %q", u)
			}
		}
		if _, err := json.Marshal(m); err != nil {
			t.Fatal(err)
		}
	})
}

// redirectURIBreaksTheRules restates the redirect URI rules independently
// of checkRedirectURI, for the fuzz tests.
func redirectURIBreaksTheRules(uri string) string {
	if strings.Contains(uri, "#") {
		return "a fragment"
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme == "" {
		return "not absolute"
	}
	if u.User != nil {
		return "user info"
	}
	switch scheme := strings.ToLower(u.Scheme); {
	case scheme == "https":
		if u.Hostname() == "" {
			return "https without a host"
		}
	case scheme == "http":
		h := u.Hostname()
		if h != "localhost" && h != "::1" && !strings.HasPrefix(h, "127.") {
			return "http on " + h
		}
	case !strings.Contains(scheme, "."):
		return "a scheme without a dot"
	case slices.Contains([]string{"javascript", "data", "file", "vbscript", "blob"}, scheme):
		return "a dangerous scheme"
	}
	return ""
}

func FuzzMatchRedirectURI(f *testing.F) {
	for _, s := range [][2]string{
		{"https://app.example.com/cb", "https://app.example.com/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:8080/cb"},
		{"http://[::1]:80/cb?x", "http://[::1]:9/cb?x"},
		{"http://localhost/cb", "http://localhost:0/cb"},
		{"http://127.0.0.1/cb", "http://127.0.0.1:80@evil/cb"},
		{"com.example.app:/cb", "com.example.app:/cb"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, registered, uri string) {
		m := &Metadata{RedirectURIs: []string{registered}}
		if !m.MatchRedirectURI(uri) || registered == uri {
			return
		}
		// A match that is not exact: both are http loopback URIs that
		// differ only in their ports.
		for _, s := range []string{registered, uri} {
			u, err := url.Parse(s)
			if err != nil || u.Scheme != "http" || u.User != nil || u.Fragment != "" || strings.Contains(s, "#") {
				t.Fatalf("%q matched %q, and %q is not a plain http URI", uri, registered, s)
			}
			if h := u.Hostname(); h != "localhost" && h != "::1" && !strings.HasPrefix(h, "127.") {
				t.Fatalf("%q matched %q on another port, and %s is not loopback", uri, registered, h)
			}
		}
		if stripPort(registered) != stripPort(uri) {
			t.Fatalf("%q matched %q but they differ in more than the port", uri, registered)
		}
	})
}

// stripPort removes the port from an http URI's authority.
func stripPort(s string) string {
	u, _ := url.Parse(s)
	host := u.Host
	if p := u.Port(); p != "" {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return "http://" + host + strings.TrimPrefix(s, "http://"+u.Host)
}
