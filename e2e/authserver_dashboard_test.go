//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// TestAuthServerPanelsAndAlertsTellTheTruth runs the binary as the
// authorization server in front of a fake OpenID provider, drives known
// sign-ins through it (completed ones, refreshes, refresh token reuse,
// sign-ins the provider refuses or fails), lets a real Prometheus scrape
// it, and checks what the dashboard's "Authorization server" panels and
// the authorization server's alert expressions say about that traffic.
func TestAuthServerPanelsAndAlertsTellTheTruth(t *testing.T) {
	idp := newFakeIdP(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.json")
	secret := filepath.Join(dir, "idp-secret")
	k := oidctest.NewECKey("as-1")
	jwks, err := json.Marshal(map[string]any{"keys": []any{jwkPrivate(t, k)}})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, keys, jwks)
	writeFile(t, secret, []byte("idp-client-secret\n"))

	addr := freeLoopbackAddr(t)
	base := "http://" + addr
	resource := base + "/mcp"
	const client, redirect = "agent", "http://127.0.0.1:9/callback"
	cfg := writeConfigFile(t, map[string]any{
		"tools": map[string]any{"toolsets": []string{"core"}},
		"auth":  map[string]any{"resource": resource, "scopes_supported": []string{"mcp:tools"}},
		"authorization_server": map[string]any{
			"enabled":   true,
			"keys_file": keys,
			"rate":      map[string]any{"per_second": 1000, "burst": 1000},
			"idp": map[string]any{
				"issuer": idp.URL(), "allow_http": true,
				"client_id": "portcullis", "client_secret_file": secret,
			},
			"clients": []any{map[string]any{"client_id": client, "redirect_uris": []string{redirect}}},
			// Ask every time, so that every sign-in goes through the page.
			"consent": map[string]any{"remember_for": "-1s"},
		},
	})
	srv := startServer(t, nil, "--config", cfg, "--listen", addr)
	prom := startPrometheus(t, strings.TrimSuffix(strings.TrimPrefix(srv.MetricsURL(t), "http://"), "/metrics"))

	as := &asClient{t: t, base: base, resource: resource, client: client, redirect: redirect}
	// signIn runs one sign-in in a new browser; idpAnswer is what the
	// provider sends back to the callback: a code, "bad" (a code it will
	// not redeem) or "cancel" (the user cancelled).
	signIn := func(idpAnswer string) map[string]any {
		b := as.browser()
		state, nonce := b.authorize()
		switch idpAnswer {
		case "cancel":
			b.callback(url.Values{"state": {state}, "error": {"access_denied"}})
			return nil
		case "bad":
			b.callback(url.Values{"state": {state}, "code": {"bad"}})
			return nil
		}
		code := b.consentAndCode(b.callback(url.Values{"state": {state}, "code": {nonce}}))
		return as.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {b.verifier}, "redirect_uri": {redirect}})
	}
	refresh := func(rt string) (int, map[string]any) {
		return as.tokenStatus(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	}

	// One of each first, so that every series is in a scrape before the
	// counted traffic (the consent series, for one, is made by its first
	// event), and one check that /mcp takes the token.
	tok := signIn("ok")
	if names := toolNames(t, callOK(t, resource, modernToolsList(2), modernHeaders(tok["access_token"].(string), "tools/list", ""))); len(names) == 0 {
		t.Fatal("tools/list with the authorization server's token: no tools")
	}
	if status, _ := refresh(tok["refresh_token"].(string)); status != http.StatusOK {
		t.Fatalf("refresh: status %d", status)
	}
	signIn("bad")
	signIn("cancel")
	const wait = 30 * time.Second
	prom.await(t, `portcullis_authserver_requests_total{job="portcullis", endpoint="callback", reason="idp_refused"} > 0`, wait)
	// The panels are queried over a window that starts at t0, after every
	// priming request, and holds a scrape taken after t0 and before the
	// counted traffic: so the window's increase is exactly the counted
	// traffic, whether Prometheus scraped the series before the priming
	// or only after it.
	t0 := time.Now()
	prom.await(t, fmt.Sprintf(`timestamp(up{job="portcullis"}) > %.3f`, float64(t0.UnixMilli())/1000+0.2), wait)

	// Counted: nSignIns sign-ins, each refreshed once; nReuse of them then
	// present their first refresh token again; nBad sign-ins whose code the
	// provider does not redeem, nCancel cancelled at the provider.
	const nSignIns, nReuse, nBad, nCancel = 8, 3, 4, 2
	for i := range nSignIns {
		tok := signIn("ok")
		first := tok["refresh_token"].(string)
		if status, body := refresh(first); status != http.StatusOK {
			t.Fatalf("refresh: status %d: %v", status, body)
		}
		if i < nReuse {
			if status, body := refresh(first); status != http.StatusBadRequest {
				t.Fatalf("reused refresh token: status %d, want 400: %v", status, body)
			}
		}
	}
	for range nBad {
		signIn("bad")
	}
	for range nCancel {
		signIn("cancel")
	}
	quiet := time.Now().Add(8 * time.Second)
	prom.await(t, fmt.Sprintf(`sum(portcullis_authserver_requests_total{job="portcullis", endpoint="token", grant="authorization_code", outcome="ok"}) >= %d`, nSignIns+1), wait)
	prom.await(t, fmt.Sprintf(`sum(portcullis_authserver_requests_total{job="portcullis", reason="idp_refused"}) >= %d`, nCancel+1), wait)
	prom.await(t, fmt.Sprintf(`timestamp(up{job="portcullis"}) > %d`, quiet.Unix()), wait)

	dash, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	// From just after t0 to now, every query evaluated at that now; the
	// scrape after t0+0.2s is inside it.
	at := time.Now()
	win := at.Sub(t0) - 100*time.Millisecond
	perSecond := func(n int) float64 { return float64(n) / win.Seconds() }
	// The panels' expectations, keyed by the values of the panel's
	// grouping labels joined with a space.
	want := map[string]struct {
		labels []string
		by     map[string]check
	}{
		`panel "Authorization server requests/s by endpoint and outcome" target A`: {[]string{"endpoint", "outcome"}, map[string]check{
			"authorize ok":     rate(perSecond(nSignIns + nBad + nCancel)),
			"callback ok":      rate(perSecond(nSignIns)),
			"callback refused": rate(perSecond(nBad + nCancel)),
			"consent ok":       rate(perSecond(nSignIns)),
			"token ok":         rate(perSecond(2 * nSignIns)),
		}},
		`panel "Tokens issued/s by grant" target A`: {[]string{"grant"}, map[string]check{
			"authorization_code": rate(perSecond(nSignIns)),
			"refresh_token":      rate(perSecond(nSignIns)),
		}},
		`panel "Authorization server refusals and errors/s by endpoint and reason" target A`: {[]string{"endpoint", "reason"}, map[string]check{
			"callback sign_in":     rate(perSecond(nBad)),
			"callback idp_refused": rate(perSecond(nCancel)),
			"token refresh_reuse":  rate(perSecond(nReuse)),
		}},
		`panel "Refresh token reuse" target A`: {[]string{"instance"}, map[string]check{
			addrOf(srv.MetricsURL(t)): rate(nReuse),
		}},
		`panel "IdP sign-in failures/s by reason" target A`: {[]string{"reason"}, map[string]check{
			"sign_in":     rate(perSecond(nBad)),
			"idp_refused": rate(perSecond(nCancel)),
		}},
	}
	seen := 0
	for _, q := range dashboardQueries(t, dash) {
		w, ok := want[q.Where]
		if !ok {
			continue
		}
		seen++
		expr := strings.NewReplacer(`$job`, "portcullis", `$instance`, ".+", `$server`, ".*", `$__rate_interval`, fmt.Sprintf("%dms", win.Milliseconds())).Replace(q.Expr)
		got := map[string]float64{}
		for _, s := range prom.queryAt(t, expr, at) {
			var key []string
			for _, l := range w.labels {
				key = append(key, s.Metric[l])
			}
			v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
			if err != nil {
				t.Fatalf("%s: value %v: %v", q.Where, s.Value, err)
			}
			got[strings.Join(key, " ")] = v
		}
		for key, c := range w.by {
			v, ok := got[key]
			if !ok {
				t.Errorf("%s: no value for %q; got %v\n  %s", q.Where, key, got, expr)
				continue
			}
			if msg := c(v); msg != "" {
				t.Errorf("%s, %q: %v %s\n  %s", q.Where, key, v, msg, expr)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("found %d of the %d panel targets the test checks in %s: a panel was renamed or removed", seen, len(want), dashboardPath)
	}

	// The alerts' expressions on the same Prometheus (their "for" aside):
	// refresh token reuse is true, and so is the IdP sign-in failures'
	// (5 of 17 sign-ins failed at the provider, the warm-up's included;
	// the 3 cancelled are not failures); the store never failed.
	fires := map[string]bool{"PortcullisRefreshTokenReuse": true, "PortcullisIdPSignInFailures": true, "PortcullisAuthServerStoreErrors": false}
	for _, r := range alertRules(t) {
		want, ok := fires[r.Alert]
		if !ok {
			continue
		}
		delete(fires, r.Alert)
		if got := len(prom.query(t, r.Expr)) > 0; got != want {
			t.Errorf("alert %s: expression true = %v, want %v\n  %s", r.Alert, got, want, r.Expr)
		}
	}
	for a := range fires {
		t.Errorf("alert %s is not in %s", a, alertsPath)
	}
}

// addrOf is the host:port of a URL, the instance label Prometheus gives
// the target.
func addrOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	return u.Host
}

// jwkPrivate is k's private key as a JWKS entry, as keys_file holds it.
func jwkPrivate(t *testing.T, k *oidctest.Key) json.RawMessage {
	t.Helper()
	b, err := jose.JSONWebKey{Key: k.Signer, KeyID: k.ID, Algorithm: string(k.Alg), Use: "sig"}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fakeIdP is an OpenID provider for the authorization server to sign
// users in at: discovery and keys from oidctest, and a token endpoint
// that redeems any code but "bad" for an ID token whose nonce is the code
// (the test sends the nonce it read from the authorization URL as the
// code).
type fakeIdP struct {
	*oidctest.Issuer
	key *oidctest.Key
}

func newFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	f := &fakeIdP{key: oidctest.NewECKey("idp-1")}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	f.Issuer = oidctest.New(oidctest.Options{URL: srv.URL, Keys: []*oidctest.Key{f.key}})
	mux.Handle("/", f.Issuer)
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		code := r.PostFormValue("code")
		if code == "bad" || r.PostFormValue("code_verifier") == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		now := time.Now()
		id := f.key.Sign(f.Claims(map[string]any{
			"aud": "portcullis", "sub": "alice", "email": "alice@example.com", "email_verified": true,
			"nonce": code, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
		}), oidctest.Type("JWT"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-access", "token_type": "Bearer", "expires_in": 3600, "id_token": id})
	})
	return f
}

// asClient is an OAuth client of the authorization server under test.
type asClient struct {
	t                                *testing.T
	base, resource, client, redirect string
}

// asBrowser is one user's browser: a cookie jar, redirects not followed,
// and the client's PKCE verifier for this sign-in.
type asBrowser struct {
	*asClient
	http     *http.Client
	verifier string
}

func (c *asClient) browser() *asBrowser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	v := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("verifier-%d-%s", time.Now().UnixNano(), strings.Repeat("x", 40))))
	return &asBrowser{asClient: c, verifier: v, http: &http.Client{
		Jar:           jar,
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// do sends req and returns the response's status, Location and body.
func (b *asBrowser) do(req *http.Request) (int, *url.URL, string) {
	b.t.Helper()
	resp, err := b.http.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	loc, _ := resp.Location()
	return resp.StatusCode, loc, string(body)
}

func (b *asBrowser) get(u string) (int, *url.URL, string) {
	b.t.Helper()
	req, err := http.NewRequestWithContext(b.t.Context(), http.MethodGet, u, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// authorize starts a sign-in and returns the state and nonce the
// authorization server sent the browser to the provider with.
func (b *asBrowser) authorize() (state, nonce string) {
	b.t.Helper()
	sum := sha256.Sum256([]byte(b.verifier))
	q := url.Values{
		"response_type": {"code"}, "client_id": {b.client}, "redirect_uri": {b.redirect},
		"scope": {"mcp:tools"}, "state": {"client-state-123"}, "resource": {b.resource},
		"code_challenge": {base64.RawURLEncoding.EncodeToString(sum[:])}, "code_challenge_method": {"S256"},
	}
	status, loc, body := b.get(b.base + "/oauth/authorize?" + q.Encode())
	if status != http.StatusSeeOther || loc == nil || loc.Query().Get("nonce") == "" {
		b.t.Fatalf("authorize: status %d, Location %v, want 303 to the provider: %s", status, loc, body)
	}
	return loc.Query().Get("state"), loc.Query().Get("nonce")
}

// callback is the provider sending the browser back; it returns where
// the browser is sent next.
func (b *asBrowser) callback(q url.Values) *url.URL {
	b.t.Helper()
	status, loc, body := b.get(b.base + "/oauth/callback?" + q.Encode())
	if status != http.StatusSeeOther || loc == nil {
		b.t.Fatalf("callback: status %d, want 303: %s", status, body)
	}
	return loc
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consentAndCode approves the consent page if the browser is sent to it
// (the first sign-in of the user and client) and returns the code the
// client gets.
func (b *asBrowser) consentAndCode(next *url.URL) string {
	b.t.Helper()
	if next.Path == "/oauth/consent" {
		status, _, page := b.get(next.String())
		m := csrfField.FindStringSubmatch(page)
		if status != http.StatusOK || m == nil {
			b.t.Fatalf("consent page: status %d, no csrf field: %s", status, page)
		}
		form := url.Values{"login": {next.Query().Get("login")}, "csrf": {m[1]}, "action": {"approve"}}
		req, err := http.NewRequestWithContext(b.t.Context(), http.MethodPost, b.base+"/oauth/consent", strings.NewReader(form.Encode()))
		if err != nil {
			b.t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		var loc *url.URL
		if status, loc, page = b.do(req); status != http.StatusSeeOther || loc == nil {
			b.t.Fatalf("consent: status %d, want 303: %s", status, page)
		}
		next = loc
	}
	if code := next.Query().Get("code"); code != "" && strings.HasPrefix(next.String(), b.redirect) {
		return code
	}
	b.t.Fatalf("sent to %s, want the client's redirect URI with a code", next)
	return ""
}

// tokenStatus posts form to the token endpoint as the client.
func (c *asClient) tokenStatus(form url.Values) (int, map[string]any) {
	c.t.Helper()
	form.Set("client_id", c.client)
	form.Set("resource", c.resource)
	resp, err := http.PostForm(c.base+"/oauth/token", form)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body
}

// token is tokenStatus for a request that must succeed.
func (c *asClient) token(form url.Values) map[string]any {
	c.t.Helper()
	status, body := c.tokenStatus(form)
	if status != http.StatusOK || body["access_token"] == nil || body["refresh_token"] == nil {
		c.t.Fatalf("token: status %d: %v", status, body)
	}
	return body
}
