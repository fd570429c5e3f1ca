//go:build e2e

package e2e

// What Portcullis keeps in a Redis deployment (Sentinel or Cluster), held
// across a switch of its primary and never holding a bearer token: the
// fixture TestRedisSentinelFailoverUnderLoad and
// TestAuthServerAndSessionsOnRedisCluster share.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// asRedisPair is two replicas of the real binary behind one public origin
// (lb), each Portcullis as the authorization server (asConfig) in front of
// an IdP that logs every token it issues, sharing one Redis deployment
// for the authorization server's state, tasks, rate limits and legacy
// sessions (mcp.session_store redis). The IdP's own tokens are accepted on
// /mcp too (client credentials: the callers of the load and of the rate
// check). An http upstream that exchanges callers' tokens is configured
// and never reached: with it the authorization server keeps each user's
// IdP token, as a deployment with such an upstream does. Every secret the
// test sees is noted, for noSecretStored.
type asRedisPair struct {
	front            *lb
	idp              *IdP
	a, b             *server
	replicas         map[string]*server
	issuer, resource string

	mu      sync.Mutex
	secrets []seenSecret
}

// seenSecret is a token, code or session id the test saw.
type seenSecret struct{ what, value string }

// startASRedisPair starts the IdP and both replicas on the Redis
// deployment redisSection names, with the limits: section limits (nil:
// the defaults).
func startASRedisPair(t *testing.T, redisSection, limits map[string]any) *asRedisPair {
	t.Helper()
	front := startLB(t)
	idp := startASIdP(t, "", front.URL, "IDP_LOG_TOKENS=1")
	secret := filepath.Join(t.TempDir(), "upstream-client-secret")
	if err := os.WriteFile(secret, []byte(idpClientSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	extra := map[string]any{
		"redis": redisSection,
		"mcp":   map[string]any{"session_store": "redis"},
		"tasks": redisTasksSection(),
		"tools": map[string]any{"toolsets": []string{"core", "conformance"}},
		"upstreams": []map[string]any{{
			"name": "exchanged", "transport": "http", "url": "http://" + freeLoopbackAddr(t) + "/mcp",
			"oauth": map[string]any{"grant": "token_exchange", "token_url": idp.TokenURL(), "client_id": idpClient, "client_secret_file": secret},
		}},
	}
	if limits != nil {
		extra["limits"] = limits
	}
	cfg := asConfig(t, idp, front.URL, asKeysFile(t), extra, map[string]any{"code_ttl": "5m"})
	cfg["auth"].(map[string]any)["issuers"] = []map[string]any{{"issuer": idp.Issuer()}}
	file := writeConfigFile(t, cfg)
	p := &asRedisPair{
		front: front, idp: idp,
		a:      startServer(t, nil, "--config", file),
		b:      startServer(t, nil, "--config", file),
		issuer: front.URL, resource: front.URL + "/mcp",
	}
	p.replicas = map[string]*server{"A": p.a, "B": p.b}
	return p
}

// saw notes secrets the test saw, under what.
func (p *asRedisPair) saw(what string, values ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range values {
		if v != "" {
			p.secrets = append(p.secrets, seenSecret{what, v})
		}
	}
}

// sawTokens notes the tokens of a token response.
func (p *asRedisPair) sawTokens(what string, tr tokenResponse) {
	p.saw(what+": access token", tr.AccessToken)
	p.saw(what+": refresh token", tr.RefreshToken)
	p.saw(what+": ID token", tr.IDToken)
}

// ccToken is the IdP's client-credentials token of clientID for the
// replicas' resource, noted.
func (p *asRedisPair) ccToken(t *testing.T, clientID, secret string) string {
	t.Helper()
	tok := p.idp.ClientCredentialsToken(t, clientID, secret, p.resource, "mcp:tools")
	p.saw("the IdP's client-credentials token of "+clientID, tok)
	return tok
}

// asHeld is what hold makes before a switch and checkHeld checks after it.
type asHeld struct {
	alice *asApp
	// used is alice's first refresh token, used once already.
	used string
	// current are alice's tokens from that refresh; next those from the
	// refresh after the switch.
	current, next tokenResponse
	// bob and bobCode: a code not exchanged yet.
	bob     *asApp
	bobCode string
	// registered is a client that registered itself (RFC 7591).
	registered *asApp
	// session is alice's 2025-11-25 legacy session.
	session http.Header
}

// haRegisteredName is the client_name of the client hold registers.
const haRegisteredName = "HA Registered App"

// hold makes state of every kind the authorization server and the
// sessions keep: alice's grant, signed in across replicas with her
// consent, its code exchanged on B and refreshed on A (so that her first
// refresh token is a used one); bob's code, not exchanged; a client
// registration; alice's legacy session, opened on A and used on B.
func (p *asRedisPair) hold(t *testing.T, ctx context.Context) *asHeld {
	t.Helper()
	h := &asHeld{
		alice:      newASApp(t, p.issuer, p.resource, "mcp:tools"),
		bob:        newASApp(t, p.issuer, p.resource, "mcp:tools"),
		registered: newASApp(t, p.issuer, p.resource, "mcp:tools"),
	}
	code := h.alice.Code(t, lbSignIn(t, ctx, p.front, p.replicas, newSignInBrowser(p.idp, "alice"), h.alice, [4]string{"A", "B", "A", "B"}))
	p.saw("alice's code", code)
	first := mustToken(t, "alice's code on B")(h.alice.Exchange(t, p.b.BaseURL, code))
	p.sawTokens("alice's first grant", first)
	h.used = first.RefreshToken
	h.current = mustToken(t, "alice's refresh on A")(h.alice.Refresh(t, p.a.BaseURL, first.RefreshToken))
	p.sawTokens("alice's first refresh", h.current)

	h.bobCode = h.bob.Code(t, lbSignIn(t, ctx, p.front, p.replicas, newSignInBrowser(p.idp, "bob"), h.bob, [4]string{"B", "A", "B", "A"}))
	p.saw("bob's code", h.bobCode)

	h.registered.clientID = p.register(t, ctx, haRegisteredName, h.registered.redirect)

	h.session = legacySession(t, p.a.MCPURL(), h.current.AccessToken, asProtocol)
	if h.session.Get("Mcp-Session-Id") == "" {
		t.Fatal("initialize on A gave no Mcp-Session-Id")
	}
	p.saw("alice's session id", h.session.Get("Mcp-Session-Id"))
	checkToolText(t, callOK(t, p.b.MCPURL(), pingCallLegacy, h.session), "BISMILLAH")
	return h
}

// register registers a public client named name with one redirect URI at
// the front (RFC 7591) and returns its client_id.
func (p *asRedisPair) register(t *testing.T, ctx context.Context, name, redirect string) string {
	t.Helper()
	p.front.To(p.b)
	body, _ := json.Marshal(map[string]any{"client_name": name, "redirect_uris": []string{redirect}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.front.URL+"/oauth/register", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, b := doRequest(t, http.DefaultClient, req)
	var reg struct {
		ClientID string `json:"client_id"`
	}
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(b, &reg) != nil || reg.ClientID == "" {
		t.Fatalf("register: status %d, want 201 with a client_id\n%s", resp.StatusCode, b)
	}
	return reg.ClientID
}

// checkHeld checks, after a switch, that what hold made still holds: bob's
// code is exchanged; alice's current refresh token refreshes, and her new
// access token works on both replicas; her consent is remembered; the
// registered client signs carol in; alice's legacy session answers on
// both replicas; and presenting her used refresh token again is refused
// and revokes the family, the newest refresh token included.
func (p *asRedisPair) checkHeld(t *testing.T, ctx context.Context, h *asHeld) {
	t.Helper()
	t.Run("a code issued before is exchanged", func(t *testing.T) {
		tr := mustToken(t, "bob's code on A")(h.bob.Exchange(t, p.a.BaseURL, h.bobCode))
		p.sawTokens("bob's grant", tr)
		checkASToken(t, tr.AccessToken, p.issuer, p.resource, "bob")
	})
	t.Run("a refresh token issued before refreshes", func(t *testing.T) {
		h.next = mustToken(t, "alice's refresh on B")(h.alice.Refresh(t, p.b.BaseURL, h.current.RefreshToken))
		p.sawTokens("alice's second refresh", h.next)
		checkASToken(t, h.next.AccessToken, p.issuer, p.resource, "alice")
		acceptedOn(t, h.next.AccessToken, p.replicas)
	})
	t.Run("a consent given before is remembered", func(t *testing.T) {
		app := newASApp(t, p.issuer, p.resource, "mcp:tools")
		br := newSignInBrowser(p.idp, "alice")
		code := app.Code(t, lbSignIn(t, ctx, p.front, p.replicas, br, app, [4]string{"B", "A", "B", "A"}))
		p.saw("alice's second code", code)
		if br.ConsentPages != 0 {
			t.Errorf("alice answered %d consent page(s) signing in again, want none: her consent is forgotten", br.ConsentPages)
		}
		p.sawTokens("alice's second grant", mustToken(t, "alice's second code on A")(app.Exchange(t, p.a.BaseURL, code)))
	})
	t.Run("a client registered before signs in", func(t *testing.T) {
		br := newSignInBrowser(p.idp, "carol")
		br.App = haRegisteredName // the consent page names it
		code := h.registered.Code(t, lbSignIn(t, ctx, p.front, p.replicas, br, h.registered, [4]string{"A", "B", "A", "B"}))
		p.saw("carol's code", code)
		tr := mustToken(t, "carol's code on B")(h.registered.Exchange(t, p.b.BaseURL, code))
		p.sawTokens("carol's grant", tr)
		checkASTokenOf(t, tr.AccessToken, p.issuer, p.resource, "carol", h.registered.clientID)
	})
	t.Run("a legacy session opened before answers on both replicas", func(t *testing.T) {
		token := h.next.AccessToken
		if token == "" {
			token = h.current.AccessToken // the refresh failed above
		}
		s := withHeaders(h.session, "Authorization", "Bearer "+token)
		for _, name := range []string{"A", "B"} {
			checkToolText(t, callOK(t, p.replicas[name].MCPURL(), pingCallLegacy, s), "BISMILLAH")
		}
	})
	t.Run("a refresh token used before revokes its family", func(t *testing.T) {
		if st, tr := h.alice.Refresh(t, p.a.BaseURL, h.used); st != http.StatusBadRequest || tr.Error != "invalid_grant" || tr.AccessToken != "" {
			t.Errorf("alice's used refresh token on A: status %d, error %q; want 400 invalid_grant", st, tr.Error)
		}
		if h.next.RefreshToken == "" {
			t.Fatal("no refresh token from after the switch to check")
		}
		if st, tr := h.alice.Refresh(t, p.b.BaseURL, h.next.RefreshToken); st != http.StatusBadRequest || tr.Error != "invalid_grant" {
			t.Errorf("alice's newest refresh token on B after the reuse: status %d, error %q; want 400 invalid_grant (the family revoked)", st, tr.Error)
		}
	})
}

// checkSharedRate has a caller that has made no request yet (token) send
// requests as fast as it can, alternately to each replica, until 50 are
// refused (or 2000 are sent). Its bucket is shared in Redis (rate per
// second, burst): at most burst + rate × the time taken are accepted and
// the rest answered 429, where buckets of each replica's own would take
// about twice as many.
func checkSharedRate(t *testing.T, token string, replicas []*server, rate float64, burst int) {
	t.Helper()
	const enough, most = 50, 2000
	var accepted, limited, next atomic.Int64
	var mu sync.Mutex
	var others []string
	start := time.Now()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= most && limited.Load() < enough; i = next.Add(1) {
				s := replicas[int(i)%len(replicas)]
				resp, b, err := doPost(t.Context(), http.DefaultClient, s.MCPURL(), modernToolCall(2, "PingME", "{}"), modernHeaders(token, "tools/call", "PingME"))
				switch {
				case err == nil && resp.StatusCode == http.StatusOK:
					accepted.Add(1)
				case err == nil && resp.StatusCode == http.StatusTooManyRequests:
					limited.Add(1)
				default:
					mu.Lock()
					others = append(others, fmt.Sprintf("%v %v: %s", err, resp, b))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	for _, o := range others {
		t.Errorf("a request of the rate check got neither 200 nor 429: %s", o)
	}
	bound := int64(burst) + int64(rate*took.Seconds()) + 1
	t.Logf("rate check: %d accepted, %d refused with 429 in %v (at most %d may be accepted)", accepted.Load(), limited.Load(), took.Round(time.Millisecond), bound)
	if accepted.Load() > bound || limited.Load() == 0 {
		t.Errorf("%d requests accepted in %v, %d refused; want at most %d accepted (burst %d + %v/s) and the rest refused: the rate is not shared between the replicas",
			accepted.Load(), took.Round(time.Millisecond), limited.Load(), bound, burst, rate)
	}
}

// storedKinds are parts of the keys of each kind of state that could hold
// a token: noSecretStored wants one of each in what it reads, so that it
// cannot pass by reading nothing.
var storedKinds = map[string]string{
	"refresh token records":      ":rt:",
	"authorization code records": ":code:",
	"kept IdP tokens":            ":idp-token:",
	"consents":                   ":consent:",
	"registered clients":         ":client:dcr-",
	"legacy sessions":            "session:",
	"rate buckets":               "rate:",
	"tasks":                      "task:",
}

// noSecretStored fails the test if any secret the test saw, or any token
// the IdP issued, is in entries (every key and value of the deployment):
// whole, or its signature part (what follows a token's last dot: a JWT's
// signature, the HMAC of one of fosite's tokens).
func (p *asRedisPair) noSecretStored(t *testing.T, entries []redistest.Entry) {
	t.Helper()
	idpTokens := p.idp.IssuedTokens(t)
	if len(idpTokens) == 0 {
		t.Fatal("the IdP logged no token it issued (IDP_LOG_TOKENS): nothing of its to look for")
	}
	p.saw("a token the IdP issued", idpTokens...)
	for kind, part := range storedKinds {
		found := false
		for _, e := range entries {
			if strings.Contains(e.Key, part) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no key holding %s (…%s…) among the %d keys read: the check cannot see them", kind, part, len(entries))
		}
	}
	p.mu.Lock()
	secrets := append([]seenSecret(nil), p.secrets...)
	p.mu.Unlock()
	for _, s := range secrets {
		needles := map[string]string{"whole": s.value}
		if i := strings.LastIndexByte(s.value, '.'); i >= 0 && len(s.value)-i-1 >= 16 {
			needles["its signature part"] = s.value[i+1:]
		}
		for part, needle := range needles {
			for _, e := range entries {
				if e.Contains([]byte(needle)) {
					t.Errorf("%s (%s) is stored in Redis: key %q (%s)", s.what, part, e.Key, e.Type)
				}
			}
		}
	}
	t.Logf("%d secrets looked for in %d keys", len(secrets), len(entries))
}
