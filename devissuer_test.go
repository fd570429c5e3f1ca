package portcullis

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
)

func TestDevIssuerRefusesNonLoopback(t *testing.T) {
	for _, u := range []string{"https://idp.example.com", "http://0.0.0.0:8080/dev", "http://10.0.0.1/dev", "not a url"} {
		if _, err := newDevIssuer(u, nil); err == nil {
			t.Errorf("newDevIssuer(%q): want error", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080/dev", "http://localhost:8080", "http://[::1]:8080/dev"} {
		if _, err := newDevIssuer(u, nil); err != nil {
			t.Errorf("newDevIssuer(%q): %v", u, err)
		}
	}
}

func TestDevIssuerMintVerifies(t *testing.T) {
	now := func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }
	d, err := newDevIssuer("http://127.0.0.1:8080/dev", now)
	if err != nil {
		t.Fatal(err)
	}
	o := auth.Options{Resource: "http://127.0.0.1:8080/mcp", Issuers: []auth.IssuerOptions{d.IssuerOptions()}}
	o.Defaults()
	v, err := auth.NewVerifier(context.Background(), o, auth.Deps{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.(auth.Readier).Ready(context.Background()); err != nil {
		t.Errorf("Ready: %v", err)
	}
	tok, err := d.Mint("dev-user", o.Resource, []string{"mcp:tools"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if p.Subject != "dev-user" || p.Issuer != "http://127.0.0.1:8080/dev" || !slices.Equal(p.Scopes, []string{"mcp:tools"}) {
		t.Errorf("principal = %+v", p)
	}
	other, _ := d.Mint("dev-user", "https://elsewhere/mcp", nil, time.Hour)
	if _, err := v.Verify(context.Background(), other); auth.ReasonOf(err) != auth.ReasonWrongAudience {
		t.Errorf("token for another resource: err = %v", err)
	}
	// A different dev issuer's token (same URL, other key) is refused.
	d2, _ := newDevIssuer("http://127.0.0.1:8080/dev", now)
	forged, _ := d2.Mint("dev-user", o.Resource, nil, time.Hour)
	if _, err := v.Verify(context.Background(), forged); auth.ReasonOf(err) != auth.ReasonBadSignature {
		t.Errorf("other key: err = %v, want bad_signature", err)
	}
}

// TestDevIssuerHTTP discovers the dev issuer over HTTP and uses its token
// endpoint, as a client would.
func TestDevIssuerHTTP(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	d, err := newDevIssuer(srv.URL+"/dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	d.DefaultAudience = srv.URL + "/mcp"
	mux.Handle("/dev/", d.Handler())

	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"inspector"}, "scope": {"mcp:tools"}, "resource": {srv.URL + "/mcp"}}
	resp, err := http.Post(srv.URL+"/dev/token", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 || tr.TokenType != "Bearer" {
		t.Fatalf("token response %d %+v %v", resp.StatusCode, tr, err)
	}
	// Verify through discovery + JWKS over HTTP (no in-process key set).
	o := auth.Options{Resource: srv.URL + "/mcp", Issuers: []auth.IssuerOptions{{Issuer: d.Issuer(), Algorithms: []string{"ES256"}}}}
	o.Defaults()
	v, err := auth.NewVerifier(context.Background(), o, auth.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), tr.AccessToken)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if p.ClientID != "inspector" || !p.HasScopes("mcp:tools") {
		t.Errorf("principal = %+v", p)
	}

	bad, _ := http.Post(srv.URL+"/dev/token", "application/x-www-form-urlencoded", strings.NewReader("grant_type=password"))
	bad.Body.Close()
	if bad.StatusCode != 400 {
		t.Errorf("password grant: status %d, want 400", bad.StatusCode)
	}
}

// TestDevIssuerLoopbackOnly shows the DNS-rebinding defence: every
// endpoint answers only requests whose Host names a loopback host, and
// whose Origin, when sent, is a loopback origin.
func TestDevIssuerLoopbackOnly(t *testing.T) {
	d, err := newDevIssuer("http://127.0.0.1:8080/dev", nil)
	if err != nil {
		t.Fatal(err)
	}
	d.DefaultAudience = "http://127.0.0.1:8080/mcp"
	h := d.Handler()
	tests := []struct {
		name   string
		host   string
		origin []string
		want   int
	}{
		{name: "127.0.0.1 with port", host: "127.0.0.1:8080", want: 200},
		{name: "localhost", host: "localhost:8080", want: 200},
		{name: "LOCALHOST without port", host: "LOCALHOST", want: 200},
		{name: "[::1]", host: "[::1]:8080", want: 200},
		{name: "127.0.0.2", host: "127.0.0.2:8080", want: 200},
		{name: "loopback origin", host: "127.0.0.1:8080", origin: []string{"http://localhost:6274"}, want: 200},
		{name: "loopback https origin", host: "127.0.0.1:8080", origin: []string{"https://127.0.0.1"}, want: 200},

		{name: "Host evil.example", host: "evil.example", want: 421},
		{name: "Host evil.example with port", host: "evil.example:8080", want: 421},
		{name: "Host 127.0.0.1.nip.io", host: "127.0.0.1.nip.io:8080", want: 421},
		{name: "Host localhost.evil.example", host: "localhost.evil.example", want: 421},
		{name: "Host rebind.localhost", host: "rebind.localhost:8080", want: 421},
		{name: "Host 0.0.0.0", host: "0.0.0.0:8080", want: 421},
		{name: "Host 10.0.0.1", host: "10.0.0.1:8080", want: 421},
		{name: "Host empty", host: "", want: 421},
		{name: "Origin evil.example", host: "127.0.0.1:8080", origin: []string{"http://evil.example"}, want: 403},
		{name: "Origin 127.0.0.1.nip.io", host: "127.0.0.1:8080", origin: []string{"http://127.0.0.1.nip.io:8080"}, want: 403},
		{name: "Origin null", host: "127.0.0.1:8080", origin: []string{"null"}, want: 403},
		{name: "Origin not http", host: "127.0.0.1:8080", origin: []string{"file://localhost"}, want: 403},
		{name: "Origin with userinfo", host: "127.0.0.1:8080", origin: []string{"http://evil.example@localhost"}, want: 403},
		{name: "two Origins", host: "127.0.0.1:8080", origin: []string{"http://localhost", "http://evil.example"}, want: 403},
		{name: "Origin empty", host: "127.0.0.1:8080", origin: []string{""}, want: 403},
	}
	endpoints := []struct {
		method, path string
		body         string
	}{
		{"GET", "/dev/.well-known/openid-configuration", ""},
		{"GET", "/dev/.well-known/oauth-authorization-server", ""},
		{"GET", "/dev/jwks", ""},
		{"POST", "/dev/token", "grant_type=client_credentials"},
	}
	for _, tt := range tests {
		for _, ep := range endpoints {
			t.Run(tt.name+" "+ep.path, func(t *testing.T) {
				req := httptest.NewRequest(ep.method, "http://127.0.0.1:8080"+ep.path, strings.NewReader(ep.body))
				req.Host = tt.host
				if ep.body != "" {
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				}
				for _, o := range tt.origin {
					req.Header.Add("Origin", o)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != tt.want {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.want, rec.Body)
				}
				if tt.want != 200 && (strings.Contains(rec.Body.String(), "access_token") || strings.Contains(rec.Body.String(), "keys")) {
					t.Errorf("refused request got a token or keys: %s", rec.Body)
				}
			})
		}
	}
}
