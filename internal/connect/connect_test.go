package connect

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/vault"
)

func TestConnectFromLink(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.svc.Token(ctx, "saas", owner("alice")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Token before connecting: %v, want ErrNotConnected", err)
	}
	resp, body, id := e.connect("alice")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "SaaS is connected") {
		t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	if !slices.Equal(e.completed, []string{id}) {
		t.Fatalf("completed = %v, want the link's id %q", e.completed, id)
	}
	tok, err := e.svc.Token(ctx, "saas", owner("alice"))
	if err != nil || tok != "at-octocat-1" {
		t.Fatalf("Token = %q, %v; want the SaaS user's token", tok, err)
	}
	if _, err := e.svc.Token(ctx, "saas", owner("bob")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("another user's Token: %v, want ErrNotConnected", err)
	}
	// A second user connects another account at the service.
	e.saas.mu.Lock()
	e.saas.user = "hubber"
	e.saas.mu.Unlock()
	if resp, body, _ := e.connect("bob"); resp.StatusCode != http.StatusOK {
		t.Fatalf("bob's callback: %d %s", resp.StatusCode, body)
	}
	for user, want := range map[string]string{"alice": "at-octocat-1", "bob": "at-hubber-2"} {
		if tok, err := e.svc.Token(ctx, "saas", owner(user)); err != nil || tok != want {
			t.Errorf("%s's Token = %q, %v; want %q", user, tok, err, want)
		}
	}
	if !slices.Contains(e.audits, "connect ok alice saas") || !slices.Contains(e.audits, "connect ok bob saas") {
		t.Errorf("audit = %v, want a connect line per user", e.audits)
	}
}

// TestLinkUsedOnce: a link whose connection was made is gone.
func TestLinkUsedOnce(t *testing.T) {
	e := newEnv(t)
	link, _, err := e.svc.Require(context.Background(), "saas", owner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	b := e.browser("alice")
	if resp, body := b.get(b.toCallback(b.get(link))); resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	if resp, _ := b.get(link); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the link opened again: %d, want 400", resp.StatusCode)
	}
}

// TestAttacks: a connection is made only by the user it is for, from the
// flow it started, with the authorization server it went to.
func TestAttacks(t *testing.T) {
	tests := []struct {
		name string
		run  func(e *env) (*http.Response, string)
		want int
	}{
		{"a link opened by another user", func(e *env) (*http.Response, string) {
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
			return e.browser("mallory").get(link)
		}, http.StatusForbidden},
		{"a flow finished by another user", func(e *env) (*http.Response, string) {
			// Mallory starts connecting her own SaaS account and sends
			// Alice the callback URL.
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("mallory"))
			m := e.browser("mallory")
			return e.browser("alice").get(m.toCallback(m.get(link)))
		}, http.StatusForbidden},
		{"a flow finished in a browser not signed in", func(e *env) (*http.Response, string) {
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
			a := e.browser("alice")
			return e.browser("").get(a.toCallback(a.get(link)))
		}, http.StatusForbidden},
		{"a replayed state", func(e *env) (*http.Response, string) {
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
			a := e.browser("alice")
			cb := a.toCallback(a.get(link))
			if resp, body := a.get(cb); resp.StatusCode != http.StatusOK {
				e.t.Fatalf("first callback: %d %s", resp.StatusCode, body)
			}
			return a.get(cb)
		}, http.StatusBadRequest},
		{"a forged state", func(e *env) (*http.Response, string) {
			return e.browser("alice").get(e.srv.URL + PathCallback + "?code=code-1&state=forged&iss=" + url.QueryEscape(e.saas.issuer))
		}, http.StatusBadRequest},
		{"a forged link", func(e *env) (*http.Response, string) {
			return e.browser("alice").get(e.srv.URL + PathStart + "?id=forged")
		}, http.StatusBadRequest},
		{"a mix-up: another server's iss", func(e *env) (*http.Response, string) {
			e.saas.issOverride = "https://evil.example"
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
			a := e.browser("alice")
			return a.get(a.toCallback(a.get(link)))
		}, http.StatusBadRequest},
		{"a mix-up: no iss from a server that sends it", func(e *env) (*http.Response, string) {
			link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
			a := e.browser("alice")
			cb, _ := url.Parse(a.toCallback(a.get(link)))
			q := cb.Query()
			q.Del("iss")
			cb.RawQuery = q.Encode()
			return a.get(cb.String())
		}, http.StatusBadRequest},
		{"a cross-origin disconnect", func(e *env) (*http.Response, string) {
			return e.browser("alice").do(http.MethodPost, e.srv.URL+PathPrefix+"/saas/disconnect", http.Header{"Sec-Fetch-Site": {"cross-site"}})
		}, http.StatusForbidden},
		{"a cross-origin connect", func(e *env) (*http.Response, string) {
			return e.browser("alice").do(http.MethodPost, e.srv.URL+PathPrefix+"/saas/connect", http.Header{"Origin": {"https://evil.example"}})
		}, http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			resp, body := tt.run(e)
			if resp.StatusCode != tt.want {
				t.Fatalf("%d %s, want %d", resp.StatusCode, body, tt.want)
			}
			for _, u := range []string{"alice", "mallory"} {
				if _, _, err := e.svc.o.Vault.Get(context.Background(), "saas", owner(u)); !errors.Is(err, vault.ErrNotConnected) && tt.name != "a replayed state" {
					t.Errorf("%s has a connection: %v", u, err)
				}
			}
		})
	}
}

