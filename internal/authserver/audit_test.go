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

// TestAuditSignInRefused: a sign-in the identity provider refuses, one
// whose answer does not sign the user in, and one whose answer comes to
// another browser each send a refused signin event with its reason.
func TestAuditSignInRefused(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		edit         func(*Options)
		run          func(t *testing.T, ts *testServer)
	}{
		{name: "idp refuses", reason: "idp_refused", run: func(t *testing.T, ts *testServer) {
			ts.idp.refuse = "access_denied"
			authURL, _ := ts.authorizeURL(nil)
			ts.signIn(newBrowser(t), authURL)
		}},
		{name: "sign-in fails", reason: "sign_in", edit: func(o *Options) { o.IdP.AllowedEmailDomains = []string{"example.org"} }, run: func(t *testing.T, ts *testServer) {
			authURL, _ := ts.authorizeURL(nil)
			ts.signIn(newBrowser(t), authURL)
		}},
		{name: "another browser", reason: "browser", run: func(t *testing.T, ts *testServer) {
			b := newBrowser(t)
			authURL, _ := ts.authorizeURL(nil)
			resp, _ := b.get(authURL)
			resp, _ = b.get(resp.Header.Get("Location"))
			newBrowser(t).get(resp.Header.Get("Location"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edit := tc.edit
			if edit == nil {
				edit = func(*Options) {}
			}
			var mu sync.Mutex
			var events []*audit.Event
			ts := startServerDeps(t, func(d *Deps) {
				d.Audit = func(_ context.Context, e *audit.Event) {
					mu.Lock()
					events = append(events, e)
					mu.Unlock()
				}
			}, edit)
			tc.run(t, ts)
			mu.Lock()
			defer mu.Unlock()
			var got []string
			for _, e := range events {
				got = append(got, e.Type+"/"+e.Outcome+"/"+e.Detail["reason"])
				if e.Type == audit.TypeSignIn && e.Outcome == audit.OutcomeSuccess {
					t.Errorf("a refused sign-in recorded a successful one: %s", e.JSON())
				}
			}
			want := audit.TypeSignIn + "/" + audit.OutcomeRefused + "/" + tc.reason
			if !slices.Contains(got, want) {
				t.Fatalf("events %q, want %s", got, want)
			}
			for _, e := range events {
				if e.Type == audit.TypeSignIn && e.Actor.ClientID != "app" {
					t.Errorf("actor %+v, want the client app", e.Actor)
				}
			}
		})
	}
}
