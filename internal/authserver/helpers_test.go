package authserver

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// fakeIdP is an OpenID provider for fast tests: its authorization
// endpoint signs in whoever the test says at once and redirects back; its
// token endpoint checks PKCE and returns an ID token with the nonce.
type fakeIdP struct {
	srv  *httptest.Server
	key  *oidctest.Key
	mu   sync.Mutex
	user map[string]any // claims of the next sign-in
	// codes: code → (nonce, challenge, claims)
	codes  map[string]fakeCode
	refuse string // error to send back instead of a code
	// expiresIn is the lifetime of the access tokens it issues (seconds);
	// refreshes counts refresh_token grants.
	expiresIn, refreshes int
	// refreshIDToken has a refresh answer carry an ID token (claim gen
	// "refreshed", valid for three hours).
	refreshIDToken bool
}

type fakeCode struct {
	nonce, challenge, redirect string
	claims                     map[string]any
}

func startFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	p := &fakeIdP{key: oidctest.NewECKey("idp"), codes: map[string]fakeCode{}, user: map[string]any{"sub": "alice", "email": "alice@example.com", "email_verified": true, "groups": []string{"staff"}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := p.srv.URL
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss, "authorization_endpoint": iss + "/authorize", "token_endpoint": iss + "/token",
			"jwks_uri": iss + "/jwks", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{p.key.JWK()}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		back, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"state": {q.Get("state")}}
		p.mu.Lock()
		if p.refuse != "" {
			v.Set("error", p.refuse)
		} else {
			code := randomString(16)
			p.codes[code] = fakeCode{nonce: q.Get("nonce"), challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), claims: p.user}
			v.Set("code", code)
		}
		p.mu.Unlock()
		back.RawQuery = v.Encode()
		http.Redirect(w, r, back.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if id, secret, ok := r.BasicAuth(); !ok || id != "portcullis" || secret != "idp-secret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		if r.PostForm.Get("grant_type") == "refresh_token" && r.PostForm.Get("refresh_token") == "idp-rt" {
			p.mu.Lock()
			p.refreshes++
			answer := map[string]any{"access_token": "idp-at-refreshed", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "idp-rt"}
			if p.refreshIDToken {
				claims := map[string]any{"iss": p.srv.URL, "aud": "portcullis", "exp": time.Now().Add(3 * time.Hour).Unix(), "iat": time.Now().Unix(), "gen": "refreshed"}
				for k, v := range p.user {
					claims[k] = v
				}
				answer["id_token"] = p.key.Sign(claims, oidctest.Type("JWT"))
			}
			p.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(answer)
			return
		}
		p.mu.Lock()
		c, ok := p.codes[r.PostForm.Get("code")]
		delete(p.codes, r.PostForm.Get("code"))
		p.mu.Unlock()
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c.challenge || r.PostForm.Get("redirect_uri") != c.redirect {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant"}`)
			return
		}
		claims := map[string]any{"iss": p.srv.URL, "aud": "portcullis", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "nonce": c.nonce}
		for k, v := range c.claims {
			claims[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		p.mu.Lock()
		exp := p.expiresIn
		p.mu.Unlock()
		if exp == 0 {
			exp = 3600
		}
		json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-at", "token_type": "Bearer", "expires_in": exp, "refresh_token": "idp-rt", "id_token": p.key.Sign(claims, oidctest.Type("JWT"))})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// testServer is an authorization server in front of a fake IdP, on an
// httptest server whose URL is the issuer; the resource is ISSUER/mcp.
type testServer struct {
	*Server
	srv    *httptest.Server
	idp    *fakeIdP
	events *eventLog
}

type eventLog struct {
	mu sync.Mutex
	ev []Event
}

func (l *eventLog) add(e Event) { l.mu.Lock(); l.ev = append(l.ev, e); l.mu.Unlock() }

func (l *eventLog) count(e Event) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, x := range l.ev {
		if x == e {
			n++
		}
	}
	return n
}

func (l *eventLog) has(e Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range l.ev {
		if x == e {
			return true
		}
	}
	return false
}

const testRedirect = "http://127.0.0.1:7777/callback"

func startServer(t *testing.T, edit ...func(*Options)) *testServer {
	t.Helper()
	return startServerDeps(t, nil, edit...)
}

// startServerDeps is startServer with deps edited too.
func startServerDeps(t *testing.T, editDeps func(*Deps), edit ...func(*Options)) *testServer {
	t.Helper()
	idp := startFakeIdP(t)
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("idp-secret\n"), 0o600)
	ts := &testServer{idp: idp, events: &eventLog{}}
	var h http.Handler
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	t.Cleanup(ts.srv.Close)
	o := Options{
		Enabled: true,
		IdP:     IdPOptions{Issuer: idp.srv.URL, ClientID: "portcullis", ClientSecretFile: secret, AllowHTTP: true},
		Clients: []ClientOptions{{ClientID: "app", Name: "Test App", RedirectURIs: []string{testRedirect}}},
		// Tests make many requests from one address; TestRateLimitPerAddress
		// sets its own.
		Rate: RateOptions{PerSecond: 1e6, Burst: 1e6},
	}
	for _, e := range edit {
		e(&o)
	}
	o.Defaults(ts.srv.URL + "/mcp")
	if err := o.Validate(ts.srv.URL + "/mcp"); err != nil {
		t.Fatal(err)
	}
	deps := Deps{Resources: []Resource{{URL: ts.srv.URL + "/mcp", Name: "root", Title: "Portcullis"}}, Scopes: []string{"mcp:tools", "mcp:admin"}, Observe: ts.events.add}
	if editDeps != nil {
		editDeps(&deps)
	}
	s, err := New(o, deps)
	if err != nil {
		t.Fatal(err)
	}
	ts.Server = s
	h = s.Handler()
	return ts
}