// TestRefresh: an expiring token is refreshed once, with rotation; a
// revoked grant drops the connection.
func TestRefresh(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.connect("alice")
	first, _ := e.svc.Token(ctx, "saas", owner("alice"))
	e.advance(time.Hour - EarlyRefresh + time.Second)
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Go(func() {
			tok, err := e.svc.Token(ctx, "saas", owner("alice"))
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		})
	}
	wg.Wait()
	if e.saas.refreshes != 1 {
		t.Fatalf("%d refreshes for a burst of calls, want 1", e.saas.refreshes)
	}
	for _, tok := range toks {
		if tok == first || tok != toks[0] {
			t.Fatalf("tokens after the refresh: %v (first was %q)", toks, first)
		}
	}
	if !slices.Contains(e.audits, "refresh ok alice saas") {
		t.Errorf("audit = %v, want the refresh", e.audits)
	}
	e.saas.revokeAll()
	e.advance(time.Hour)
	if _, err := e.svc.Token(ctx, "saas", owner("alice")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Token after the grant was revoked: %v, want ErrNotConnected", err)
	}
	if _, _, err := e.svc.o.Vault.Get(ctx, "saas", owner("alice")); !errors.Is(err, vault.ErrNotConnected) {
		t.Fatalf("the revoked connection is still in the vault: %v", err)
	}
	if !slices.Contains(e.audits, "refresh refused alice saas reason invalid_grant") {
		t.Errorf("audit = %v, want the refused refresh", e.audits)
	}
}

