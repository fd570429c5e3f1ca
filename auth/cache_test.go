package auth

import (
	"context"
	"crypto"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// countingKeySet counts signature verifications.
type countingKeySet struct {
	oidc.KeySet
	n atomic.Int32
}

func (c *countingKeySet) VerifySignature(ctx context.Context, jwt string) ([]byte, error) {
	c.n.Add(1)
	return c.KeySet.VerifySignature(ctx, jwt)
}

func TestCache(t *testing.T) {
	k := oidctest.NewECKey("k")
	const iss = "https://idp.example.com"
	claims := func(exp time.Time) map[string]any {
		return map[string]any{"iss": iss, "sub": "alice", "aud": testResource, "exp": exp.Unix()}
	}
	tests := []struct {
		name      string
		exp       time.Time
		cacheTTL  time.Duration
		steps     []time.Duration // clock advance before each Verify
		wantCalls int32           // key-set verifications in total
		wantLast  Reason          // reason of the last Verify ("" = ok)
	}{
		{name: "hit reuses the verification", exp: t0.Add(time.Hour), steps: []time.Duration{0, 0, time.Minute}, wantCalls: 1},
		{name: "entry expires after cache_ttl", exp: t0.Add(time.Hour), cacheTTL: time.Minute, steps: []time.Duration{0, 61 * time.Second}, wantCalls: 2},
		{
			name: "entry never outlives exp", exp: t0.Add(10 * time.Second),
			steps: []time.Duration{0, 5 * time.Second, time.Minute}, wantCalls: 2, wantLast: ReasonExpired,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ks := &countingKeySet{KeySet: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{k.Public()}}}
			o := Options{Resource: testResource, CacheTTL: tt.cacheTTL,
				Issuers: []IssuerOptions{{Issuer: iss, KeySet: ks}}}
			o.Defaults()
			clk := newClock()
			v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			tok := k.Sign(claims(tt.exp))
			var last error
			for _, d := range tt.steps {
				clk.Advance(d)
				_, last = v.Verify(context.Background(), tok)
			}
			if got := ks.n.Load(); got != tt.wantCalls {
				t.Errorf("key-set calls = %d, want %d", got, tt.wantCalls)
			}
			if tt.wantLast == "" && last != nil {
				t.Errorf("last Verify: %v", last)
			}
			if tt.wantLast != "" && ReasonOf(last) != tt.wantLast {
				t.Errorf("last Verify: err = %v, want %s", last, tt.wantLast)
			}
		})
	}
}

func TestCacheDoesNotCacheFailures(t *testing.T) {
	calls := 0
	c, err := newCachingVerifier(VerifierFunc(func(ctx context.Context, tok string) (*Principal, error) {
		calls++
		return nil, ErrInvalid
	}), 10, time.Minute, newClock().Now)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, _ = c.Verify(context.Background(), "tok")
	}
	if calls != 3 {
		t.Errorf("calls = %d, want 3", calls)
	}
}

func TestCacheBounded(t *testing.T) {
	c, err := newCachingVerifier(VerifierFunc(func(ctx context.Context, tok string) (*Principal, error) {
		return &Principal{Subject: tok, Expiry: t0.Add(time.Hour)}, nil
	}), 2, time.Minute, newClock().Now)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"a", "b", "c", "d"} {
		_, _ = c.Verify(context.Background(), tok)
	}
	if n := c.cache.Len(); n != 2 {
		t.Errorf("cache len = %d, want 2", n)
	}
}

func BenchmarkCacheHit(b *testing.B) {
	k := oidctest.NewECKey("k")
	const iss = "https://idp.example.com"
	o := Options{Resource: testResource, Issuers: []IssuerOptions{{Issuer: iss, KeySet: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{k.Public()}}}}}
	o.Defaults()
	v, err := NewVerifier(context.Background(), o, Deps{Now: func() time.Time { return t0 }})
	if err != nil {
		b.Fatal(err)
	}
	tok := k.Sign(map[string]any{"iss": iss, "sub": "alice", "aud": testResource, "exp": t0.Add(time.Hour).Unix()})
	ctx := context.Background()
	if _, err := v.Verify(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

// A cached principal carries one TokenInfo, made when it was cached, that
// the middleware hands the SDK on every request with that token.
func TestCachedPrincipalSharesTokenInfo(t *testing.T) {
	k := oidctest.NewECKey("k")
	f := newFakeIssuer(t, k)
	o := testOptions(f)
	v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	var infos []*sdkauth.TokenInfo
	var want string // the subject of the request being served
	h := Middleware(v, o, "", Deps{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ti := sdkauth.TokenInfoFromContext(r.Context())
		p, ok := PrincipalFromTokenInfo(ti)
		if !ok || p.Subject != want || ti.UserID != f.URL()+"|"+want || !slices.Equal(ti.Scopes, []string{"mcp:tools", "read"}) {
			t.Errorf("TokenInfo %+v does not describe %s's token", ti, want)
		}
		infos = append(infos, ti)
	}))
	tokens := map[string]string{"alice": k.Sign(f.Claims(nil)), "bob": k.Sign(f.Claims(map[string]any{"sub": "bob"}))}
	for _, want = range []string{"alice", "alice", "bob"} {
		tok := tokens[want]
		req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	if len(infos) != 3 {
		t.Fatalf("handler ran %d times, want 3", len(infos))
	}
	if infos[0] != infos[1] {
		t.Error("two requests with one cached token got different TokenInfos")
	}
	if infos[2] == infos[0] {
		t.Error("another token got the first token's TokenInfo")
	}
}
