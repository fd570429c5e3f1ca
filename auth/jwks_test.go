package auth

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

func TestKeyRotation(t *testing.T) {
	old := oidctest.NewRSAKey("old")
	f := newFakeIssuer(t, old)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := v.Verify(ctx, old.Sign(f.Claims(nil))); err != nil {
		t.Fatalf("old key: %v", err)
	}
	if got := f.JWKSFetches(); got != 1 {
		t.Fatalf("JWKS fetches = %d, want 1", got)
	}

	rotated := oidctest.NewECKey("new")
	f.Publish(rotated)
	tok := rotated.Sign(f.Claims(nil))
	// Right after the first fetch the refresh budget is spent.
	if _, err := v.Verify(ctx, tok); ReasonOf(err) != ReasonUnknownKey {
		t.Fatalf("new key before the refresh interval: err = %v, want unknown_key", err)
	}
	clk.Advance(DefaultJWKSRefreshInterval)
	if _, err := v.Verify(ctx, tok); err != nil {
		t.Fatalf("new key after one refresh: %v", err)
	}
	if got := f.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches = %d, want 2", got)
	}
	// The old key keeps working too.
	if _, err := v.Verify(ctx, old.Sign(f.Claims(map[string]any{"sub": "bob"}))); err != nil {
		t.Errorf("old key after rotation: %v", err)
	}
}

func TestRefreshRateLimit(t *testing.T) {
	good := oidctest.NewRSAKey("good")
	f := newFakeIssuer(t, good)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), Deps{Now: clk.Now})
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
			k := oidctest.NewECKey(fmt.Sprintf("made-up-%d", i))
			if _, err := v.Verify(ctx, k.Sign(f.Claims(nil))); ReasonOf(err) != ReasonUnknownKey {
				t.Errorf("made-up kid %d: err = %v, want unknown_key", i, err)
			}
		}()
	}
	wg.Wait()
	if got := f.JWKSFetches(); got != 1 {
		t.Errorf("JWKS fetches after the flood = %d, want 1", got)
	}
	// Known keys still work during the flood window.
	if _, err := v.Verify(ctx, good.Sign(f.Claims(nil))); err != nil {
		t.Errorf("good token: %v", err)
	}
	// One more fetch per interval.
	clk.Advance(DefaultJWKSRefreshInterval)
	for i := range 50 {
		k := oidctest.NewECKey(fmt.Sprintf("again-%d", i))
		_, _ = v.Verify(ctx, k.Sign(f.Claims(nil)))
	}
	if got := f.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches after one interval = %d, want 2", got)
	}
}

func TestIdPDownKeepsKnownKeys(t *testing.T) {
	k := oidctest.NewRSAKey("k")
	f := newFakeIssuer(t, k)
	clk := newClock()
	o := testOptions(f)
	o.CacheSize = 1
	v, err := NewVerifier(context.Background(), o, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := v.(Readier).Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	f.SetFailure(oidctest.BadGateway)
	clk.Advance(time.Minute)
	for i := range 3 {
		tok := k.Sign(f.Claims(map[string]any{"sub": fmt.Sprint("user", i)}))
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatalf("known key with the IdP down: %v", err)
		}
	}
	unknown := oidctest.NewRSAKey("unknown").Sign(f.Claims(nil))
	if _, err := v.Verify(ctx, unknown); ReasonOf(err) != ReasonUnknownKey {
		t.Errorf("unknown key with the IdP down: err = %v, want unknown_key", err)
	}
	if err := v.(Readier).Ready(ctx); err != nil {
		t.Errorf("Ready with keys loaded and the IdP down: %v", err)
	}
}

