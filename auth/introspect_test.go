package auth

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// fakeIntrospection is an RFC 7662 endpoint (and a token endpoint for the
// bearer auth method).
type fakeIntrospection struct {
	srv   *httptest.Server
	calls atomic.Int32
	conns atomic.Int32 // connections accepted
	hang  chan struct{}
	// answers maps a token to the active response the endpoint gives,
	// besides the built-in ones below.
	answers map[string]map[string]any
	// slow, when set, runs before each answer with the token asked about.
	slow func(token string)
}

// activeAnswer is an active introspection response for token "opaque-good"
// at t0, with overrides applied (a nil value deletes the member).
func activeAnswer(over map[string]any) map[string]any {
	return oidctest.Override(map[string]any{"active": true, "sub": "bob", "iss": "https://as.example.com", "client_id": "cli",
		"scope": "mcp:tools", "exp": t0.Add(time.Hour).Unix(), "aud": testResource, "groups": []string{"ops"}}, over)
}

func newFakeIntrospection(t *testing.T) *fakeIntrospection {
	f := &fakeIntrospection{hang: make(chan struct{}), answers: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if id != "portcullis" || secret != "s3cret" || r.FormValue("grant_type") != "client_credentials" {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return
		}
		writeJSON(w, 200, map[string]any{"access_token": "server-own-token", "token_type": "Bearer", "expires_in": 3600})
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		id, secret, basic := r.BasicAuth()
		authOK := (basic && id == "portcullis" && secret == "s3cret") || r.Header.Get("Authorization") == "Bearer server-own-token"
		if !authOK {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return
		}
		if r.FormValue("token_type_hint") != "access_token" {
			writeJSON(w, 400, map[string]string{"error": "invalid_request"})
			return
		}
		if f.slow != nil {
			f.slow(r.FormValue("token"))
		}
		if a, ok := f.answers[r.FormValue("token")]; ok {
			writeJSON(w, 200, a)
			return
		}
		switch r.FormValue("token") {
		case "opaque-good":
			writeJSON(w, 200, activeAnswer(nil))
		case "opaque-short":
			writeJSON(w, 200, map[string]any{"active": true, "sub": "bob", "aud": testResource, "exp": t0.Add(20 * time.Second).Unix()})
		case "opaque-other-aud":
			writeJSON(w, 200, map[string]any{"active": true, "sub": "bob", "exp": t0.Add(time.Hour).Unix(), "aud": "https://other"})
		case "opaque-500":
			http.Error(w, "boom", 500)
		case "opaque-hang":
			select {
			case <-r.Context().Done():
			case <-f.hang:
			}
		default:
			writeJSON(w, 200, map[string]any{"active": false})
		}
	})
	f.srv = httptest.NewUnstartedServer(mux)
	f.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.srv.Start()
	t.Cleanup(func() { close(f.hang); f.srv.Close() })
	return f
}

func introspectionOptions(t *testing.T, f *fakeIntrospection, method string) Options {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Resource: testResource, Introspection: IntrospectionOptions{
		URL: f.srv.URL + "/introspect", ClientID: "portcullis", ClientSecretFile: secret,
		AuthMethod: method, TokenURL: f.srv.URL + "/token", Timeout: 10 * time.Second,
	}}
	o.Defaults()
	return o
}

