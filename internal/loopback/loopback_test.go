package loopback

import "testing"

func TestHost(t *testing.T) {
	tests := []struct {
		name     string
		hostport string
		want     bool
	}{
		{name: "localhost", hostport: "localhost", want: true},
		{name: "localhost in capitals", hostport: "LocalHost", want: true},
		{name: "localhost with a port", hostport: "localhost:8080", want: true},
		{name: "IPv4 loopback", hostport: "127.0.0.1", want: true},
		{name: "IPv4 loopback with a port", hostport: "127.0.0.1:8080", want: true},
		{name: "anywhere in 127/8", hostport: "127.1.2.3:80", want: true},
		{name: "IPv6 loopback bracketed", hostport: "[::1]", want: true},
		{name: "IPv6 loopback with a port", hostport: "[::1]:8080", want: true},
		{name: "IPv6 loopback bare", hostport: "::1", want: true},
		{name: "a name that resolves to loopback", hostport: "127.0.0.1.nip.io"},
		{name: "a name that starts with localhost", hostport: "localhost.evil.example"},
		{name: "a name that starts with localhost, with a port", hostport: "localhost.evil.example:80"},
		{name: "a subdomain of localhost", hostport: "app.localhost"},
		{name: "every interface", hostport: ":8080"},
		{name: "empty", hostport: ""},
		{name: "unspecified IPv4", hostport: "0.0.0.0:8080"},
		{name: "a public address", hostport: "192.0.2.1:443"},
		{name: "IPv6 unspecified", hostport: "[::]:8080"},
		{name: "a port only, no colon", hostport: "8080"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Host(tt.hostport); got != tt.want {
				t.Errorf("Host(%q) = %v, want %v", tt.hostport, got, tt.want)
			}
		})
	}
}
