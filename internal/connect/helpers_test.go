package connect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// saas is a fake authorization server of an upstream: it signs in
// whichever of its own users the test says, issues codes bound to PKCE,
// rotates refresh tokens and revokes.
type saas struct {
	t   testing.TB
	srv *httptest.Server
	// issuer is what it names itself in metadata and in iss.
	issuer string
	// user is who signs in next; sendIss adds iss to the response (and
	// the metadata says so); issOverride replaces it.
	mu          sync.Mutex
	user        string
	sendIss     bool
	issOverride string
	expiresIn   int
	codes       map[string]saasCode
	refresh     map[string]string // live refresh token → user
	issued      int
	refreshes   int
	revoked     []string
}

type saasCode struct{ user, challenge, resource, redirect string }

func startSaaS(t testing.TB) *saas {
	a := &saas{t: t, user: "octocat", sendIss: true, expiresIn: 3600, codes: map[string]saasCode{}, refresh: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": a.issuer, "authorization_endpoint": a.issuer + "/authorize", "token_endpoint": a.issuer + "/token",
			"revocation_endpoint": a.issuer + "/revoke", "response_types_supported": []string{"code"},
			"code_challenge_methods_supported":               []string{"S256"},
			"authorization_response_iss_parameter_supported": a.sendIss,
		})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "portcullis" || q.Get("code_challenge_method") != "S256" || q.Get("response_type") != "code" {
			http.Error(w, "bad authorize request", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		code := fmt.Sprintf("code-%d", len(a.codes)+1)
		a.codes[code] = saasCode{user: a.user, challenge: q.Get("code_challenge"), resource: q.Get("resource"), redirect: q.Get("redirect_uri")}
		iss := a.issuer
		if a.issOverride != "" {
			iss = a.issOverride
		}
		send := a.sendIss
		a.mu.Unlock()
		back := url.Values{"code": {code}, "state": {q.Get("state")}}
		if send {
			back.Set("iss", iss)
		}
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+back.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if id, secret, ok := r.BasicAuth(); !ok || id != "portcullis" || secret != "saas-secret" {
			tokenError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		var user string
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			c, ok := a.codes[r.PostForm.Get("code")]
			delete(a.codes, r.PostForm.Get("code"))
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("redirect_uri") != c.redirect || r.PostForm.Get("resource") != c.resource {
				tokenError(w, http.StatusBadRequest, "invalid_grant")
				return
			}
			user = c.user
		case "refresh_token":
			u, ok := a.refresh[r.PostForm.Get("refresh_token")]
			if !ok {
				tokenError(w, http.StatusBadRequest, "invalid_grant")
				return
			}
			delete(a.refresh, r.PostForm.Get("refresh_token")) // rotation
			a.refreshes++
			user = u
		default:
			tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
			return
		}
		a.issued++
		rt := fmt.Sprintf("rt-%s-%d", user, a.issued)
		a.refresh[rt] = user
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("at-%s-%d", user, a.issued), "token_type": "Bearer",
			"expires_in": a.expiresIn, "refresh_token": rt, "scope": "repo"})
	})
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		a.mu.Lock()
		a.revoked = append(a.revoked, r.PostForm.Get("token"))
		delete(a.refresh, r.PostForm.Get("token"))
		a.mu.Unlock()
	})
	a.srv = httptest.NewServer(mux)
	a.issuer = a.srv.URL
	t.Cleanup(a.srv.Close)
	return a
}

func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// revokeAll revokes every refresh token, as a user revoking the app at
// the service does.
func (a *saas) revokeAll() {
	a.mu.Lock()
	clear(a.refresh)
	a.mu.Unlock()
}

// cookieSignIn signs browsers in by a "user" cookie the test sets;
// SignInBrowser sends them to /sign-in.
type cookieSignIn struct{}

func (cookieSignIn) BrowserUser(r *http.Request) (string, bool) {
	c, err := r.Cookie("user")
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

func (cookieSignIn) SignInBrowser(w http.ResponseWriter, r *http.Request, returnTo string) {
	http.Redirect(w, r, "/sign-in?return="+url.QueryEscape(returnTo), http.StatusSeeOther)
}

// countingKV counts reads of vault entries.
type countingKV struct {
	kv.KV
	mu    sync.Mutex
	reads int
}

func (k *countingKV) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "vault:") {
		k.mu.Lock()
		k.reads++
		k.mu.Unlock()
	}
	return k.KV.Get(ctx, key)
}