func TestIntrospection(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		token      string
		answer     map[string]any // the response for token "opaque-answer"
		mutate     func(*Options)
		wantReason Reason
		wantIssuer string // "" = the introspection URL
	}{
		{name: "active, client_secret_basic", method: AuthMethodClientSecretBasic, token: "opaque-good"},
		{name: "active, bearer from client_credentials", method: AuthMethodBearer, token: "opaque-good"},
		{name: "inactive", token: "opaque-revoked", wantReason: ReasonInactive},
		{name: "wrong audience", token: "opaque-other-aud", wantReason: ReasonWrongAudience},
		{name: "endpoint error", token: "opaque-500", wantReason: ReasonIntrospectionFailed},
		{name: "endpoint timeout", token: "opaque-hang", wantReason: ReasonIntrospectionFailed,
			mutate: func(o *Options) { o.Introspection.Timeout = 100 * time.Millisecond }},

		// The audience: a string or an array, one of the accepted values.
		{name: "aud missing", answer: activeAnswer(map[string]any{"aud": nil}), wantReason: ReasonWrongAudience},
		{name: "aud empty string", answer: activeAnswer(map[string]any{"aud": ""}), wantReason: ReasonWrongAudience},
		{name: "aud empty array", answer: activeAnswer(map[string]any{"aud": []string{}}), wantReason: ReasonWrongAudience},
		{name: "aud missing, allowed by the knob", answer: activeAnswer(map[string]any{"aud": nil}),
			mutate: func(o *Options) { o.Introspection.AllowMissingAudience = true }},
		{name: "aud wrong, the knob does not help", answer: activeAnswer(map[string]any{"aud": "https://other/mcp"}),
			mutate: func(o *Options) { o.Introspection.AllowMissingAudience = true }, wantReason: ReasonWrongAudience},
		{name: "aud wrong array", answer: activeAnswer(map[string]any{"aud": []string{"https://other/mcp", "api://other"}}), wantReason: ReasonWrongAudience},
		{name: "aud array naming the resource", answer: activeAnswer(map[string]any{"aud": []string{"https://other/mcp", testResource}})},
		{name: "aud an issuer's extra audience", answer: activeAnswer(map[string]any{"aud": "api://portcullis-app-id"}),
			mutate: func(o *Options) {
				o.Issuers = []IssuerOptions{{Issuer: "https://idp.example.com", Audiences: []string{"api://portcullis-app-id"}}}
				o.Defaults()
			}},
		{name: "aud introspection's extra audience", answer: activeAnswer(map[string]any{"aud": []string{"portcullis-api"}}),
			mutate: func(o *Options) { o.Introspection.Audiences = []string{"portcullis-api"} }},
		{name: "aud a prefix of the resource", answer: activeAnswer(map[string]any{"aud": "https://mcp.example.com"}), wantReason: ReasonWrongAudience},

		// The subject: required, so two callers never share one identity.
		{name: "sub missing", answer: activeAnswer(map[string]any{"sub": nil}), wantReason: ReasonInvalid},
		{name: "sub empty", answer: activeAnswer(map[string]any{"sub": ""}), wantReason: ReasonInvalid},
		{name: "sub missing, client_id is no substitute", answer: activeAnswer(map[string]any{"sub": nil, "client_id": "cli"}),
			mutate: func(o *Options) { o.Introspection.AllowMissingAudience = true }, wantReason: ReasonInvalid},

		// Times and issuer, as for JWTs.
		{name: "exp past", answer: activeAnswer(map[string]any{"exp": t0.Add(-time.Minute).Unix()}), wantReason: ReasonExpired},
		{name: "nbf future", answer: activeAnswer(map[string]any{"nbf": t0.Add(time.Minute).Unix()}), wantReason: ReasonNotYetValid},
		{name: "iat future", answer: activeAnswer(map[string]any{"iat": t0.Add(time.Minute).Unix()}), wantReason: ReasonNotYetValid},
		{name: "iss is the configured issuer", answer: activeAnswer(nil),
			mutate: func(o *Options) { o.Introspection.Issuer = "https://as.example.com" }, wantIssuer: "https://as.example.com"},
		{name: "iss absent, configured issuer", answer: activeAnswer(map[string]any{"iss": nil}),
			mutate: func(o *Options) { o.Introspection.Issuer = "https://as.example.com" }, wantIssuer: "https://as.example.com"},
		{name: "iss other than the configured issuer", answer: activeAnswer(map[string]any{"iss": "https://idp.example.com"}),
			mutate: func(o *Options) { o.Introspection.Issuer = "https://as.example.com" }, wantReason: ReasonWrongIssuer},
		{name: "iss naming a JWT issuer does not take on its identities",
			answer: activeAnswer(map[string]any{"iss": "https://idp.example.com"}),
			mutate: func(o *Options) {
				o.Issuers = []IssuerOptions{{Issuer: "https://idp.example.com"}}
				o.Defaults()
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeIntrospection(t)
			o := introspectionOptions(t, f, tt.method)
			if tt.mutate != nil {
				tt.mutate(&o)
			}
			token := tt.token
			if tt.answer != nil {
				token = "opaque-answer"
				f.answers[token] = tt.answer
			}
			v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			p, err := v.Verify(context.Background(), token)
			if tt.wantReason != "" {
				if err == nil || ReasonOf(err) != tt.wantReason {
					t.Fatalf("err = %v, want %s", err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != "bob" || p.ClientID != "cli" || !slices.Equal(p.Scopes, []string{"mcp:tools"}) || !slices.Equal(p.Roles, []string{"ops"}) {
				t.Errorf("principal = %+v", p)
			}
			wantIssuer := tt.wantIssuer
			if wantIssuer == "" {
				wantIssuer = o.Introspection.URL
			}
			if p.Issuer != wantIssuer {
				t.Errorf("principal issuer = %q, want %q", p.Issuer, wantIssuer)
			}
		})
	}
}

func TestIntrospectionDown(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	f.srv.Close()
	v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), "opaque-good"); ReasonOf(err) != ReasonIntrospectionFailed {
		t.Fatalf("err = %v, want introspection_failed", err)
	}
}