// browser is a user agent with cookies that does not follow redirects
// out of the test's hosts on its own: the test steps through them.
type browser struct {
	t *testing.T
	c *http.Client
}

func newBrowser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) get(u string) (*http.Response, string) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) postForm(u string, form url.Values, hdr http.Header) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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

// pkce returns a verifier and its S256 challenge.
func pkce() (verifier, challenge string) {
	verifier = randomString(32)
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeURL is a client's authorization request.
func (ts *testServer) authorizeURL(over url.Values) (string, string) {
	verifier, challenge := pkce()
	q := url.Values{
		"response_type": {"code"}, "client_id": {"app"}, "redirect_uri": {testRedirect},
		"state": {"client-state-123"}, "code_challenge": {challenge}, "code_challenge_method": {"S256"},
		"resource": {ts.srv.URL + "/mcp"}, "scope": {"mcp:tools"},
	}
	for k, v := range over {
		if v == nil {
			q.Del(k)
		} else {
			q[k] = v
		}
	}
	return ts.srv.URL + PathAuthorize + "?" + q.Encode(), verifier
}

var hiddenRE = regexp.MustCompile(`<input type="hidden" name="(\w+)" value="([^"]*)">`)

// consentForm reads the hidden fields of a consent page.
func consentForm(page string) url.Values {
	v := url.Values{}
	for _, m := range hiddenRE.FindAllStringSubmatch(page, -1) {
		v.Set(m[1], m[2])
	}
	return v
}

// signIn walks the browser from the authorization request to the consent
// page, returning the page.
func (ts *testServer) signIn(b *browser, authURL string) (*http.Response, string) {
	b.t.Helper()
	resp, body := b.get(authURL)
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("authorize: %d %s", resp.StatusCode, body)
	}
	resp, _ = b.get(resp.Header.Get("Location")) // the IdP
	if resp.StatusCode != http.StatusFound {
		b.t.Fatalf("idp: %d", resp.StatusCode)
	}
	resp, body = b.get(resp.Header.Get("Location")) // callback
	if resp.StatusCode != http.StatusSeeOther {
		b.t.Fatalf("callback: %d %s", resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	if !strings.HasPrefix(loc, PathConsent) {
		return resp, body // consent remembered: straight back to the client
	}
	return b.get(ts.srv.URL + loc)
}

// approve posts the consent form as the page would.
func (ts *testServer) approve(b *browser, page, action string) (*http.Response, string) {
	b.t.Helper()
	form := consentForm(page)
	form.Set("action", action)
	return b.postForm(ts.srv.URL+PathConsent, form, http.Header{"Origin": {ts.srv.URL}, "Sec-Fetch-Site": {"same-origin"}})
}

// codeFrom reads the code of a redirect back to the client, checking
// state and iss.
func (ts *testServer) codeFrom(t *testing.T, resp *http.Response) string {
	t.Helper()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), testRedirect) {
		t.Fatalf("not redirected to the client: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("state") != "client-state-123" || q.Get("iss") != ts.Issuer() {
		t.Fatalf("redirect back: state %q iss %q, want client-state-123 and %q", q.Get("state"), q.Get("iss"), ts.Issuer())
	}
	if q.Get("code") == "" {
		t.Fatalf("no code: %s", loc)
	}
	return q.Get("code")
}

// token calls the token endpoint.
func (ts *testServer) token(t *testing.T, form url.Values) (int, map[string]any) {
	t.Helper()
	resp, err := http.PostForm(ts.srv.URL+PathToken, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func (ts *testServer) exchange(t *testing.T, code, verifier string) (int, map[string]any) {
	return ts.token(t, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "client_id": {"app"}, "redirect_uri": {testRedirect}, "resource": {ts.srv.URL + "/mcp"}})
}

func (ts *testServer) refresh(t *testing.T, rt string) (int, map[string]any) {
	return ts.token(t, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {"app"}})
}

// fullFlow signs in, approves and exchanges the code.
func (ts *testServer) fullFlow(t *testing.T) map[string]any {
	t.Helper()
	b := newBrowser(t)
	authURL, verifier := ts.authorizeURL(nil)
	resp, page := ts.signIn(b, authURL)
	if resp.StatusCode == http.StatusOK {
		resp, _ = ts.approve(b, page, "approve")
	}
	status, tok := ts.exchange(t, ts.codeFrom(t, resp), verifier)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, tok)
	}
	return tok
}

// consentRemembered reports whether a new sign-in to app goes straight
// back to the client (the user's consent is remembered) rather than to
// the consent page.
func (ts *testServer) consentRemembered(t *testing.T) bool {
	t.Helper()
	authURL, _ := ts.authorizeURL(nil)
	resp, _ := ts.signIn(newBrowser(t), authURL)
	if resp.StatusCode == http.StatusOK {
		return false // the consent page
	}
	ts.codeFrom(t, resp)
	return true
}
