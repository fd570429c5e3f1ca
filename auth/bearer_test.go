package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/internal/bearer"
)

// TestMiddlewareCarriesBearerPerRequest checks that each request's
// TokenInfo carries that request's own raw token for internal/bearer,
// with or without the verified-token cache, and even when one verifier
// hands the same principal out for two tokens.
func TestMiddlewareCarriesBearerPerRequest(t *testing.T) {
	shared := &Principal{Subject: "alice", Issuer: "https://idp", Scopes: []string{"mcp:tools"}, Expiry: time.Now().Add(time.Hour)}
	same := VerifierFunc(func(context.Context, string) (*Principal, error) { return shared, nil })
	fresh := VerifierFunc(func(context.Context, string) (*Principal, error) {
		p := *shared
		return &p, nil
	})
	cached, err := newCachingVerifier(fresh, 16, time.Minute, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]Verifier{"same principal": same, "cached": cached} {
		t.Run(name, func(t *testing.T) {
			var got string
			var ok bool
			h := Middleware(v, Options{Resource: testResource}, testMetadataURL, Deps{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got, ok = bearer.FromTokenInfo(sdkauth.TokenInfoFromContext(r.Context()))
			}))
			for _, tok := range []string{"token-one-1111", "token-two-2222", "token-one-1111"} {
				req := httptest.NewRequest("POST", "/mcp", nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 200 || !ok || got != tok {
					t.Fatalf("status %d; bearer = %q, %v; want %q", rec.Code, got, ok, tok)
				}
			}
		})
	}
}
