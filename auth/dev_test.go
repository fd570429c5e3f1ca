package auth

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
)

func TestDevIssuerRefusesNonLoopback(t *testing.T) {
	for _, u := range []string{"https://idp.example.com", "http://0.0.0.0:8080/dev", "http://10.0.0.1/dev", "not a url"} {
		if _, err := NewDevIssuer(u, nil); err == nil {
			t.Errorf("NewDevIssuer(%q): want error", u)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080/dev", "http://localhost:8080", "http://[::1]:8080/dev"} {
		if _, err := NewDevIssuer(u, nil); err != nil {
			t.Errorf("NewDevIssuer(%q): %v", u, err)
		}
	}
}

func TestDevIssuerMintVerifies(t *testing.T) {
	clk := newClock()
	d, err := NewDevIssuer("http://127.0.0.1:8080/dev", clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Resource: "http://127.0.0.1:8080/mcp", Issuers: []IssuerOptions{d.IssuerOptions()}}
	o.Defaults()
	v, err := NewVerifier(context.Background(), o, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.(Readier).Ready(context.Background()); err != nil {
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
	if _, err := v.Verify(context.Background(), other); ReasonOf(err) != ReasonWrongAudience {
		t.Errorf("token for another resource: err = %v", err)
	}
	// A different dev issuer's token (same URL, other key) is refused.
	d2, _ := NewDevIssuer("http://127.0.0.1:8080/dev", clk.Now)
	forged, _ := d2.Mint("dev-user", o.Resource, nil, time.Hour)
	if _, err := v.Verify(context.Background(), forged); ReasonOf(err) != ReasonBadSignature {
		t.Errorf("other key: err = %v, want bad_signature", err)
	}
}

// TestDevIssuerHTTP discovers the dev issuer over HTTP and uses its token
// endpoint, as a client would.
func TestDevIssuerHTTP(t *testing.T) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	d, err := NewDevIssuer(srv.URL+"/dev", nil)
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
	o := Options{Resource: srv.URL + "/mcp", Issuers: []IssuerOptions{{Issuer: d.Issuer(), Algorithms: []string{"ES256"}}}}
	o.Defaults()
	v, err := NewVerifier(context.Background(), o, nil, nil)
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