// TestTwoReplicasRefreshOnce: two services sharing one vault refresh one
// entry; the loser of the race takes the winner's tokens.
func TestTwoReplicasRefreshOnce(t *testing.T) {
	a := newEnv(t)
	ctx := context.Background()
	a.connect("alice")
	// b is a second replica: same vault, same SaaS.
	b, err := New(a.svc.o)
	if err != nil {
		t.Fatal(err)
	}
	a.advance(time.Hour)
	ta, err := a.svc.Token(ctx, "saas", owner("alice"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := b.Token(ctx, "saas", owner("alice"))
	if err != nil || tb != ta {
		t.Fatalf("the second replica's token = %q, %v; want the first's %q", tb, err, ta)
	}
	if a.saas.refreshes != 1 {
		t.Fatalf("%d refreshes, want 1", a.saas.refreshes)
	}
}

// TestVaultReadOncePerLifetime: a replica reads the vault once per token
// lifetime, however many calls it serves.
func TestVaultReadOncePerLifetime(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.connect("alice")
	before := e.store.vaultReads()
	for range 100 {
		if _, err := e.svc.Token(ctx, "saas", owner("alice")); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.store.vaultReads() - before; n != 1 {
		t.Fatalf("%d vault reads for 100 calls, want 1", n)
	}
}

func TestNotSignedInIsSentToSignIn(t *testing.T) {
	e := newEnv(t)
	link, _, _ := e.svc.Require(context.Background(), "saas", owner("alice"))
	for _, u := range []string{link, e.srv.URL + PathPage} {
		resp, _ := e.browser("").get(u)
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusSeeOther || loc.Path != "/sign-in" || !strings.HasPrefix(loc.Query().Get("return"), "/connections") {
			t.Errorf("%s: %d to %q, want the sign-in returning here", u, resp.StatusCode, loc)
		}
	}
}

// TestPageAndDisconnect: the page lists the connection; disconnecting
// drops it and revokes its refresh token at the service.
func TestPageAndDisconnect(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.browser("alice")
	if _, body := b.get(e.srv.URL + PathPage); !strings.Contains(body, "not connected") {
		t.Fatalf("page before connecting: %s", body)
	}
	if resp, body := b.get(b.toCallback(b.post(e.srv.URL + PathPrefix + "/saas/connect"))); resp.StatusCode != http.StatusOK {
		t.Fatalf("connect from the page: %d %s", resp.StatusCode, body)
	}
	if _, body := b.get(e.srv.URL + PathPage); !strings.Contains(body, "connected 20") || !strings.Contains(body, "Disconnect") {
		t.Fatalf("page after connecting: %s", body)
	}
	if _, err := e.svc.Token(ctx, "saas", owner("alice")); err != nil {
		t.Fatal(err)
	}
	if resp, _ := b.post(e.srv.URL + PathPrefix + "/saas/disconnect"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disconnect: %d", resp.StatusCode)
	}
	if _, err := e.svc.Token(ctx, "saas", owner("alice")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Token after disconnecting: %v", err)
	}
	if len(e.saas.revoked) != 1 || !strings.HasPrefix(e.saas.revoked[0], "rt-") {
		t.Fatalf("revoked %v, want the refresh token", e.saas.revoked)
	}
	if !slices.Contains(e.audits, "disconnect ok alice saas") {
		t.Errorf("audit = %v", e.audits)
	}
	if !slices.Contains(e.events, Event{Connection: "saas", Action: "revoke", Outcome: "ok"}) {
		t.Errorf("events = %v, want the revocation counted", e.events)
	}
}

// TestDiscoveryFromResourceMetadata: with no issuer configured, the
// upstream's Protected Resource Metadata names the authorization server
// and the resource.
func TestDiscoveryFromResourceMetadata(t *testing.T) {
	var e *env
	prm := http.NewServeMux()
	prmSrv := newTestServer(t, prm)
	prm.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"resource":"` + prmSrv.URL + `/mcp","authorization_servers":["` + e.saas.issuer + `"]}`))
	})
	e = newEnv(t, func(c *Connection) { c.Issuer, c.Resource, c.ResourceURL = "", "", prmSrv.URL+"/mcp" })
	if resp, body, _ := e.connect("alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("connect: %d %s", resp.StatusCode, body)
	}
	e.saas.mu.Lock()
	defer e.saas.mu.Unlock()
	if len(e.saas.refresh) != 1 {
		t.Fatal("no token was issued")
	}
}

// TestNoTokenLeaks: no token the service saw is in a log line, a page, an
// event or an audit line.
func TestNoTokenLeaks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	_, body, _ := e.connect("alice")
	e.advance(2 * time.Hour)
	e.svc.Token(ctx, "saas", owner("alice"))
	e.saas.revokeAll()
	e.advance(2 * time.Hour)
	e.svc.Token(ctx, "saas", owner("alice"))
	_, page := e.browser("alice").get(e.srv.URL + PathPage)
	seen := body + page + e.logs.String() + strings.Join(e.audits, "\n")
	for _, ev := range e.events {
		seen += ev.Connection + ev.Action + ev.Outcome + ev.Reason
	}
	for _, secret := range []string{"at-octocat", "rt-octocat", "saas-secret", "code-1"} {
		if strings.Contains(seen, secret) {
			t.Errorf("%q leaked:\n%s", secret, seen)
		}
	}
	e.mem.Each(func(key string, value []byte) {
		if strings.Contains(key+string(value), "octocat") || strings.Contains(key, "alice") {
			t.Errorf("the store holds plaintext under %q", key)
		}
	})
}

func TestNew(t *testing.T) {
	_, err := New(Options{BaseURL: "ftp://x", Connections: []Connection{{Name: "a"}, {Name: "a", ClientID: "c", Issuer: "https://i"}}})
	for _, want := range []string{"base URL", "vault, a store and a sign-in", `"a" needs a name and a client id`, `"a" needs an issuer`, `duplicate connection "a"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New error %v, want it to say %q", err, want)
		}
	}
}