func TestIntrospectionCache(t *testing.T) {
	f := newFakeIntrospection(t)
	clk := newClock()
	v, err := NewVerifier(context.Background(), introspectionOptions(t, f, ""), Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := v.Verify(ctx, "opaque-short"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("introspection calls = %d, want 1 (cached)", got)
	}
	clk.Advance(21 * time.Second) // past exp: the cache entry is gone
	_, _ = v.Verify(ctx, "opaque-short")
	if got := f.calls.Load(); got != 2 {
		t.Errorf("introspection calls after exp = %d, want 2", got)
	}
	// What the endpoint refused is remembered (see
	// TestIntrospectionNegativeCache); a failed call is not.
	_, _ = v.Verify(ctx, "opaque-revoked")
	_, _ = v.Verify(ctx, "opaque-revoked")
	if got := f.calls.Load(); got != 3 {
		t.Errorf("introspection calls = %d, want 3", got)
	}
	_, _ = v.Verify(ctx, "opaque-500")
	_, _ = v.Verify(ctx, "opaque-500")
	if got := f.calls.Load(); got != 5 {
		t.Errorf("introspection calls = %d, want 5 (failed calls are not remembered)", got)
	}
}

// TestIntrospectionReusesConnections: introspection calls made sixteen at
// a time go out on kept-alive connections to the authorization server,
// not on a new connection (a TLS handshake, in production) for most calls,
// as with Go's default of two idle connections per host.
func TestIntrospectionReusesConnections(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	o.Introspection.Timeout = 10 * time.Second
	// Every call goes out: the bound on calls is not what this measures.
	o.Introspection.MaxCallsPerSecond, o.Introspection.MaxCallsBurst = 1e6, 1e6
	v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	const conc, each = 16, 50
	var wg sync.WaitGroup
	for w := range conc {
		wg.Go(func() {
			for i := range each {
				// Every token is new: every one is introspected.
				if _, err := v.Verify(context.Background(), fmt.Sprintf("opaque-revoked-%d-%d", w, i)); err == nil {
					t.Errorf("an inactive token was accepted")
				}
			}
		})
	}
	wg.Wait()
	if got := f.calls.Load(); got != conc*each {
		t.Fatalf("introspection calls = %d, want %d", got, conc*each)
	}
	// A pool that keeps its connections dials only when none is idle: the
	// connections open at once are at most the calls in flight plus the
	// idle ones it keeps, whatever the timing. A pool that closes them (Go's
	// default of two idle per host) dials again every few calls, hundreds
	// of times over this many.
	if n, most := f.conns.Load(), int32(conc+outbound.IdleConnsPerHost); n > most {
		t.Errorf("%d introspections, %d at a time, opened %d connections, want at most %d (the calls in flight and the idle connections kept)", conc*each, conc, n, most)
	}
}

func TestIntrospectionSecretFile(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	o.Introspection.ClientSecretFile = filepath.Join(t.TempDir(), "missing")
	if _, err := NewVerifier(context.Background(), o, Deps{}); err == nil {
		t.Error("missing secret file: want error")
	}
	o.Introspection.ClientSecretFile = "/dev/zero"
	if _, err := NewVerifier(context.Background(), o, Deps{}); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("endless secret file: error %v, want one saying it is too large", err)
	}
}

