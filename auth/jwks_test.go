package auth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

func TestKeyRotation(t *testing.T) {
	old := newRSAKey(t, "old")
	f := newFakeIssuer(t, old)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, old.sign(t, f.claims(nil))); err != nil {
		t.Fatalf("old key: %v", err)
	}
	if got := f.jwksFetches.Load(); got != 1 {
		t.Fatalf("JWKS fetches = %d, want 1", got)
	}

	rotated := newECKey(t, "new")
	f.publish(rotated)
	tok := rotated.sign(t, f.claims(nil))
	// Right after the first fetch the refresh budget is spent.
	if _, err := v.Verify(ctx, tok); ReasonOf(err) != ReasonUnknownKey {
		t.Fatalf("new key before the refresh interval: err = %v, want unknown_key", err)
	}
	clk.Advance(DefaultJWKSRefreshInterval)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("new key after one refresh: %v", err)
	}
	if got := f.jwksFetches.Load(); got != 2 {
		t.Errorf("JWKS fetches = %d, want 2", got)
	}
	// The old key keeps working too.
	if _, err := v.Verify(ctx, old.sign(t, f.claims(map[string]any{"sub": "bob"}))); err != nil {
		t.Errorf("old key after rotation: %v", err)
	}
}

func TestRefreshRateLimit(t *testing.T) {
	good := newRSAKey(t, "good")
	f := newFakeIssuer(t, good)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A flood of made-up kids, concurrently.
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := newECKey(t, fmt.Sprintf("made-up-%d", i))
			if _, err := v.Verify(ctx, k.sign(t, f.claims(nil))); ReasonOf(err) != ReasonUnknownKey {
				t.Errorf("made-up kid %d: err = %v, want unknown_key", i, err)
			}
		}()
	}
	wg.Wait()
	if got := f.jwksFetches.Load(); got != 1 {
		t.Errorf("JWKS fetches after the flood = %d, want 1", got)
	}
	// Known keys still work during the flood window.
	if _, err := v.Verify(ctx, good.sign(t, f.claims(nil))); err != nil {
		t.Errorf("good token: %v", err)
	}
	// One more fetch per interval.
	clk.Advance(DefaultJWKSRefreshInterval)
	for i := range 50 {
		k := newECKey(t, fmt.Sprintf("again-%d", i))
		_, _ = v.Verify(ctx, k.sign(t, f.claims(nil)))
	}
	if got := f.jwksFetches.Load(); got != 2 {
		t.Errorf("JWKS fetches after one interval = %d, want 2", got)
	}
}

func TestIdPDownKeepsKnownKeys(t *testing.T) {
	k := newRSAKey(t, "k")
	f := newFakeIssuer(t, k)
	clk := newClock()
	o := testOptions(f)
	o.CacheSize = 1
	v, err := NewVerifier(context.Background(), o, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v.(Readier).Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	f.down.Store(true)
	clk.Advance(time.Minute)
	for i := range 3 {
		tok := k.sign(t, f.claims(map[string]any{"sub": fmt.Sprint("user", i)}))
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("known key with the IdP down: %v", err)
		}
	}
	unknown := newRSAKey(t, "unknown").sign(t, f.claims(nil))
	if _, err := v.Verify(ctx, unknown); ReasonOf(err) != ReasonUnknownKey {
		t.Errorf("unknown key with the IdP down: err = %v, want unknown_key", err)
	}
	if err := v.(Readier).Ready(ctx); err != nil {
		t.Errorf("Ready with keys loaded and the IdP down: %v", err)
	}
}

