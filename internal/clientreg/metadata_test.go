package clientreg

import "testing"

func TestMatchRedirectURI(t *testing.T) {
	tests := []struct {
		name       string
		registered []string
		uri        string
		want       bool
	}{
		{name: "exact https", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/cb", want: true},
		{name: "the second registered URI", registered: []string{"https://a.example/cb", "https://b.example/cb"}, uri: "https://b.example/cb", want: true},
		{name: "no registered URIs", uri: "https://app.example.com/cb"},
		{name: "https on another port", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com:8443/cb"},
		{name: "https with a port, on another port", registered: []string{"https://app.example.com:8443/cb"}, uri: "https://app.example.com:9443/cb"},
		{name: "a prefix of the registered path", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/c"},
		{name: "the registered path extended", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/cb/more"},
		{name: "a trailing slash added", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/cb/"},
		{name: "the path in other case", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/CB"},
		{name: "the host in other case", registered: []string{"https://app.example.com/cb"}, uri: "https://APP.example.com/cb"},
		{name: "a query added", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/cb?x=1"},
		{name: "the query changed", registered: []string{"https://app.example.com/cb?a=1"}, uri: "https://app.example.com/cb?a=2"},
		{name: "a fragment added", registered: []string{"https://app.example.com/cb"}, uri: "https://app.example.com/cb#x"},
		{name: "private-use scheme exact", registered: []string{"com.example.app:/cb"}, uri: "com.example.app:/cb", want: true},
		{name: "private-use scheme, other path", registered: []string{"com.example.app:/cb"}, uri: "com.example.app:/cb2"},

		{name: "loopback IPv4, any port", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:53124/cb", want: true},
		{name: "loopback IPv4 with a port, another port", registered: []string{"http://127.0.0.1:8080/cb"}, uri: "http://127.0.0.1:9090/cb", want: true},
		{name: "loopback IPv4 with a port, no port", registered: []string{"http://127.0.0.1:8080/cb"}, uri: "http://127.0.0.1/cb", want: true},
		{name: "loopback IPv6, any port", registered: []string{"http://[::1]/cb"}, uri: "http://[::1]:53124/cb", want: true},
		{name: "localhost, any port", registered: []string{"http://localhost/cb"}, uri: "http://localhost:53124/cb", want: true},
		{name: "loopback without a path, any port", registered: []string{"http://127.0.0.1"}, uri: "http://127.0.0.1:8080", want: true},
		{name: "loopback with a query, any port", registered: []string{"http://127.0.0.1/cb?a=1"}, uri: "http://127.0.0.1:8080/cb?a=1", want: true},
		{name: "loopback, the query changed", registered: []string{"http://127.0.0.1/cb?a=1"}, uri: "http://127.0.0.1:8080/cb?a=2"},
		{name: "loopback, the path changed", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:8080/other"},
		{name: "loopback, a path prefix", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:8080/cb/x"},
		{name: "loopback, the path in other case", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:8080/CB"},
		{name: "loopback IPv4 registered, localhost asked", registered: []string{"http://127.0.0.1/cb"}, uri: "http://localhost:8080/cb"},
		{name: "localhost registered, IPv6 loopback asked", registered: []string{"http://localhost/cb"}, uri: "http://[::1]:8080/cb"},
		{name: "loopback, https asked", registered: []string{"http://127.0.0.1/cb"}, uri: "https://127.0.0.1:8080/cb"},
		{name: "loopback, a fragment added", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:8080/cb#x"},
		{name: "loopback with a fragment is compared exactly", registered: []string{"http://127.0.0.1/cb#x"}, uri: "http://127.0.0.1:8080/cb#x"},
		{name: "loopback, user info added", registered: []string{"http://127.0.0.1/cb"}, uri: "http://evil@127.0.0.1:8080/cb"},
		{name: "loopback, user info that looks like the host", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:80@evil.example/cb"},
		{name: "loopback, port zero", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:0/cb"},
		{name: "loopback, port too large", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:65536/cb"},
		{name: "loopback, port not a number", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:abc/cb"},
		{name: "loopback, a signed port", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:+80/cb"},
		{name: "loopback, an empty port", registered: []string{"http://127.0.0.1/cb"}, uri: "http://127.0.0.1:/cb"},
		{name: "loopback, the scheme in capitals", registered: []string{"http://127.0.0.1/cb"}, uri: "HTTP://127.0.0.1:8080/cb"},
		{name: "localhost in capitals is compared exactly", registered: []string{"http://LOCALHOST/cb"}, uri: "http://LOCALHOST:8080/cb"},
		{name: "a name resolving to loopback is compared exactly", registered: []string{"http://127.0.0.1.nip.io/cb"}, uri: "http://127.0.0.1.nip.io:8080/cb"},
		{name: "a subdomain of localhost is compared exactly", registered: []string{"http://app.localhost/cb"}, uri: "http://app.localhost:8080/cb"},
		{name: "https loopback is compared exactly", registered: []string{"https://127.0.0.1/cb"}, uri: "https://127.0.0.1:8080/cb"},
		{name: "http on another host is compared exactly", registered: []string{"http://example.com/cb"}, uri: "http://example.com:8080/cb"},
		{name: "an unbracketed IPv6 loopback is not loopback", registered: []string{"http://::1/cb"}, uri: "http://::1:8080/cb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &Metadata{RedirectURIs: tt.registered}
			if got := m.MatchRedirectURI(tt.uri); got != tt.want {
				t.Errorf("MatchRedirectURI(%q) with %q = %v, want %v", tt.uri, tt.registered, got, tt.want)
			}
		})
	}
}

func TestMetadataCloneIsDeep(t *testing.T) {
	m := &Metadata{RedirectURIs: []string{"https://a/cb"}, GrantTypes: []string{"authorization_code"}, ResponseTypes: []string{"code"}}
	c := m.clone()
	c.RedirectURIs[0], c.GrantTypes[0], c.ResponseTypes[0] = "x", "x", "x"
	if m.RedirectURIs[0] != "https://a/cb" || m.GrantTypes[0] != "authorization_code" || m.ResponseTypes[0] != "code" {
		t.Errorf("changing the clone changed the original: %+v", m)
	}
}