// randomToken is an opaque token no one issued, as an attacker makes them.
func randomToken(t *testing.T) string {
	t.Helper()
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestIntrospectionNegativeCache sends the same made-up opaque token again
// and again: the endpoint is asked once, and the token is refused from the
// negative cache until its TTL (default or configured) ends. What the
// endpoint's answer refused is remembered, whatever the reason, but a
// token not yet valid is asked about again.
func TestIntrospectionNegativeCache(t *testing.T) {
	tests := []struct {
		name       string
		ttl        time.Duration // auth.introspection.negative_cache_ttl; 0 keeps the default
		answer     map[string]any
		wantReason Reason
		wantTTL    time.Duration
		remembered bool
	}{
		{name: "inactive, default TTL", wantReason: ReasonInactive, wantTTL: DefaultNegativeCacheTTL, remembered: true},
		{name: "inactive, TTL 5s", ttl: 5 * time.Second, wantReason: ReasonInactive, wantTTL: 5 * time.Second, remembered: true},
		{name: "active for another audience", answer: activeAnswer(map[string]any{"aud": "https://other/mcp"}), wantReason: ReasonWrongAudience, wantTTL: DefaultNegativeCacheTTL, remembered: true},
		{name: "active, expired", answer: activeAnswer(map[string]any{"exp": t0.Add(-time.Hour).Unix()}), wantReason: ReasonExpired, wantTTL: DefaultNegativeCacheTTL, remembered: true},
		{name: "active, not yet valid", answer: activeAnswer(map[string]any{"nbf": t0.Add(time.Hour).Unix()}), wantReason: ReasonNotYetValid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeIntrospection(t)
			o := introspectionOptions(t, f, "")
			o.Introspection.NegativeCacheTTL = tt.ttl
			o.Defaults()
			clk := newClock()
			v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			token := randomToken(t)
			if tt.answer != nil {
				f.answers[token] = tt.answer
			}
			const n = 20
			for i := range n {
				if _, err := v.Verify(context.Background(), token); ReasonOf(err) != tt.wantReason {
					t.Fatalf("try %d: err = %v, want %s", i, err, tt.wantReason)
				}
			}
			want := int32(n)
			if tt.remembered {
				want = 1
			}
			if got := f.calls.Load(); got != want {
				t.Fatalf("%d tries of one token: %d introspection calls, want %d", n, got, want)
			}
			if !tt.remembered {
				return
			}
			clk.Advance(tt.wantTTL - time.Second)
			if _, err := v.Verify(context.Background(), token); ReasonOf(err) != tt.wantReason || f.calls.Load() != 1 {
				t.Fatalf("within the TTL: err = %v, calls %d; want %s from the cache, 1 call", err, f.calls.Load(), tt.wantReason)
			}
			clk.Advance(time.Second)
			if _, err := v.Verify(context.Background(), token); ReasonOf(err) != tt.wantReason || f.calls.Load() != 2 {
				t.Fatalf("after the TTL: err = %v, calls %d; want %s and a new call", err, f.calls.Load(), tt.wantReason)
			}
		})
	}
}