func TestReady(t *testing.T) {
	k := newRSAKey(t, "k")
	f := newFakeIssuer(t, k)
	f.down.Store(true)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	r := v.(Readier)
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("Ready with the IdP down and no keys: want error")
	}
	f.down.Store(false)
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("Ready again within the refresh interval: want error (rate limited)")
	}
	clk.Advance(DefaultJWKSRefreshInterval)
	if err := r.Ready(context.Background()); err != nil {
		t.Fatalf("Ready after the IdP came back: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	k := newECKey(t, "k")
	var srv *httptest.Server
	mux := http.NewServeMux()
	// Only RFC 8414 metadata, path-inserted, for an issuer with a path.
	mux.HandleFunc("/.well-known/oauth-authorization-server/tenant", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, map[string]any{
			"issuer":                   srv.URL + "/tenant",
			"jwks_uri":                 srv.URL + "/keys",
			"authorization_endpoint":   srv.URL + "/authorize",
			"token_endpoint":           srv.URL + "/token",
			"response_types_supported": []string{"code"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.jwk()}})
	})
	mux.HandleFunc("/direct-keys", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, 200, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{k.jwk()}})
	})
	srv = httptest.NewServer(mux)
	defer srv.Close()

	tests := []struct {
		name    string
		jwksURL string
	}{
		{name: "RFC 8414 discovery"},
		{name: "explicit jwks_url", jwksURL: srv.URL + "/direct-keys"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{Resource: testResource, Issuers: []IssuerOptions{{Issuer: srv.URL + "/tenant", JWKSURL: tt.jwksURL}}}
			o.Defaults()
			v, err := NewVerifier(context.Background(), o, nil, newClock().Now)
			if err != nil {
				t.Fatal(err)
			}
			tok := k.sign(t, map[string]any{"iss": srv.URL + "/tenant", "sub": "s", "aud": testResource, "exp": t0.Add(time.Hour).Unix()})
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestStaleKeysAreRefreshed: keys older than jwks_max_age are fetched again
// in the background, so a key the IdP removed stops verifying; while the
// IdP is down the keys held keep verifying.
func TestStaleKeysAreRefreshed(t *testing.T) {
	a, b := newRSAKey(t, "a"), newRSAKey(t, "b")
	f := newFakeIssuer(t, a)
	clk := newClock()
	opts := testOptions(f)
	opts.JWKSMaxAge = time.Hour
	v, err := NewVerifier(context.Background(), opts, nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	n := 0
	verify := func(k testKey) error { // a fresh token each time: none is cached
		n++
		now := clk.Now()
		_, err := v.Verify(ctx, k.sign(t, f.claims(map[string]any{"sub": fmt.Sprint("user-", n),
			"iat": now.Add(-time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()})))
		return err
	}
	waitFetches := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for f.jwksFetches.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("JWKS fetches = %d, want %d", f.jwksFetches.Load(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if err := verify(a); err != nil {
		t.Fatal(err)
	}
	// The IdP replaces key a with b. Within max age, a still verifies and
	// nothing is fetched.
	f.mu.Lock()
	f.keys = []testKey{b}
	f.mu.Unlock()
	clk.Advance(59 * time.Minute)
	if err := verify(a); err != nil {
		t.Fatalf("key a within max age: %v", err)
	}
	if got := f.jwksFetches.Load(); got != 1 {
		t.Fatalf("JWKS fetches within max age = %d, want 1", got)
	}

	// Past max age with the IdP down: a keeps verifying (the refresh fails
	// in the background and the keys are kept).
	f.down.Store(true)
	clk.Advance(2 * time.Minute)
	if err := verify(a); err != nil {
		t.Fatalf("key a, stale, IdP down: %v", err)
	}
	waitFetches(2)
	// Wait for the failed refresh to finish before the next one.
	deadline := time.Now().Add(5 * time.Second)
	for ks := v.(*cachingVerifier).next.(*multiVerifier).keySets[0]; ; {
		ks.mu.Lock()
		busy := ks.stale
		ks.mu.Unlock()
		if !busy {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background refresh did not finish")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := verify(a); err != nil {
		t.Fatalf("key a after a failed refresh: %v", err)
	}
	time.Sleep(20 * time.Millisecond) // a refresh it might start is rate limited
	if got := f.jwksFetches.Load(); got != 2 {
		t.Errorf("JWKS fetches while the IdP is down = %d, want 2 (rate limited)", got)
	}

	// The IdP is back: the next request triggers a refresh, after which a
	// is unknown and b verifies.
	f.down.Store(false)
	clk.Advance(DefaultJWKSRefreshInterval)
	_ = verify(a) // served from the stale keys while the refresh runs
	waitFetches(3)
	deadline = time.Now().Add(5 * time.Second)
	for {
		err := verify(a)
		if ReasonOf(err) == ReasonUnknownKey {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("removed key a still verifies after the refresh: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := verify(b); err != nil {
		t.Errorf("key b after the refresh: %v", err)
	}
}
