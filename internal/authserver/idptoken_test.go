package authserver

import (
	"bytes"
	"context"
	"errors"
	"testing"
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
