package auth

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

func TestVerifyJWT(t *testing.T) {
	rsaKey := oidctest.NewRSAKey("rsa-1")
	ecKey := oidctest.NewECKey("ec-1")
	f := newFakeIssuer(t, rsaKey, ecKey)
	other := oidctest.NewRSAKey("rsa-1") // same kid, different key: a forgery

	tests := []struct {
		name       string
		token      func() string
		advance    time.Duration
		mutate     func(*Options)
		wantReason Reason // "" = valid
		check      func(*testing.T, *Principal)
	}{
		{
			name:  "valid RS256",
			token: func() string { return rsaKey.Sign(f.Claims(nil)) },
			check: func(t *testing.T, p *Principal) {
				if p.Subject != "alice" || p.Issuer != f.URL() || p.ClientID != "claude" {
					t.Errorf("principal = %+v", p)
				}
				if !slices.Equal(p.Scopes, []string{"mcp:tools", "read"}) {
					t.Errorf("scopes = %q", p.Scopes)
				}
				if !p.Expiry.Equal(t0.Add(time.Hour)) {
					t.Errorf("expiry = %v", p.Expiry)
				}
			},
		},
		{name: "valid ES256", token: func() string { return ecKey.Sign(f.Claims(nil)) }},
		{
			name: "forged signature (same kid, other key)",
			token: func() string {
				return other.Sign(f.Claims(nil))
			},
			wantReason: ReasonBadSignature,
		},
		{
			name: "altered payload",
			token: func() string {
				tok := rsaKey.Sign(f.Claims(nil))
				parts := strings.Split(tok, ".")
				evil := oidctest.Forge(map[string]any{"alg": "RS256", "kid": "rsa-1"}, f.Claims(map[string]any{"sub": "root"}), func([]byte) []byte { return nil })
				return strings.Join([]string{parts[0], strings.Split(evil, ".")[1], parts[2]}, ".")
			},
			wantReason: ReasonBadSignature,
		},
		{
			name: "alg none",
			token: func() string {
				return oidctest.Forge(map[string]any{"alg": "none"}, f.Claims(nil), func([]byte) []byte { return nil })
			},
			wantReason: ReasonBadSignature,
		},
		{
			name: "HS256 signed with the public key",
			token: func() string {
				return oidctest.Forge(map[string]any{"alg": "HS256", "kid": "rsa-1"}, f.Claims(nil), oidctest.HMACWithPublicKey(rsaKey))
			},
			wantReason: ReasonBadSignature,
		},
		{
			name:       "ES256 not in the allow-list",
			token:      func() string { return ecKey.Sign(f.Claims(nil)) },
			mutate:     func(o *Options) { o.Issuers[0].Algorithms = []string{"RS256"} },
			wantReason: ReasonBadSignature,
		},
		{
			name:       "unknown kid",
			token:      func() string { return oidctest.NewRSAKey("nobody").Sign(f.Claims(nil)) },
			wantReason: ReasonUnknownKey,
		},
		{
			name:       "expired",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"exp": t0.Add(-time.Minute).Unix()})) },
			wantReason: ReasonExpired,
		},
		{
			name: "expired within skew",
			token: func() string {
				return rsaKey.Sign(f.Claims(map[string]any{"exp": t0.Add(-10 * time.Second).Unix()}))
			},
		},
		{
			name:    "expires as the clock moves past exp plus skew",
			token:   func() string { return rsaKey.Sign(f.Claims(map[string]any{"exp": t0.Add(time.Minute).Unix()})) },
			advance: 91 * time.Second,
			// 60s to exp, 30s of skew
			wantReason: ReasonExpired,
		},
		{
			name:       "not yet valid (nbf)",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"nbf": t0.Add(time.Minute).Unix()})) },
			wantReason: ReasonNotYetValid,
		},
		{
			name:       "issued in the future (iat)",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"iat": t0.Add(time.Minute).Unix()})) },
			wantReason: ReasonNotYetValid,
		},
		{
			name:  "nbf within skew",
			token: func() string { return rsaKey.Sign(f.Claims(map[string]any{"nbf": t0.Add(20 * time.Second).Unix()})) },
		},
		{
			name:       "zero skew is strict",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"nbf": t0.Add(20 * time.Second).Unix()})) },
			mutate:     func(o *Options) { o.ClockSkew = time.Nanosecond },
			wantReason: ReasonNotYetValid,
		},
		{
			name:       "missing exp",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"exp": nil})) },
			wantReason: ReasonInvalid,
		},
		{
			name:       "wrong issuer",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"iss": "https://evil.example.com"})) },
			wantReason: ReasonWrongIssuer,
		},
		{
			name:       "wrong audience",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"aud": "https://other.example.com/mcp"})) },
			wantReason: ReasonWrongAudience,
		},
		{
			name:       "no audience",
			token:      func() string { return rsaKey.Sign(f.Claims(map[string]any{"aud": nil})) },
			wantReason: ReasonWrongAudience,
		},
		{
			name: "Entra-style extra audience",
			token: func() string {
				return rsaKey.Sign(f.Claims(map[string]any{"aud": []string{"api://portcullis-app-id"}}))
			},
		},
		{
			name:       "required claim missing",
			token:      func() string { return rsaKey.Sign(f.Claims(nil)) },
			mutate:     func(o *Options) { o.Issuers[0].RequiredClaims = []string{"tid"} },
			wantReason: ReasonInvalid,
		},
		{
			name:   "required claim present",
			token:  func() string { return rsaKey.Sign(f.Claims(map[string]any{"tid": "tenant"})) },
			mutate: func(o *Options) { o.Issuers[0].RequiredClaims = []string{"tid"} },
		},
		{
			name: "scp array, azp, roles and groups",
			token: func() string {
				return rsaKey.Sign(f.Claims(map[string]any{"scope": nil, "client_id": nil, "azp": "entra-app",
					"scp": []string{"a", "b"}, "roles": []string{"admin"}, "groups": "ops admin"}))
			},
			check: func(t *testing.T, p *Principal) {
				if !slices.Equal(p.Scopes, []string{"a", "b"}) || p.ClientID != "entra-app" || !slices.Equal(p.Roles, []string{"admin", "ops"}) {
					t.Errorf("principal = %+v", p)
				}
			},
		},
		{
			name: "scp string and cid",
			token: func() string {
				return rsaKey.Sign(f.Claims(map[string]any{"scope": nil, "client_id": nil, "cid": "okta-app", "scp": "x y"}))
			},
			check: func(t *testing.T, p *Principal) {
				if !slices.Equal(p.Scopes, []string{"x", "y"}) || p.ClientID != "okta-app" {
					t.Errorf("principal = %+v", p)
				}
			},
		},
		{name: "garbage", token: func() string { return "not-a-token" }, wantReason: ReasonMalformed},
		{name: "garbage with dots", token: func() string { return "a.b.c" }, wantReason: ReasonMalformed},
		{name: "oversized", token: func() string { return strings.Repeat("a", MaxTokenSize+1) }, wantReason: ReasonMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			o := testOptions(f)
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			tok := tt.token()
			clk.Advance(tt.advance)
			p, err := v.Verify(context.Background(), tok)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if tt.check != nil {
					tt.check(t, p)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify succeeded, want %s", tt.wantReason)
			}
			if got := ReasonOf(err); got != tt.wantReason {
				t.Fatalf("reason = %s (%v), want %s", got, err, tt.wantReason)
			}
			if !errors.Is(err, &Error{Reason: tt.wantReason}) {
				t.Errorf("errors.Is(err, sentinel %s) = false", tt.wantReason)
			}
			if strings.Contains(err.Error(), tok) {
				t.Errorf("error text contains the token")
			}
		})
	}
}

func TestNewVerifierRefusesBadOptions(t *testing.T) {
	if _, err := NewVerifier(context.Background(), Options{}, Deps{}); err == nil {
		t.Error("NewVerifier with auth off: want error")
	}
	o := Options{Issuers: []IssuerOptions{{Issuer: "http://idp.example.com", Algorithms: []string{"HS256"}}}}
	if _, err := NewVerifier(context.Background(), o, Deps{}); err == nil {
		t.Error("NewVerifier with bad options: want error")
	}
}