// TestIntrospectionThrottle sends more distinct made-up opaque tokens than
// the bound on introspection calls allows: the endpoint gets the burst's
// worth of calls, the rest are refused as throttled (never accepted), a
// token verified before the flood keeps working from the cache, and once
// the bucket refills new tokens are introspected again.
func TestIntrospectionThrottle(t *testing.T) {
	tests := []struct {
		name            string
		perSecond       float64
		burst           int
		wantBurst       int
		wantRefillAfter time.Duration // one more call allowed after this
	}{
		{name: "defaults", wantBurst: DefaultIntrospectionBurst, wantRefillAfter: time.Second / DefaultIntrospectionRate},
		{name: "10/s, burst 20", perSecond: 10, burst: 20, wantBurst: 20, wantRefillAfter: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeIntrospection(t)
			o := introspectionOptions(t, f, "")
			o.Introspection.MaxCallsPerSecond, o.Introspection.MaxCallsBurst = tt.perSecond, tt.burst
			o.Defaults()
			clk := newClock()
			v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, err := v.Verify(ctx, "opaque-good"); err != nil {
				t.Fatal(err)
			}
			// That call took one of the burst.
			flood := 3 * tt.wantBurst
			var inactive, throttled int
			for range flood {
				_, err := v.Verify(ctx, randomToken(t))
				switch ReasonOf(err) {
				case ReasonInactive:
					inactive++
				case ReasonIntrospectionThrottled:
					throttled++
				default:
					t.Fatalf("a made-up token: err = %v, want inactive or introspection_throttled", err)
				}
			}
			if got := int(f.calls.Load()); got != tt.wantBurst || inactive != tt.wantBurst-1 || throttled != flood-(tt.wantBurst-1) {
				t.Fatalf("%d made-up tokens: %d calls in all, %d inactive, %d throttled; want %d calls, %d inactive, the rest throttled",
					flood, got, inactive, throttled, tt.wantBurst, tt.wantBurst-1)
			}
			// Verified before: answered from the cache, no call.
			if p, err := v.Verify(ctx, "opaque-good"); err != nil || p.Subject != "bob" {
				t.Fatalf("a verified token during the flood: %v, %v", p, err)
			}
			// New and valid: refused too, fail closed, until the bucket refills.
			f.answers["opaque-new"] = activeAnswer(nil)
			if _, err := v.Verify(ctx, "opaque-new"); ReasonOf(err) != ReasonIntrospectionThrottled || !errors.Is(err, ErrIntrospectionThrottled) {
				t.Fatalf("a new token during the flood: err = %v, want introspection_throttled", err)
			}
			clk.Advance(tt.wantRefillAfter)
			if p, err := v.Verify(ctx, "opaque-new"); err != nil || p.Subject != "bob" {
				t.Fatalf("a new token after %v: %v, %v; want it introspected and accepted", tt.wantRefillAfter, p, err)
			}
			if got := int(f.calls.Load()); got != tt.wantBurst+1 {
				t.Errorf("calls = %d, want %d", got, tt.wantBurst+1)
			}
		})
	}
}

