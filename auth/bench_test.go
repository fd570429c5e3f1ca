package auth

import (
	"context"
	"net/http"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// benchVerifier returns the production verifier (keys fetched by discovery
// from an httptest issuer, go-oidc, the verified-token cache) and a token
// signed with k, already verified once so its keys are loaded.
func benchVerifier(b *testing.B, k *oidctest.Key) (Verifier, string) {
	b.Helper()
	f := newFakeIssuer(b, k)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), Deps{Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	tok := k.Sign(f.Claims(nil))
	if _, err := v.Verify(context.Background(), tok); err != nil {
		b.Fatal(err)
	}
	return v, tok
}

// BenchmarkVerifyCold measures a full verification (signature, claims,
// principal) with keys loaded but no cache: what a token's first request
// costs.
func BenchmarkVerifyCold(b *testing.B) {
	for _, tt := range []struct {
		name string
		key  func(string) *oidctest.Key
	}{
		{name: "RS256", key: oidctest.NewRSAKey},
		{name: "ES256", key: oidctest.NewECKey},
	} {
		b.Run(tt.name, func(b *testing.B) {
			v, tok := benchVerifier(b, tt.key("k1"))
			uncached := v.(*cachingVerifier).next
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := uncached.Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing, so the benchmark
// measures the middleware, not a recorder.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkMiddleware measures the bearer middleware on an allowed request
// with a cached token, up to the handler it guards.
func BenchmarkMiddleware(b *testing.B) {
	k := oidctest.NewECKey("k1")
	f := newFakeIssuer(b, k)
	o := testOptions(f)
	o.RequiredScopes = []string{"mcp:tools"}
	clk := newClock()
	v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
	if err != nil {
		b.Fatal(err)
	}
	tok := k.Sign(f.Claims(nil))
	var seen bool
	h := Middleware(v, o, "https://mcp.example.com/.well-known/oauth-protected-resource/mcp", Deps{})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, seen = PrincipalFrom(r.Context())
		}))
	req, err := http.NewRequest(http.MethodPost, "https://mcp.example.com/mcp", http.NoBody)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	// The other headers of a 2026-07-28 tools/call, which the middleware
	// hands on.
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Content-Length": "300", "User-Agent": "Go-http-client/1.1", "Accept-Encoding": "gzip",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"} {
		req.Header.Set(k, v)
	}
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, req)
	if !seen {
		b.Fatal("the middleware did not let a valid token through")
	}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// BenchmarkPolicyDecide measures the per-tool policy check on an allowed
// call, as the MCP layer makes it for every tools/call.
func BenchmarkPolicyDecide(b *testing.B) {
	o := Options{Policy: []ToolPolicy{
		{Tool: "echo", Scopes: []string{"mcp:echo"}},
		{Tool: "admin", Roles: []string{"admin"}},
	}, RequiredScopes: []string{"mcp:tools"}}
	pol := NewPolicy(o)
	p := &Principal{Subject: "alice", Issuer: "https://idp.example.com", Scopes: []string{"mcp:tools", "mcp:echo"}}
	info := &sdkauth.TokenInfo{Scopes: p.Scopes, UserID: p.UserID(), Extra: map[string]any{tokenInfoPrincipalKey: p}}
	b.ReportAllocs()
	for b.Loop() {
		if ok, _, _ := pol.Decide(info, "echo"); !ok {
			b.Fatal("denied")
		}
	}
}