// TestNext: a sign-in that chains connections gets a link for each one
// the user lacks and has not attempted, which returns to the sign-in.
func TestNext(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	ret := "/oauth/continue?login=L1"
	name, link, err := e.svc.Next(ctx, owner("alice"), []string{"unknown", "saas"}, nil, ret)
	if err != nil || name != "saas" || link == "" {
		t.Fatalf("Next = %q %q %v", name, link, err)
	}
	if name, link, err := e.svc.Next(ctx, owner("alice"), []string{"saas"}, []string{"saas"}, ret); err != nil || name != "" || link != "" {
		t.Fatalf("Next after attempting saas = %q %q %v, want nothing", name, link, err)
	}
	b := e.browser("alice")
	resp, body := b.get(b.toCallback(b.get(link)))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != ret {
		t.Fatalf("callback: %d to %q (%s), want back to the sign-in", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if name, link, err := e.svc.Next(ctx, owner("alice"), []string{"saas"}, nil, ret); err != nil || name != "" || link != "" {
		t.Fatalf("Next once connected = %q %q %v, want nothing", name, link, err)
	}
	for _, bad := range []string{"https://evil.example/", "//evil.example", "/\\evil.example", "relative", "/a\nb"} {
		if _, _, err := e.svc.Next(ctx, owner("bob"), []string{"saas"}, nil, bad); err == nil {
			t.Errorf("Next returning to %q succeeded", bad)
		}
	}
	// A refusal at the service offers to go on with the sign-in.
	_, link, _ = e.svc.Next(ctx, owner("bob"), []string{"saas"}, nil, ret)
	bb := e.browser("bob")
	cb, _ := url.Parse(bb.toCallback(bb.get(link)))
	q := cb.Query()
	q.Del("code")
	q.Set("error", "access_denied")
	cb.RawQuery = q.Encode()
	if resp, body := bb.get(cb.String()); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `href="/oauth/continue?login=L1"`) {
		t.Fatalf("refused: %d %s", resp.StatusCode, body)
	}
}

// TestDisconnectReachesOtherReplicas: a token without an expiry is read
// from the vault again after NoExpiryCache, so a disconnect made on
// another replica takes effect within it.
func TestDisconnectReachesOtherReplicas(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.saas.mu.Lock()
	e.saas.expiresIn = 0 // no expires_in: no expiry
	e.saas.mu.Unlock()
	e.connect("alice")
	other, err := New(e.svc.o) // another replica, same vault
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Token(ctx, "saas", owner("alice")); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.Disconnect(ctx, "saas", owner("alice")); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Token(ctx, "saas", owner("alice")); err != nil {
		t.Fatalf("within NoExpiryCache the other replica still uses its copy: %v", err)
	}
	e.advance(NoExpiryCache)
	if _, err := other.Token(ctx, "saas", owner("alice")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("after NoExpiryCache: %v, want ErrNotConnected", err)
	}
}

// TestPageEscapes: what a page shows is escaped.
func TestPageEscapes(t *testing.T) {
	e := newEnv(t, func(c *Connection) { c.Title = `<script>alert("x")</script>` })
	_, body := e.browser("alice").get(e.srv.URL + PathPage)
	if strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
		t.Fatalf("page: %s", body)
	}
}

// TestAccountInUseIsKept: an account read more than half the vault's time
// to live after it was written is written again, so one in use is never
// forgotten, even with a token that never expires (never refreshed).
func TestAccountInUseIsKept(t *testing.T) {
	e := newEnv(t)
	o := e.svc.o
	o.TTL = 24 * time.Hour // the env's vault keeps entries for 24h
	svc, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.srv.Config.Handler = svc.Handler()
	e.saas.mu.Lock()
	e.saas.expiresIn = 0
	e.saas.mu.Unlock()
	ctx := context.Background()
	e.connect("alice")
	for range 3 {
		e.advance(13 * time.Hour)
		if _, err := e.svc.Token(ctx, "saas", owner("alice")); err != nil {
			t.Fatalf("an account in use was forgotten: %v", err)
		}
	}
	e.advance(25 * time.Hour)
	if _, err := e.svc.Token(ctx, "saas", owner("alice")); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("an account unused for longer than the time to live: %v, want ErrNotConnected", err)
	}
}
