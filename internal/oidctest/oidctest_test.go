package oidctest_test

import (
	"crypto"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// TestIssuer shows that go-oidc discovers each kind of issuer, fetches its
// keys and verifies the tokens it signs, over the network and in memory.
func TestIssuer(t *testing.T) {
	k := oidctest.NewECKey("k1")
	tests := []struct {
		name string
		opts oidctest.Options
	}{
		{name: "httptest", opts: oidctest.Options{Keys: []*oidctest.Key{k}}},
		{name: "httptest with a path", opts: oidctest.Options{Keys: []*oidctest.Key{k}, Path: "/tenant"}},
		{name: "in memory", opts: oidctest.Options{Keys: []*oidctest.Key{k}, URL: "https://idp.example.com/realms/corp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idp := oidctest.Start(t, tt.opts)
			ctx := oidc.ClientContext(t.Context(), idp.Client())
			p, err := oidc.NewProvider(ctx, idp.URL())
			if err != nil {
				t.Fatal(err)
			}
			tok := k.Sign(idp.Claims(map[string]any{"sub": "alice", "aud": "api"}))
			if _, err := p.VerifierContext(ctx, &oidc.Config{ClientID: "api", SkipExpiryCheck: true, SupportedSigningAlgs: []string{"ES256"}}).Verify(ctx, tok); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if got := idp.JWKSFetches(); got != 1 {
				t.Errorf("JWKSFetches = %d, want 1", got)
			}
		})
	}
}

// TestDiscoveryDocuments shows which document each Discovery serves, and
// that Metadata changes it.
func TestDiscoveryDocuments(t *testing.T) {
	tests := []struct {
		name string
		opts oidctest.Options
		path string // under the server's origin, with {path} the issuer's
		want int
		meta map[string]any // members wanted in the document
	}{
		{name: "OpenID", opts: oidctest.Options{Path: "/t"}, path: "/t/.well-known/openid-configuration", want: 200,
			meta: map[string]any{"code_challenge_methods_supported": []any{"S256"}}},
		{name: "OpenID has no RFC 8414", opts: oidctest.Options{Path: "/t"}, path: "/.well-known/oauth-authorization-server/t", want: 404},
		{name: "RFC 8414", opts: oidctest.Options{Path: "/t", Discovery: oidctest.RFC8414}, path: "/.well-known/oauth-authorization-server/t", want: 200},
		{name: "RFC 8414 has no OpenID", opts: oidctest.Options{Path: "/t", Discovery: oidctest.RFC8414}, path: "/t/.well-known/openid-configuration", want: 404},
		{name: "none", opts: oidctest.Options{Discovery: oidctest.NoDiscovery}, path: "/.well-known/openid-configuration", want: 404},
		{name: "Metadata", opts: oidctest.Options{Metadata: map[string]any{"issuer": "https://other", "code_challenge_methods_supported": nil}},
			path: "/.well-known/openid-configuration", want: 200, meta: map[string]any{"issuer": "https://other", "code_challenge_methods_supported": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idp := oidctest.Start(t, tt.opts)
			origin := strings.TrimSuffix(idp.URL(), tt.opts.Path)
			resp, err := idp.Client().Get(origin + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("GET %s: %d, want %d", tt.path, resp.StatusCode, tt.want)
			}
			var doc map[string]any
			if tt.want == 200 {
				if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
					t.Fatal(err)
				}
			}
			for k, v := range tt.meta {
				if b, _ := json.Marshal(doc[k]); string(b) != mustJSON(v) {
					t.Errorf("%s = %s, want %s", k, b, mustJSON(v))
				}
			}
		})
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestFailures shows each failure mode over the network and in memory, and
// that failed JWKS requests are counted.
func TestFailures(t *testing.T) {
	idp := oidctest.Start(t, oidctest.Options{})
	remote := &http.Client{}
	get := func(c *http.Client) (int, error) {
		resp, err := c.Get(idp.JWKSURL())
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	idp.SetFailure(oidctest.BadGateway)
	for _, c := range []*http.Client{remote, idp.Client()} {
		if code, err := get(c); code != http.StatusBadGateway {
			t.Errorf("BadGateway: %d %v, want 502", code, err)
		}
	}
	idp.SetFailure(oidctest.Refused)
	if _, err := get(idp.Client()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Refused in memory: err = %v, want connection refused", err)
	}
	if _, err := get(remote); err == nil {
		t.Error("Refused over the network: want an error")
	}
	idp.SetFailure(oidctest.Up)
	if code, err := get(remote); code != http.StatusOK {
		t.Errorf("Up: %d %v, want 200", code, err)
	}
	if got := idp.JWKSFetches(); got != 5 {
		t.Errorf("JWKSFetches = %d, want 5", got)
	}
}

// TestSign shows the header a token gets by default and with Type.
func TestSign(t *testing.T) {
	k := oidctest.NewRSAKey("r1")
	for _, tt := range []struct {
		name string
		opts []oidctest.TokenOption
		want string // the header's typ, "" for none
	}{
		{name: "access token", want: "at+jwt"},
		{name: "ID token", opts: []oidctest.TokenOption{oidctest.Type("JWT")}, want: "JWT"},
		{name: "untyped", opts: []oidctest.TokenOption{oidctest.Type("")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok := k.Sign(map[string]any{"sub": "s"}, tt.opts...)
			ks := &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{k.Public()}}
			if _, err := ks.VerifySignature(t.Context(), tok); err != nil {
				t.Fatal(err)
			}
			header := decodeHeader(t, tok)
			if header["kid"] != "r1" || header["alg"] != "RS256" {
				t.Errorf("header %v, want kid r1 and alg RS256", header)
			}
			if typ, _ := header["typ"].(string); typ != tt.want {
				t.Errorf("typ = %q, want %q", typ, tt.want)
			}
		})
	}
}

// TestAlterSignature checks that no altered token verifies, over enough
// tokens that an alteration of the signature's padding bits (which passes
// about once in 250) would show.
func TestAlterSignature(t *testing.T) {
	for _, tt := range []struct {
		name   string
		key    *oidctest.Key
		tokens int
	}{
		{name: "ES256", key: oidctest.NewECKey("e1"), tokens: 2000},
		{name: "RS256", key: oidctest.NewRSAKey("r1"), tokens: 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ks := &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{tt.key.Public()}}
			for i := range tt.tokens {
				tok := tt.key.Sign(map[string]any{"sub": "s", "n": i})
				if _, err := ks.VerifySignature(t.Context(), tok); err != nil {
					t.Fatal(err)
				}
				altered := oidctest.AlterSignature(tok)
				if _, err := ks.VerifySignature(t.Context(), altered); err == nil {
					t.Fatalf("AlterSignature(%q) = %q verifies", tok, altered)
				}
			}
		})
	}
}

func decodeHeader(t *testing.T, tok string) map[string]any {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(tok[:strings.IndexByte(tok, '.')])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(raw, &h); err != nil {
		t.Fatal(err)
	}
	return h
}
