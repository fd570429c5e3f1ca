package clientreg

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateClientIDURL(t *testing.T) {
	tests := []struct {
		name      string
		clientID  string
		allowHTTP bool
		wantErr   string // "" means valid
	}{
		{name: "https with a path", clientID: "https://app.example.com/client.json"},
		{name: "https with a port", clientID: "https://app.example.com:8443/oauth/client"},
		{name: "https with a query", clientID: "https://app.example.com/client?v=1"},
		{name: "an IP literal", clientID: "https://192.0.2.1/client.json"},
		{name: "http", clientID: "http://app.example.com/client.json", wantErr: "not an https URL"},
		{name: "http, allowed", clientID: "http://app.example.com/client.json", allowHTTP: true},
		{name: "https in capitals", clientID: "HTTPS://app.example.com/client.json", wantErr: "not an https URL"},
		{name: "another scheme", clientID: "urn:example:client", wantErr: "not an https URL"},
		{name: "an opaque client_id", clientID: "abc123", wantErr: "not an https URL"},
		{name: "empty", clientID: "", wantErr: "not an https URL"},
		{name: "no path", clientID: "https://app.example.com", wantErr: "no path"},
		{name: "the root path", clientID: "https://app.example.com/", wantErr: "no path"},
		{name: "no path but a query", clientID: "https://app.example.com?x=1", wantErr: "no path"},
		{name: "a fragment", clientID: "https://app.example.com/client.json#x", wantErr: "fragment"},
		{name: "an empty fragment", clientID: "https://app.example.com/client.json#", wantErr: "fragment"},
		{name: "user info", clientID: "https://user@app.example.com/client.json", wantErr: "user info"},
		{name: "user and password", clientID: "https://user:pw@app.example.com/client.json", wantErr: "user info"},
		{name: "no host", clientID: "https:///client.json", wantErr: "no host"},
		{name: "a port but no host", clientID: "https://:443/client.json", wantErr: "no host"},
		{name: "a dot segment", clientID: "https://app.example.com/./client.json", wantErr: "dot segment"},
		{name: "a double-dot segment", clientID: "https://app.example.com/a/../client.json", wantErr: "dot segment"},
		{name: "a trailing double-dot segment", clientID: "https://app.example.com/a/..", wantErr: "dot segment"},
		{name: "a percent-encoded dot segment", clientID: "https://app.example.com/%2e/client.json", wantErr: "dot segment"},
		{name: "a percent-encoded double-dot segment", clientID: "https://app.example.com/a/%2E%2e/client.json", wantErr: "dot segment"},
		{name: "dots inside a segment", clientID: "https://app.example.com/a..b/.well-known/client.json"},
		{name: "invalid percent-encoding", clientID: "https://app.example.com/%zz", wantErr: "not a valid URL"},
		{name: "a space", clientID: "https://app.example.com/a b", wantErr: "not a valid URL"},
		{name: "a non-ASCII host", clientID: "https://exämple.com/client.json", wantErr: "not a valid URL"},
		{name: "an angle bracket", clientID: "https://app.example.com/<script>", wantErr: "not a valid URL"},
		{name: "too long", clientID: "https://app.example.com/" + strings.Repeat("a", maxURILength), wantErr: "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateClientIDURL(tt.clientID, tt.allowHTTP)
			if tt.wantErr == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidClientID) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want ErrInvalidClientID with %q", err, tt.wantErr)
			}
		})
	}
}

func TestIsURLClientID(t *testing.T) {
	tests := []struct {
		name      string
		id        string
		allowHTTP bool
		want      bool
	}{
		{name: "https", id: "https://app.example.com/client.json", want: true},
		{name: "https, no host: Get refuses it", id: "https://", want: true},
		{name: "http", id: "http://app.example.com/client.json"},
		{name: "http with insecure_allow_http", id: "http://app.example.com/client.json", allowHTTP: true, want: true},
		{name: "https with insecure_allow_http", id: "https://app.example.com/client.json", allowHTTP: true, want: true},
		{name: "a plain id", id: "8f7e2c1a", allowHTTP: true},
		{name: "empty", id: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsURLClientID(tt.id, tt.allowHTTP); got != tt.want {
				t.Errorf("IsURLClientID(%q, %v) = %v, want %v", tt.id, tt.allowHTTP, got, tt.want)
			}
		})
	}
}