func (k *countingKV) vaultReads() int { k.mu.Lock(); defer k.mu.Unlock(); return k.reads }

// env is a Service on an httptest server in front of one fake SaaS.
type env struct {
	t         testing.TB
	svc       *Service
	srv       *httptest.Server
	saas      *saas
	store     *countingKV
	mem       *kv.Memory
	logs      *syncbuf.Buffer
	now       time.Time
	clockMu   sync.Mutex
	events    []Event
	audits    []string
	completed []string
}

const ownerIssuer = "https://portcullis.example"

func owner(sub string) vault.Owner { return vault.Owner{Issuer: ownerIssuer, Subject: sub} }

func newEnv(t testing.TB, edit ...func(*Connection)) *env {
	t.Helper()
	e := &env{t: t, saas: startSaaS(t), now: time.Now(), logs: &syncbuf.Buffer{}}
	e.mem = kv.NewMemory(e.clock)
	e.store = &countingKV{KV: e.mem}
	ring, err := keyring.New([][]byte{bytes.Repeat([]byte{7}, keyring.KeySize)}, vault.Purpose)
	if err != nil {
		t.Fatal(err)
	}
	v, err := vault.New(e.store, ring, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c := Connection{Name: "saas", Title: "SaaS", Issuer: e.saas.issuer, ClientID: "portcullis",
		ClientSecret: func() (string, error) { return "saas-secret", nil }, Resource: "https://saas.example/mcp", Scopes: []string{"repo"}}
	for _, f := range edit {
		f(&c)
	}
	var mu sync.Mutex
	var h http.Handler
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(e.srv.Close)
	e.svc, err = New(Options{
		BaseURL: e.srv.URL, Connections: []Connection{c}, Vault: v, KV: e.store, SignIn: cookieSignIn{}, OwnerIssuer: ownerIssuer,
		Now: e.clock, Logger: slog.New(slog.NewTextHandler(e.logs, nil)),
		Observe: func(ev Event) { mu.Lock(); e.events = append(e.events, ev); mu.Unlock() },
		Audit: func(_ context.Context, action, outcome string, o vault.Owner, conn string, detail ...string) {
			mu.Lock()
			e.audits = append(e.audits, strings.Join(append([]string{action, outcome, o.Subject, conn}, detail...), " "))
			mu.Unlock()
		},
		Completed: func(id string) { mu.Lock(); e.completed = append(e.completed, id); mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	h = e.svc.Handler()
	return e
}

func (e *env) clock() time.Time { e.clockMu.Lock(); defer e.clockMu.Unlock(); return e.now }

func (e *env) advance(d time.Duration) { e.clockMu.Lock(); e.now = e.now.Add(d); e.clockMu.Unlock() }

// browser is a user agent signed in as user (none: ""), stepping through
// redirects itself.
type browser struct {
	t testing.TB
	c *http.Client
}

func (e *env) browser(user string) *browser {
	jar, _ := cookiejar.New(nil)
	if user != "" {
		for _, u := range []string{e.srv.URL, e.saas.srv.URL} {
			pu, _ := url.Parse(u)
			jar.SetCookies(pu, []*http.Cookie{{Name: "user", Value: user}})
		}
	}
	return &browser{t: e.t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, u string, hdr http.Header) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(method, u, nil)
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) get(u string) (*http.Response, string) {
	b.t.Helper()
	return b.do(http.MethodGet, u, nil)
}

// post posts a page's form, as the browser does from the page itself.
func (b *browser) post(u string) (*http.Response, string) {
	b.t.Helper()
	return b.do(http.MethodPost, u, http.Header{"Sec-Fetch-Site": {"same-origin"}})
}

// follow goes from a response that redirects to the service's
// authorization server through it, and returns the callback URL it sends
// the browser to.
func (b *browser) toCallback(resp *http.Response, body string) string {
	b.t.Helper()
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("want a redirect to the authorization server, got %d %s", resp.StatusCode, body)
	}
	resp, body = b.get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("authorization server: %d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("Location")
}

// connect makes a link for user and walks user's browser through it,
// returning the final page.
func (e *env) connect(user string) (*http.Response, string, string) {
	e.t.Helper()
	link, id, err := e.svc.Require(context.Background(), "saas", owner(user))
	if err != nil {
		e.t.Fatal(err)
	}
	b := e.browser(user)
	callback := b.toCallback(b.get(link))
	resp, body := b.get(callback)
	return resp, body, id
}

func newTestServer(t testing.TB, h http.Handler) *httptest.Server {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