func TestReady(t *testing.T) {
	k := oidctest.NewRSAKey("k")
	f := newFakeIssuer(t, k)
	f.SetFailure(oidctest.BadGateway)
	clk := newClock()
	v, err := NewVerifier(context.Background(), testOptions(f), Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	r := v.(Readier)
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("Ready with the IdP down and no keys: want error")
	}
	f.SetFailure(oidctest.Up)
	if err := r.Ready(context.Background()); err == nil {
		t.Fatal("Ready again within the refresh interval: want error (rate limited)")
	}
	clk.Advance(DefaultJWKSRefreshInterval)
	if err := r.Ready(context.Background()); err != nil {
		t.Fatalf("Ready after the IdP came back: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	k := oidctest.NewECKey("k")
	tests := []struct {
		name      string
		discovery oidctest.Discovery
		jwksURL   bool // configure jwks_url
	}{
		// Only RFC 8414 metadata, path-inserted, for an issuer with a path.
		{name: "RFC 8414 discovery", discovery: oidctest.RFC8414},
		{name: "explicit jwks_url", discovery: oidctest.NoDiscovery, jwksURL: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idp := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{k}, Path: "/tenant", Discovery: tt.discovery})
			is := IssuerOptions{Issuer: idp.URL()}
			if tt.jwksURL {
				is.JWKSURL = idp.JWKSURL()
			}
			o := Options{Resource: testResource, Issuers: []IssuerOptions{is}}
			o.Defaults()
			v, err := NewVerifier(context.Background(), o, Deps{Now: newClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			tok := k.Sign(map[string]any{"iss": idp.URL(), "sub": "s", "aud": testResource, "exp": t0.Add(time.Hour).Unix()})
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// TestStaleKeysAreRefreshed: keys older than jwks_max_age are fetched again
// in the background, so a key the IdP removed stops verifying; while the
// IdP is down the keys held keep verifying. The issuer is served in memory
// inside a synctest bubble, so synctest.Wait returns once a background
// refresh has finished.
func TestStaleKeysAreRefreshed(t *testing.T) {
	a, b := oidctest.NewRSAKey("a"), oidctest.NewRSAKey("b")
	synctest.Test(t, func(t *testing.T) {
		f := oidctest.New(oidctest.Options{URL: "https://idp.example.com", Keys: []*oidctest.Key{a}, Claims: testClaims()})
		clk := newClock()
		opts := testOptions(f)
		opts.JWKSMaxAge = time.Hour
		v, err := NewVerifier(context.Background(), opts, Deps{HTTPClient: f.Client(), Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		n := 0
		verify := func(k *oidctest.Key) error { // a fresh token each time: none is cached
			n++
			now := clk.Now()
			_, err := v.Verify(ctx, k.Sign(f.Claims(map[string]any{"sub": fmt.Sprint("user-", n),
				"iat": now.Add(-time.Minute).Unix(), "nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()})))
			return err
		}
		fetches := func(want int32) {
			t.Helper()
			synctest.Wait() // a background refresh started has finished
			if got := f.JWKSFetches(); got != want {
				t.Fatalf("JWKS fetches = %d, want %d", got, want)
			}
		}
		if err := verify(a); err != nil {
			t.Fatal(err)
		}
		// The IdP replaces key a with b. Within max age, a still verifies and
		// nothing is fetched.
		f.SetKeys(b)
		clk.Advance(59 * time.Minute)
		if err := verify(a); err != nil {
			t.Fatalf("key a within max age: %v", err)
		}
		fetches(1)

		// Past max age with the IdP down: a keeps verifying (the refresh fails
		// in the background and the keys are kept).
		f.SetFailure(oidctest.BadGateway)
		clk.Advance(2 * time.Minute)
		if err := verify(a); err != nil {
			t.Fatalf("key a, stale, IdP down: %v", err)
		}
		fetches(2)
		if err := verify(a); err != nil {
			t.Fatalf("key a after a failed refresh: %v", err)
		}
		fetches(2) // a refresh it might start is rate limited

		// The IdP is back: the next request triggers a refresh, after which a
		// is unknown and b verifies.
		f.SetFailure(oidctest.Up)
		clk.Advance(DefaultJWKSRefreshInterval)
		_ = verify(a) // served from the stale keys while the refresh runs
		fetches(3)
		if err := verify(a); ReasonOf(err) != ReasonUnknownKey {
			t.Fatalf("removed key a still verifies after the refresh: %v", err)
		}
		if err := verify(b); err != nil {
			t.Errorf("key b after the refresh: %v", err)
		}
	})
}
