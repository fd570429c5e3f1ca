package authserver

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/audit"
)

// TestAuditEvents: a sign-in with consent, a refresh, a reused refresh
// token and a revocation each send their audit event, naming the user
// and the client, and none holds a token.
func TestAuditEvents(t *testing.T) {
	var mu sync.Mutex
	var events []*audit.Event
	ts := startServerDeps(t, func(d *Deps) {
		d.Audit = func(_ context.Context, e *audit.Event) {
			mu.Lock()
			events = append(events, e)
			mu.Unlock()
		}
	})
	tok := ts.fullFlow(t)
	rt1 := tok["refresh_token"].(string)
	if status, _ := ts.refresh(t, rt1); status != http.StatusOK {
		t.Fatal("refresh refused")
	}
	if status, _ := ts.refresh(t, rt1); status == http.StatusOK {
		t.Fatal("a reused refresh token was accepted")
	}
	tok = ts.fullFlow(t)
	resp, err := http.PostForm(ts.srv.URL+PathRevoke, url.Values{"token": {tok["refresh_token"].(string)}, "token_type_hint": {"refresh_token"}, "client_id": {"app"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	mu.Lock()
	defer mu.Unlock()
	var types []string
	for _, e := range events {
		types = append(types, e.Type+"/"+e.Outcome)
		if e.Actor.ClientID != "app" || e.Actor.Issuer == "" {
			t.Errorf("%s: actor %+v, want the client app and the issuer", e.Type, e.Actor)
		}
		if e.Type != audit.TypeTokenRevoked && e.Actor.Subject != "alice" {
			t.Errorf("%s: subject %q, want alice", e.Type, e.Actor.Subject)
		}
		for _, secret := range []string{rt1, tok["refresh_token"].(string), tok["access_token"].(string)} {
			if strings.Contains(string(e.JSON()), secret) {
				t.Errorf("%s holds a token: %s", e.Type, e.JSON())
			}
		}
	}
	for _, want := range []string{"signin/success", "consent/success", "token.issued/success", "token.refreshed/success", "token.reused/refused", "token.revoked/success"} {
		if !slices.Contains(types, want) {
			t.Errorf("no %s event; got %q", want, types)
		}
	}
}
