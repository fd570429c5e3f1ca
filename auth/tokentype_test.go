package auth

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// TestTokenType shows that only access tokens verify: typ at+jwt by
// default; with allow_untyped_access_tokens also an untyped or "JWT" token,
// but never one with the marks of an ID token, nor another typ.
func TestTokenType(t *testing.T) {
	k := oidctest.NewRSAKey("rsa-1")
	f := newFakeIssuer(t, k)
	// idToken is what an OpenID provider returns next to an access token:
	// aud the client, a nonce, at_hash.
	idToken := map[string]any{"aud": "api://portcullis-app-id", "nonce": "n-0S6_WzA2Mj", "at_hash": "77QmUPtjPfzWtF2AnpK9RQ", "scope": nil, "client_id": nil, "azp": "claude"}

	tests := []struct {
		name    string
		typ     string
		claims  map[string]any // overrides of f.claims
		untyped bool           // the issuer's allow_untyped_access_tokens
		forge   bool           // signed by a key the issuer does not have
		want    Reason         // "" = accepted
	}{
		{name: "at+jwt", typ: "at+jwt"},
		{name: "application/at+jwt", typ: "application/at+jwt"},
		{name: "AT+JWT (case-insensitive)", typ: "AT+JWT"},
		{name: "Application/At+Jwt", typ: "Application/At+Jwt"},
		{name: "JWT", typ: "JWT", want: ReasonWrongTokenType},
		{name: "missing", typ: "", want: ReasonWrongTokenType},
		{name: "application/jwt", typ: "application/jwt", want: ReasonWrongTokenType},
		{name: "ID token (typ JWT)", typ: "JWT", claims: idToken, want: ReasonWrongTokenType},
		{name: "ID token (no typ)", typ: "", claims: idToken, want: ReasonWrongTokenType},
		{name: "logout token", typ: "logout+jwt", want: ReasonWrongTokenType},
		{name: "at+jwt prefix is not at+jwt", typ: "at+jwt2", want: ReasonWrongTokenType},
		{name: "wrong typ with a forged signature is a bad signature", typ: "JWT", forge: true, want: ReasonBadSignature},

		{name: "untyped allowed: at+jwt", typ: "at+jwt", untyped: true},
		{name: "untyped allowed: JWT", typ: "JWT", untyped: true},
		{name: "untyped allowed: jwt", typ: "jwt", untyped: true},
		{name: "untyped allowed: missing", typ: "", untyped: true},
		{name: "untyped allowed: application/jwt", typ: "application/jwt", untyped: true},
		{name: "untyped allowed: Keycloak access token (typ claim Bearer)", typ: "JWT", untyped: true, claims: map[string]any{"typ": "Bearer"}},
		{name: "untyped allowed: ID token (typ JWT)", typ: "JWT", untyped: true, claims: idToken, want: ReasonWrongTokenType},
		{name: "untyped allowed: ID token (no typ)", typ: "", untyped: true, claims: idToken, want: ReasonWrongTokenType},
		{name: "untyped allowed: nonce", typ: "JWT", untyped: true, claims: map[string]any{"nonce": "n"}, want: ReasonWrongTokenType},
		{name: "untyped allowed: at_hash", typ: "", untyped: true, claims: map[string]any{"at_hash": "h"}, want: ReasonWrongTokenType},
		{name: "untyped allowed: c_hash", typ: "JWT", untyped: true, claims: map[string]any{"c_hash": "h"}, want: ReasonWrongTokenType},
		{name: "untyped allowed: s_hash", typ: "JWT", untyped: true, claims: map[string]any{"s_hash": "h"}, want: ReasonWrongTokenType},
		{name: "untyped allowed: Keycloak ID token (typ claim ID)", typ: "JWT", untyped: true, claims: map[string]any{"typ": "ID"}, want: ReasonWrongTokenType},
		{name: "untyped allowed: typ id_token", typ: "id_token", untyped: true, want: ReasonWrongTokenType},
		{name: "untyped allowed: logout token", typ: "logout+jwt", untyped: true, want: ReasonWrongTokenType},
		{name: "untyped allowed: DPoP proof", typ: "dpop+jwt", untyped: true, want: ReasonWrongTokenType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(f)
			o.Issuers[0].AllowUntypedAccessTokens = tt.untyped
			v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			key := k
			if tt.forge {
				key = oidctest.NewRSAKey("rsa-1")
			}
			_, err = v.Verify(context.Background(), key.Sign(f.Claims(tt.claims), oidctest.Type(tt.typ)))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Verify succeeded, want %s", tt.want)
			}
			if got := ReasonOf(err); got != tt.want {
				t.Fatalf("reason = %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// TestTokenTypeMiddleware shows what a client and the auth metric see for
// an ID token: 401 invalid_token saying it is not an access token, and the
// reason wrong_token_type.
func TestTokenTypeMiddleware(t *testing.T) {
	k := oidctest.NewRSAKey("k")
	f := newFakeIssuer(t, k)
	o := testOptions(f)
	v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []Reason
	hook := func(_ context.Context, e Event) { reasons = append(reasons, e.Reason) }
	var logs bytes.Buffer
	h := Middleware(v, o, MetadataURL(o.Resource), Deps{Hook: hook, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("next handler ran for an ID token") }))
	req := httptest.NewRequest("POST", "/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+k.Sign(f.Claims(map[string]any{"nonce": "n"}), oidctest.Type("JWT")))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401", rec.Code)
	}
	if got := rec.Header().Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token", error_description="token is not an access token"`) {
		t.Errorf("WWW-Authenticate %q", got)
	}
	if len(reasons) != 1 || reasons[0] != ReasonWrongTokenType {
		t.Errorf("hook reasons %v, want [wrong_token_type]", reasons)
	}
	if !strings.Contains(logs.String(), `"reason":"wrong_token_type"`) {
		t.Errorf("log does not name the reason: %s", logs.String())
	}
}
