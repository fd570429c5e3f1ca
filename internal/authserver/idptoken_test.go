package authserver

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestIdPTokensKeptEncryptedForTokenExchange(t *testing.T) {
	ctx := context.Background()
	t.Run("kept, sealed, and refreshed once expired", func(t *testing.T) {
		ts := startServerDeps(t, func(d *Deps) { d.KeepIdPTokens = true })
		ts.fullFlow(t)
		got, err := ts.IdPAccessToken(ctx, "alice")
		if err != nil || got != "idp-at" {
			t.Fatalf("IdPAccessToken = %q, %v; want idp-at", got, err)
		}
		raw, err := ts.kv.Get(ctx, idpTokenKey("alice"))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte("idp-at")) || bytes.Contains(raw, []byte("idp-rt")) {
			t.Fatal("the store holds the provider's token in the clear")
		}
		// Moved to another user's key, it does not open.
		ts.kv.Set(ctx, idpTokenKey("mallory"), raw, 0)
		if _, err := ts.IdPAccessToken(ctx, "mallory"); !errors.Is(err, ErrNoIdPToken) {
			t.Errorf("a sealed token moved to another key opened: %v", err)
		}

		ts.idp.expiresIn = 1 // within oauth2's expiry margin: expired at once
		ts.fullFlow(t)
		got, err = ts.IdPAccessToken(ctx, "alice")
		if err != nil || got != "idp-at-refreshed" || ts.idp.refreshes != 1 {
			t.Fatalf("expired token: %q, %v after %d refreshes; want idp-at-refreshed after 1", got, err, ts.idp.refreshes)
		}
		if got, _ := ts.IdPAccessToken(ctx, "alice"); got != "idp-at-refreshed" || ts.idp.refreshes != 1 {
			t.Errorf("the refreshed token was not kept: %q after %d refreshes", got, ts.idp.refreshes)
		}
	})
	t.Run("not kept unless asked", func(t *testing.T) {
		ts := startServer(t)
		ts.fullFlow(t)
		if _, err := ts.IdPAccessToken(ctx, "alice"); !errors.Is(err, ErrNoIdPToken) {
			t.Fatalf("IdPAccessToken = %v, want ErrNoIdPToken", err)
		}
		if _, err := ts.kv.Get(ctx, idpTokenKey("alice")); err == nil {
			t.Fatal("the provider's token was stored")
		}
	})
	t.Run("never in the client's token response", func(t *testing.T) {
		ts := startServerDeps(t, func(d *Deps) { d.KeepIdPTokens = true })
		tok := ts.fullFlow(t)
		for k, v := range tok {
			if s, _ := v.(string); s == "idp-at" || s == "idp-rt" || bytes.Contains([]byte(s), []byte("idp-at")) {
				t.Errorf("token response field %s carries the provider's token", k)
			}
		}
	})
}

func TestIdPIDTokenKeptAndRefreshed(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ts := startServerDeps(t, func(d *Deps) { d.KeepIdPTokens = true; d.Now = clock })
	ts.fullFlow(t)
	first, err := ts.IdPIDToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if c := jwtClaims(t, first); c["sub"] != "alice" || c["gen"] != nil || ts.idp.refreshes != 0 {
		t.Fatalf("IdPIDToken = claims %v after %d refreshes; want the sign-in's ID token of alice", c, ts.idp.refreshes)
	}
	raw, err := ts.kv.Get(ctx, idpTokenKey("alice"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(first)) || bytes.Contains(raw, []byte(strings.Split(first, ".")[1])) {
		t.Fatal("the store holds the provider's ID token in the clear")
	}

	// Within a minute of its exp, it is refreshed: the answer's ID token
	// is verified and kept.
	ts.idp.mu.Lock()
	ts.idp.refreshIDToken = true
	ts.idp.mu.Unlock()
	mu.Lock()
	now = now.Add(time.Hour - 30*time.Second)
	mu.Unlock()
	second, err := ts.IdPIDToken(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if c := jwtClaims(t, second); c["sub"] != "alice" || c["gen"] != "refreshed" || ts.idp.refreshes != 1 {
		t.Fatalf("after expiry: claims %v after %d refreshes; want a refreshed ID token after 1", c, ts.idp.refreshes)
	}
	if again, _ := ts.IdPIDToken(ctx, "alice"); again != second || ts.idp.refreshes != 1 {
		t.Errorf("the refreshed ID token was not kept (%d refreshes)", ts.idp.refreshes)
	}
	// The access token is kept beside it.
	if at, err := ts.IdPAccessToken(ctx, "alice"); err != nil || at != "idp-at-refreshed" {
		t.Errorf("IdPAccessToken = %q, %v", at, err)
	}

	// A refresh answer without an ID token leaves none to present.
	ts.idp.mu.Lock()
	ts.idp.refreshIDToken = false
	ts.idp.mu.Unlock()
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	if _, err := ts.IdPIDToken(ctx, "alice"); !errors.Is(err, ErrNoIdPToken) {
		t.Errorf("IdPIDToken with no ID token in the refresh answer = %v, want ErrNoIdPToken", err)
	}
}

// jwtClaims are the claims of a JWT, unverified.
func jwtClaims(t *testing.T, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c
}
