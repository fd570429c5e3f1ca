package upstream

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

// grantAS is a fake token endpoint of the client id/secret: it issues
// "cc-token" to the client-credentials grant and answers the other grants
// with answer, which sees the request's form; forms records them.
type grantAS struct {
	id, secret string
	answer     func(form url.Values) (status int, body string)
	mu         sync.Mutex
	forms      []url.Values
}

func (a *grantAS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	if id, sec, ok := r.BasicAuth(); !ok || id != a.id || sec != a.secret {
		w.WriteHeader(401)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	if r.PostForm.Get("grant_type") == "client_credentials" {
		fmt.Fprint(w, `{"access_token":"cc-token","token_type":"Bearer","expires_in":3600}`)
		return
	}
	a.mu.Lock()
	a.forms = append(a.forms, r.PostForm)
	a.mu.Unlock()
	status, body := a.answer(r.PostForm)
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func (a *grantAS) sent() []url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]url.Values(nil), a.forms...)
}

func secretFile(t *testing.T, secret string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(f, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// grantFixture is an http upstream whose tool "who" answers with the
// Authorization header it got, behind the manager of opts; subjects
// records the token types the grant asked the SubjectToken hook for.
type grantFixture struct {
	u        *proxy
	up       *authUpstream
	logs     *bytes.Buffer
	logMu    *sync.Mutex
	mu       sync.Mutex
	subjects []string
}

func startGrantFixture(t *testing.T, oauth func(upstreamURL string) OAuthOptions) *grantFixture {
	t.Helper()
	g := &grantFixture{up: &authUpstream{}, logs: &bytes.Buffer{}, logMu: &sync.Mutex{}}
	upSrv := httptest.NewServer(g.up.handler())
	t.Cleanup(upSrv.Close)
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: g.logs, mu: g.logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFront(t)
	m, err := New([]Options{{Name: "x", Transport: TransportHTTP, URL: upSrv.URL, Required: true, MaxProcesses: 4, OAuth: oauth(upSrv.URL)}},
		f.cat, Deps{Backoff: fastBackoff, Logger: logger, SubjectToken: func(ti *sdkauth.TokenInfo, want string) (string, string, bool) {
			g.mu.Lock()
			g.subjects = append(g.subjects, want)
			g.mu.Unlock()
			s, ok := ti.Extra[rawKey].(string)
			return s, want, ok && s != ""
		}})
	if err != nil {
		t.Fatal(err)
	}
	g.u = m.ups[0]
	if g.u.opts.Isolation != IsolationPerPrincipal {
		t.Fatalf("isolation defaulted to %q", g.u.opts.Isolation)
	}
	m.Start(context.Background())
	t.Cleanup(func() { within(t, "Manager.Close", func() { m.Close() }) })
	waitFor(t, "the listing session", func() bool { return m.Ready(context.Background()) == nil })
	return g
}

// check fails t when a caller's own token or a secret reached the
// upstream or a log line, or the listing session did not use the
// client-credentials token.
func (g *grantFixture) check(t *testing.T, secrets ...string) {
	t.Helper()
	var sawCC bool
	for _, a := range g.up.requests() {
		if strings.Contains(a, "RAW-") || a == "" {
			t.Errorf("the upstream received Authorization %q", a)
		}
		sawCC = sawCC || a == "Bearer cc-token"
	}
	if !sawCC {
		t.Error("the listing session did not use the client-credentials token")
	}
	g.logMu.Lock()
	defer g.logMu.Unlock()
	for _, s := range append(secrets, "RAW-") {
		if strings.Contains(g.logs.String(), s) {
			t.Errorf("%s was logged:\n%s", s, g.logs)
		}
	}
}

func TestGrantJWTBearerOnBehalfOf(t *testing.T) {
	var n int
	idp := &grantAS{id: "portcullis", secret: "s3cret", answer: func(f url.Values) (int, string) {
		a := f.Get("assertion")
		if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || f.Get("requested_token_use") != "on_behalf_of" ||
			f.Get("scope") != "api://tickets/.default" || !strings.HasPrefix(a, "RAW-") || a == "RAW-denied" {
			return 400, `{"error":"invalid_grant","error_description":"AADSTS50013: Assertion failed signature validation for ` + a + `"}`
		}
		n++
		return 200, fmt.Sprintf(`{"access_token":"obo-%s-%d","token_type":"Bearer","expires_in":3600,"scope":"api://tickets/.default"}`, strings.TrimPrefix(a, "RAW-"), n)
	}}
	idpSrv := httptest.NewServer(idp)
	defer idpSrv.Close()
	g := startGrantFixture(t, func(string) OAuthOptions {
		return OAuthOptions{Grant: GrantJWTBearer, TokenURL: idpSrv.URL, ClientID: "portcullis", ClientSecretFile: secretFile(t, "s3cret"), Scopes: []string{"api://tickets/.default"}}
	})

	alice := text(callWithToken(t, g.u, "alice", "RAW-alice"))
	bob := text(callWithToken(t, g.u, "bob", "RAW-bob"))
	if alice != "Bearer obo-alice-1" || bob != "Bearer obo-bob-2" {
		t.Fatalf("the upstream saw %q for alice and %q for bob; want their on-behalf-of tokens", alice, bob)
	}
	if again := text(callWithToken(t, g.u, "alice", "RAW-alice")); again != alice || len(idp.sent()) != 2 {
		t.Errorf("alice's second call saw %q after %d grants; want the cached token after 2", again, len(idp.sent()))
	}
	if f := idp.sent()[0]; len(f) != 4 || f.Has("subject_token") || f.Has("audience") {
		t.Errorf("the on-behalf-of request's form: %v", f.Encode())
	}
	res := callWithToken(t, g.u, "dora", "RAW-denied")
	if msg := text(res); !res.IsError || !strings.Contains(msg, "the identity provider did not issue a token") || !strings.Contains(msg, "(invalid_grant)") || strings.Contains(msg, "RAW-") {
		t.Errorf("a refused grant: %q", msg)
	}
	g.mu.Lock()
	for _, w := range g.subjects {
		if w != TokenTypeAccessToken {
			t.Errorf("the grant asked for a subject token of type %s, want the access token", w)
		}
	}
	g.mu.Unlock()
	g.check(t, "obo-", "s3cret")
}

func TestGrantIDJAG(t *testing.T) {
	var upstreamURL string
	idp := &grantAS{id: "portcullis-idp", secret: "idp-s3cret", answer: func(f url.Values) (int, string) {
		sub := f.Get("subject_token")
		if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || f.Get("requested_token_type") != "urn:ietf:params:oauth:token-type:id-jag" ||
			f.Get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token" || f.Get("audience") != "https://as.example" ||
			f.Get("resource") != upstreamURL || f.Get("scope") != "tickets:read" || !strings.HasPrefix(sub, "RAW-") || sub == "RAW-denied" {
			return 400, `{"error":"invalid_grant","error_description":"no ID-JAG for ` + sub + `"}`
		}
		return 200, `{"access_token":"IDJAG-` + strings.TrimPrefix(sub, "RAW-") + `","issued_token_type":"urn:ietf:params:oauth:token-type:id-jag","token_type":"N_A","expires_in":300}`
	}}
	idpSrv := httptest.NewServer(idp)
	defer idpSrv.Close()
	var n int
	as := &grantAS{id: "portcullis", secret: "s3cret", answer: func(f url.Values) (int, string) {
		a := f.Get("assertion")
		if f.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || !strings.HasPrefix(a, "IDJAG-") || a == "IDJAG-revoked" {
			return 400, `{"error":"invalid_grant","error_description":"replayed ` + a + `"}`
		}
		n++
		return 200, fmt.Sprintf(`{"access_token":"at-%s-%d","token_type":"Bearer","expires_in":900}`, strings.TrimPrefix(a, "IDJAG-"), n)
	}}
	asSrv := httptest.NewServer(as)
	defer asSrv.Close()
	g := startGrantFixture(t, func(u string) OAuthOptions {
		upstreamURL = u // the resource defaults to url
		return OAuthOptions{Grant: GrantIDJAG, TokenURL: asSrv.URL, ClientID: "portcullis", ClientSecretFile: secretFile(t, "s3cret"),
			Audience: "https://as.example", Scopes: []string{"tickets:read"},
			IdentityProvider: IdentityProviderOptions{TokenURL: idpSrv.URL, ClientID: "portcullis-idp", ClientSecretFile: secretFile(t, "idp-s3cret")}}
	})

	alice := text(callWithToken(t, g.u, "alice", "RAW-alice"))
	bob := text(callWithToken(t, g.u, "bob", "RAW-bob"))
	if alice != "Bearer at-alice-1" || bob != "Bearer at-bob-2" {
		t.Fatalf("the upstream saw %q for alice and %q for bob; want the tokens of their ID-JAGs", alice, bob)
	}
	if again := text(callWithToken(t, g.u, "alice", "RAW-alice")); again != alice || len(idp.sent()) != 2 || len(as.sent()) != 2 {
		t.Errorf("alice's second call saw %q after %d and %d requests; want the cached token after 2 each", again, len(idp.sent()), len(as.sent()))
	}
	if f := as.sent()[0]; len(f) != 2 || f.Get("assertion") != "IDJAG-alice" {
		t.Errorf("the jwt-bearer request's form: %v", f.Encode())
	}

	for _, c := range []struct{ user, raw, server string }{
		{"dora", "RAW-denied", "the identity provider"},
		{"erin", "RAW-revoked", "the upstream's authorization server"},
	} {
		res := callWithToken(t, g.u, c.user, c.raw)
		if msg := text(res); !res.IsError || !strings.Contains(msg, c.server+" did not issue a token") || !strings.Contains(msg, "(invalid_grant)") ||
			strings.Contains(msg, "RAW-") || strings.Contains(msg, "IDJAG-") {
			t.Errorf("%s's refused grant: %q", c.user, msg)
		}
	}
	g.mu.Lock()
	for _, w := range g.subjects {
		if w != TokenTypeIDToken {
			t.Errorf("the grant asked for a subject token of type %s, want the ID token", w)
		}
	}
	g.mu.Unlock()
	g.check(t, "IDJAG-", "at-alice", "s3cret")
}

func TestValidateUserGrants(t *testing.T) {
	secret := secretFile(t, "s")
	idp := IdentityProviderOptions{TokenURL: "https://idp/token", ClientID: "pc", ClientSecretFile: secret}
	tests := []struct {
		name string
		list []Options
		want []string
	}{
		{name: "ok", list: []Options{
			{Name: "obo", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{Grant: "jwt_bearer", TokenURL: "https://idp/token", ClientID: "pc", ClientSecretFile: secret, Scopes: []string{"api://x/.default"}}},
			{Name: "jag", Transport: "http", URL: "https://y/mcp", OAuth: OAuthOptions{Grant: "id_jag", TokenURL: "https://as/token", ClientID: "pc", ClientSecretFile: secret, Audience: "https://as", IdentityProvider: idp}},
		}},
		{name: "jwt_bearer", list: []Options{
			{Name: "o1", Transport: "http", URL: "https://x/mcp", Isolation: "shared", OAuth: OAuthOptions{Grant: "jwt_bearer", TokenURL: "https://idp/token", ClientID: "pc", ClientSecretFile: secret, Audience: "a", IdentityProvider: idp}},
		}, want: []string{
			`[0].isolation: shared cannot be used with oauth.grant jwt_bearer`,
			`[0].oauth.grant: audience and requested_token_type apply only to token_exchange`,
			`[0].oauth.scopes: required with oauth.grant jwt_bearer`,
			`[0].oauth.identity_provider: applies only to oauth.grant id_jag`,
		}},
		{name: "id_jag", list: []Options{
			{Name: "j1", Transport: "http", URL: "https://x/mcp", Isolation: "shared", OAuth: OAuthOptions{Grant: "id_jag", TokenURL: "https://as/token", ClientID: "pc", ClientSecretFile: secret, RequestedTokenType: "urn:ietf:params:oauth:token-type:access_token"}},
			{Name: "j2", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{Grant: "id_jag", TokenURL: "https://as/token", ClientID: "pc", ClientSecretFile: secret, Audience: "https://as",
				IdentityProvider: IdentityProviderOptions{TokenURL: "ftp://idp", ClientSecretFile: "/does/not/exist"}}},
			{Name: "j3", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{Grant: "client_credentials", TokenURL: "https://as/token", ClientID: "pc", ClientSecretFile: secret, IdentityProvider: idp}},
		}, want: []string{
			`[0].isolation: shared cannot be used with oauth.grant id_jag`,
			`[0].oauth.requested_token_type: applies only to token_exchange`,
			`[0].oauth.audience: required with oauth.grant id_jag: the issuer of the upstream's authorization server`,
			`[0].oauth.identity_provider.token_url: required with oauth.grant id_jag`,
			`[0].oauth.identity_provider.client_id: required with oauth.grant id_jag`,
			`[0].oauth.identity_provider.client_secret_file: required with oauth.grant id_jag`,
			`[1].oauth.identity_provider.token_url: must be an absolute http or https URL`,
			`[1].oauth.identity_provider.client_secret_file: reading /does/not/exist`,
			`[2].oauth.identity_provider: applies only to oauth.grant id_jag`,
		}},
		{name: "identity_provider alone", list: []Options{
			{Name: "i", Transport: "http", URL: "https://x/mcp", OAuth: OAuthOptions{IdentityProvider: idp}},
		}, want: []string{`[0].oauth.token_url: required when other oauth keys are set`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Validate(tt.list)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate = nil, want errors")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%v", w, err)
				}
			}
		})
	}
}