// TestMiddlewareIntrospectionFlood runs the middleware on the introspection
// verifier, as /mcp does, against an endpoint that counts its calls: one
// made-up token sent again and again costs one call and gets 401 each time;
// distinct made-up tokens past the bound get 503 with Retry-After, counted
// with reason introspection_throttled, and the endpoint sees no more than
// the bound's calls; a valid token keeps working throughout.
func TestMiddlewareIntrospectionFlood(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	o.Introspection.MaxCallsPerSecond, o.Introspection.MaxCallsBurst = 5, 10
	o.Defaults()
	v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	reasons := map[Reason]int{}
	hook := func(_ context.Context, e Event) { mu.Lock(); reasons[e.Reason]++; mu.Unlock() }
	h := Middleware(v, o, testMetadataURL, Deps{Hook: hook})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	send := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", "/mcp", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := send("opaque-good"); rec.Code != http.StatusOK {
		t.Fatalf("valid token: status %d, want 200", rec.Code)
	}

	same := randomToken(t)
	for i := range 50 {
		if rec := send(same); rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Fatalf("made-up token, try %d: status %d, WWW-Authenticate %q; want 401 invalid_token", i, rec.Code, rec.Header().Get("WWW-Authenticate"))
		}
	}
	if got := f.calls.Load(); got != 2 {
		t.Fatalf("one made-up token sent 50 times: %d calls in all, want 2 (the valid token's and one)", got)
	}

	const distinct = 100
	var unauthorized, unavailable int
	for range distinct {
		rec := send(randomToken(t))
		switch rec.Code {
		case http.StatusUnauthorized:
			unauthorized++
		case http.StatusServiceUnavailable:
			unavailable++
			if rec.Header().Get("Retry-After") == "" {
				t.Fatal("503 without Retry-After")
			}
		default:
			t.Fatalf("made-up token: status %d, want 401 or 503", rec.Code)
		}
	}
	// Two of the burst of 10 went to the valid token and the repeated one.
	if calls := f.calls.Load(); calls > 10 || unauthorized != 8 || unavailable != distinct-8 {
		t.Fatalf("%d distinct made-up tokens: %d calls in all, %d got 401, %d got 503; want at most 10 calls, 8 401s, the rest 503",
			distinct, calls, unauthorized, unavailable)
	}
	if rec := send("opaque-good"); rec.Code != http.StatusOK {
		t.Fatalf("valid token after the flood: status %d, want 200", rec.Code)
	}
	mu.Lock()
	defer mu.Unlock()
	if reasons[ReasonIntrospectionThrottled] != unavailable || reasons[ReasonInactive] != 50+unauthorized || reasons[""] != 2 {
		t.Errorf("hook reasons %v, want %d introspection_throttled, %d inactive, 2 allowed", reasons, unavailable, 50+unauthorized)
	}
}

// TestIntrospectionCoalesces sends one new token on many requests at once,
// as a client that starts several calls with a fresh token does, or an
// attacker repeating one made-up token: the endpoint is asked once, every
// request gets its answer, and the bound on calls is charged once.
func TestIntrospectionCoalesces(t *testing.T) {
	for _, tt := range []struct {
		name       string
		answer     map[string]any
		wantReason Reason
	}{
		{name: "active", answer: activeAnswer(nil)},
		{name: "made-up", answer: map[string]any{"active": false}, wantReason: ReasonInactive},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeIntrospection(t)
			o := introspectionOptions(t, f, "")
			o.Introspection.Timeout = 10 * time.Second
			o.Introspection.MaxCallsBurst = 2
			token := randomToken(t)
			release := make(chan struct{})
			f.slow = func(tok string) {
				if tok == token {
					<-release
				}
			}
			f.answers[token] = tt.answer
			v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			const n = 20
			var wg sync.WaitGroup
			errs := make(chan error, n)
			principals := make(chan *Principal, n)
			for range n {
				wg.Go(func() {
					p, err := v.Verify(context.Background(), token)
					errs <- err
					principals <- p
				})
			}
			// Let the requests pile up on the first call, then answer it.
			for f.calls.Load() == 0 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(50 * time.Millisecond)
			close(release)
			wg.Wait()
			close(errs)
			close(principals)
			for err := range errs {
				if ReasonOf(err) != tt.wantReason && (err != nil || tt.wantReason != "") {
					t.Errorf("err = %v, want %q", err, tt.wantReason)
				}
			}
			seen := map[*Principal]bool{}
			for p := range principals {
				if p != nil {
					seen[p] = true
				}
			}
			if tt.wantReason == "" && len(seen) != n {
				t.Errorf("%d requests got %d distinct principals, want one each (each is the caller's own)", n, len(seen))
			}
			if got := f.calls.Load(); got != 1 {
				t.Fatalf("%d requests with one token at once: %d introspection calls, want 1", n, got)
			}
			// The burst of 2 was charged once: one more new token passes.
			if _, err := v.Verify(context.Background(), randomToken(t)); ReasonOf(err) != ReasonInactive {
				t.Errorf("next new token: err = %v, want inactive (not throttled)", err)
			}
		})
	}
}
