package authserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// enterprise is an enterprise IdP for the ID-JAG tests: discovery and a
// JWKS on a loopback httptest server, and the key that signs its
// assertions.
type enterprise struct {
	*oidctest.Issuer
	key *oidctest.Key
}

// startIDJAG starts an authorization server that trusts one enterprise
// IdP (edit may change its options), with its log captured.
func startIDJAG(t *testing.T, edit ...func(*Options)) (*testServer, *enterprise, *syncbuf.Buffer) {
	t.Helper()
	return startIDJAGDeps(t, nil, edit...)
}

// startIDJAGDeps is startIDJAG with deps edited too.
func startIDJAGDeps(t *testing.T, editDeps func(*Deps), edit ...func(*Options)) (*testServer, *enterprise, *syncbuf.Buffer) {
	t.Helper()
	e := &enterprise{key: oidctest.NewECKey("ent-1")}
	e.Issuer = oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{e.key}})
	trust := func(o *Options) {
		o.EnterpriseIdPs = []EnterpriseIdPOptions{{Issuer: e.URL(), AllowHTTP: true}}
	}
	ts := startServerDeps(t, editDeps, append([]func(*Options){trust}, edit...)...)
	logs := &syncbuf.Buffer{}
	ts.logger = slog.New(slog.NewJSONHandler(logs, nil)) // before any request
	return ts, e, logs
}

// claims are those of a valid ID-JAG for ts and the client "app", with
// over applied as oidctest.Override does.
func (e *enterprise) claims(ts *testServer, over map[string]any) map[string]any {
	now := time.Now()
	return oidctest.Override(map[string]any{
		"iss": e.URL(), "sub": "bob", "aud": ts.Issuer(), "client_id": "app",
		"jti": randomString(12), "iat": now.Unix(), "exp": now.Add(4 * time.Minute).Unix(),
		"resource": ts.srv.URL + "/mcp", "scope": "mcp:tools",
		"email": "bob@example.com", "groups": []string{"eng", "oncall"},
	}, over)
}

// resolve returns over with the placeholders ISSUER, RESOURCE, TOKEN_URL
// and SIGNIN_IDP in its strings and lists replaced by ts's URLs.
func resolve(ts *testServer, over map[string]any) map[string]any {
	r := strings.NewReplacer("TOKEN_URL", ts.Issuer()+PathToken, "SIGNIN_IDP", ts.idp.srv.URL, "ISSUER", ts.Issuer(), "RESOURCE", ts.srv.URL+"/mcp")
	out := map[string]any{}
	for k, v := range over {
		switch v := v.(type) {
		case string:
			out[k] = r.Replace(v)
		case []string:
			l := make([]string, len(v))
			for i := range v {
				l[i] = r.Replace(v[i])
			}
			out[k] = l
		default:
			out[k] = v
		}
	}
	return out
}

// assertion is a signed ID-JAG of claims.
func (e *enterprise) assertion(claims map[string]any) string {
	return e.key.Sign(claims, oidctest.Type(idjagType))
}

// present exchanges assertion at ts's token endpoint for the client
// "app"; form overrides the request's parameters (nil deletes one).
func (ts *testServer) present(t *testing.T, assertion string, form url.Values) (int, map[string]any) {
	t.Helper()
	f := url.Values{"grant_type": {grantJWTBearer}, "assertion": {assertion}, "client_id": {"app"}}
	for k, v := range form {
		if v == nil {
			f.Del(k)
		} else {
			f[k] = v
		}
	}
	return ts.token(t, f)
}

func TestIDJAGIssuesAnAccessToken(t *testing.T) {
	ts, e, logs := startIDJAG(t)
	assertion := e.assertion(e.claims(ts, nil))
	status, tok := ts.present(t, assertion, nil)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, tok)
	}
	if tok["token_type"] != "bearer" || tok["scope"] != "mcp:tools" || tok["resource"] != ts.srv.URL+"/mcp" {
		t.Errorf("token response = %v, want a bearer token for mcp:tools and the resource", tok)
	}
	if tok["refresh_token"] != nil {
		t.Errorf("a refresh token came with an ID-JAG grant: %v", tok)
	}
	if in, _ := tok["expires_in"].(float64); in <= 0 || time.Duration(in)*time.Second > DefaultAccessTokenTTL {
		t.Errorf("expires_in = %v, want about %s", tok["expires_in"], DefaultAccessTokenTTL)
	}
	at, _ := tok["access_token"].(string)
	header, claims := decodeJWT(t, at)
	if header["typ"] != "at+jwt" || header["alg"] != "ES256" || header["kid"] != ts.keys.signer().KeyID {
		t.Errorf("header = %v, want typ at+jwt, alg ES256, the signing kid", header)
	}
	want := map[string]any{"iss": ts.Issuer(), "sub": "bob", "client_id": "app", "scope": "mcp:tools", "email": "bob@example.com"}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	if aud, _ := claims["aud"].([]any); len(aud) != 1 || aud[0] != ts.srv.URL+"/mcp" {
		t.Errorf("aud = %v, want [the resource]", claims["aud"])
	}
	if g, _ := claims["groups"].([]any); len(g) != 2 || g[0] != "eng" || g[1] != "oncall" {
		t.Errorf("groups = %v, want [eng oncall]", claims["groups"])
	}
	// The key set /mcp verifies with accepts it.
	v := oidc.NewVerifier(ts.Issuer(), ts.KeySet(), &oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: []string{"ES256"}})
	if _, err := v.Verify(context.Background(), at); err != nil {
		t.Errorf("verify: %v", err)
	}
	if !ts.events.has(Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "ok"}) {
		t.Error("no token ok event for the jwt-bearer grant")
	}
	log := logs.String()
	if !strings.Contains(log, `"event":"assertion_accepted"`) || !strings.Contains(log, `"idp":"`+e.URL()+`"`) {
		t.Errorf("no assertion_accepted audit line naming the IdP:\n%s", log)
	}
	if sig := assertion[strings.LastIndexByte(assertion, '.')+1:]; strings.Contains(log, sig) || strings.Contains(log, at[strings.LastIndexByte(at, '.')+1:]) {
		t.Errorf("the log holds the assertion or the token:\n%s", log)
	}
}

func TestIDJAGGrantsScopes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		claim   any    // the assertion's scope claim; nil: none
		request string // the request's scope parameter
		want    string // the granted scope
	}{
		{"the assertion's", "mcp:tools mcp:admin", "", "mcp:tools mcp:admin"},
		{"the requested part of the assertion's", "mcp:tools mcp:admin", "mcp:admin", "mcp:admin"},
		{"requested, the assertion naming none", nil, "mcp:admin", "mcp:admin"},
		{"none asked, none granted", nil, "", ""},
		{"a scope of a rule for another group withheld", "mcp:tools mcp:admin", "", "mcp:tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var edit []func(*Options)
			if strings.Contains(tc.name, "rule") {
				// bob is in eng and oncall, not admins.
				edit = append(edit, func(o *Options) { o.Scopes = []ScopeRule{{Scope: "mcp:admin", Groups: []string{"admins"}}} })
			}
			ts, e, _ := startIDJAG(t, edit...)
			form := url.Values{}
			if tc.request != "" {
				form.Set("scope", tc.request)
			}
			status, tok := ts.present(t, e.assertion(e.claims(ts, map[string]any{"scope": tc.claim})), form)
			if status != http.StatusOK {
				t.Fatalf("%d %v", status, tok)
			}
			_, claims := decodeJWT(t, tok["access_token"].(string))
			if got, _ := claims["scope"].(string); got != tc.want {
				t.Errorf("scope claim = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestIDJAGAcceptsTheFormsTheDraftAllows(t *testing.T) {
	for _, tc := range []struct {
		name string
		over map[string]any
		sign func(e *enterprise, claims map[string]any) string
	}{
		{name: "typ with application/, in capitals", sign: func(e *enterprise, c map[string]any) string {
			return e.key.Sign(c, oidctest.Type("application/OAUTH-ID-JAG+JWT"))
		}},
		{name: "aud as a one-element array", over: map[string]any{"aud": []string{"ISSUER"}}},
		{name: "resource as a one-element array", over: map[string]any{"resource": []string{"RESOURCE"}}},
		{name: "fractional times", over: map[string]any{"iat": float64(time.Now().Unix()) + 0.5, "exp": float64(time.Now().Add(time.Minute).Unix()) + 0.25}},
		{name: "a minute of clock skew", over: map[string]any{"iat": time.Now().Add(30 * time.Second).Unix(), "exp": time.Now().Add(-30 * time.Second).Add(5 * time.Minute).Unix()}},
		{name: "exp just past, within the skew", over: map[string]any{"iat": time.Now().Add(-4 * time.Minute).Unix(), "exp": time.Now().Add(-30 * time.Second).Unix()}},
		{name: "unverified email is not the user's", over: map[string]any{"email_verified": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, e, _ := startIDJAG(t)
			claims := e.claims(ts, resolve(ts, tc.over))
			sign := tc.sign
			if sign == nil {
				sign = (*enterprise).assertion
			}
			status, tok := ts.present(t, sign(e, claims), nil)
			if status != http.StatusOK {
				t.Fatalf("%d %v", status, tok)
			}
			_, at := decodeJWT(t, tok["access_token"].(string))
			if wantEmail := claims["email_verified"] != false; (at["email"] == "bob@example.com") != wantEmail {
				t.Errorf("email claim %v, want it %v", at["email"], wantEmail)
			}
		})
	}
}

func TestIDJAGWithoutResourceIsBoundToThisOne(t *testing.T) {
	ts, e, _ := startIDJAG(t)
	status, tok := ts.present(t, e.assertion(e.claims(ts, map[string]any{"resource": nil})), nil)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, tok)
	}
	if _, claims := decodeJWT(t, tok["access_token"].(string)); !strings.Contains(toJSON(claims["aud"]), `"`+ts.srv.URL+`/mcp"`) {
		t.Errorf("aud = %v, want the resource", claims["aud"])
	}
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestIDJAGRefusals(t *testing.T) {
	hs256 := func(in []byte) []byte { m := hmac.New(sha256.New, []byte("secret")); m.Write(in); return m.Sum(nil) }
	for _, tc := range []struct {
		name string
		opts func(*Options) // the server's options; nil: the defaults
		// claims are changed by over, then signed by sign (nil: the IdP's
		// key, typ oauth-id-jag+jwt).
		over map[string]any
		sign func(e *enterprise, claims map[string]any) string
		form url.Values // request parameters changed (nil deletes)
		// status and error of the refusal; reason is the Event's.
		status        int
		error, reason string
	}{
		{name: "wrong typ", sign: func(e *enterprise, c map[string]any) string { return e.key.Sign(c, oidctest.Type("JWT")) }, error: "invalid_grant", reason: "typ"},
		{name: "access token typ", sign: func(e *enterprise, c map[string]any) string { return e.key.Sign(c) }, error: "invalid_grant", reason: "typ"},
		{name: "no typ", sign: func(e *enterprise, c map[string]any) string { return e.key.Sign(c, oidctest.Type("")) }, error: "invalid_grant", reason: "typ"},
		{name: "wrong aud", over: map[string]any{"aud": "https://other-as.example"}, error: "invalid_grant", reason: "audience"},
		{name: "aud is the token endpoint", over: map[string]any{"aud": "TOKEN_URL"}, error: "invalid_grant", reason: "audience"},
		{name: "aud with another besides", over: map[string]any{"aud": []string{"ISSUER", "https://other-as.example"}}, error: "invalid_grant", reason: "audience"},
		{name: "no aud", over: map[string]any{"aud": nil}, error: "invalid_grant", reason: "audience"},
		{name: "unknown issuer", over: map[string]any{"iss": "https://idp.evil.example"}, error: "invalid_grant", reason: "unknown_issuer"},
		{name: "the sign-in IdP is not an enterprise IdP", over: map[string]any{"iss": "SIGNIN_IDP"}, error: "invalid_grant", reason: "unknown_issuer"},
		{name: "bad signature", sign: func(e *enterprise, c map[string]any) string { return oidctest.AlterSignature(e.assertion(c)) }, error: "invalid_grant", reason: "signature"},
		{name: "a key the IdP does not publish", sign: func(_ *enterprise, c map[string]any) string {
			return oidctest.NewECKey("ent-1").Sign(c, oidctest.Type(idjagType))
		}, error: "invalid_grant", reason: "signature"},
		{name: "alg none", sign: func(_ *enterprise, c map[string]any) string {
			return oidctest.Forge(map[string]any{"alg": "none", "typ": idjagType}, c, func([]byte) []byte { return nil })
		}, error: "invalid_grant", reason: "malformed"},
		{name: "HMAC", sign: func(_ *enterprise, c map[string]any) string {
			return oidctest.Forge(map[string]any{"alg": "HS256", "typ": idjagType, "kid": "ent-1"}, c, hs256)
		}, error: "invalid_grant", reason: "malformed"},
		{name: "HMAC keyed with the IdP's public key", sign: func(e *enterprise, c map[string]any) string {
			return oidctest.Forge(map[string]any{"alg": "HS256", "typ": idjagType, "kid": "ent-1"}, c, oidctest.HMACWithPublicKey(e.key))
		}, error: "invalid_grant", reason: "malformed"},
		{name: "not a JWT", sign: func(*enterprise, map[string]any) string { return "not-a-jwt" }, error: "invalid_grant", reason: "malformed"},
		{name: "no assertion", form: url.Values{"assertion": nil}, error: "invalid_request", reason: "invalid_request"},
		{name: "wrong client_id", over: map[string]any{"client_id": "other-app"}, error: "invalid_grant", reason: "client"},
		{name: "no client_id", over: map[string]any{"client_id": nil}, error: "invalid_grant", reason: "client"},
		{name: "client not allowed for this IdP", opts: func(o *Options) {
			o.Clients = append(o.Clients, ClientOptions{ClientID: "app2", RedirectURIs: []string{testRedirect}})
			o.EnterpriseIdPs[0].Clients = []string{"app2"}
		}, error: "invalid_grant", reason: "client"},
		{name: "unknown client", form: url.Values{"client_id": {"nobody"}}, status: http.StatusUnauthorized, error: "invalid_client", reason: "invalid_client"},
		{name: "no client", form: url.Values{"client_id": nil}, error: "invalid_request", reason: "invalid_request"},
		{name: "another resource", over: map[string]any{"resource": "https://other.example/mcp"}, error: "invalid_grant", reason: "resource"},
		{name: "resources besides this one", over: map[string]any{"resource": []string{"RESOURCE", "https://other.example/mcp"}}, error: "invalid_grant", reason: "resource"},
		{name: "resource parameter of another", form: url.Values{"resource": {"https://other.example/mcp"}}, error: "invalid_target", reason: "invalid_target"},
		{name: "audience parameter of another", form: url.Values{"audience": {"https://other.example/mcp"}}, error: "invalid_target", reason: "invalid_target"},
		{name: "expired", over: map[string]any{"iat": time.Now().Add(-8 * time.Minute).Unix(), "exp": time.Now().Add(-4 * time.Minute).Unix()}, error: "invalid_grant", reason: "expired"},
		{name: "exp too far", over: map[string]any{"exp": time.Now().Add(time.Hour).Unix()}, error: "invalid_grant", reason: "lifetime"},
		{name: "exp too far from an iat in the past", over: map[string]any{"iat": time.Now().Add(-time.Hour).Unix()}, error: "invalid_grant", reason: "lifetime"},
		{name: "iat in the future", over: map[string]any{"iat": time.Now().Add(3 * time.Minute).Unix()}, error: "invalid_grant", reason: "lifetime"},
		{name: "nbf in the future", over: map[string]any{"nbf": time.Now().Add(3 * time.Minute).Unix()}, error: "invalid_grant", reason: "lifetime"},
		{name: "no exp", over: map[string]any{"exp": nil}, error: "invalid_grant", reason: "malformed"},
		{name: "no iat", over: map[string]any{"iat": nil}, error: "invalid_grant", reason: "malformed"},
		{name: "exp not a number", over: map[string]any{"exp": "tomorrow"}, error: "invalid_grant", reason: "malformed"},
		{name: "exp out of range", over: map[string]any{"exp": 1e300}, error: "invalid_grant", reason: "malformed"},
		{name: "iat out of range", over: map[string]any{"iat": -1e300}, error: "invalid_grant", reason: "malformed"},
		{name: "no jti", over: map[string]any{"jti": nil}, error: "invalid_grant", reason: "malformed"},
		{name: "missing sub", over: map[string]any{"sub": nil}, error: "invalid_grant", reason: "subject"},
		{name: "scope claim outside the server's", over: map[string]any{"scope": "mcp:tools root"}, error: "invalid_grant", reason: "scope"},
		{name: "scope parameter outside the server's", form: url.Values{"scope": {"root"}}, error: "invalid_scope", reason: "scope"},
		{name: "scope parameter beyond the assertion's", form: url.Values{"scope": {"mcp:tools mcp:admin"}}, error: "invalid_scope", reason: "scope"},
		{name: "bound to a key (cnf)", over: map[string]any{"cnf": map[string]any{"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, error: "invalid_grant", reason: "unsupported"},
		{name: "authorization_details", over: map[string]any{"authorization_details": []any{map[string]any{"type": "x"}}}, error: "invalid_grant", reason: "unsupported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var edit []func(*Options)
			if tc.opts != nil {
				edit = append(edit, tc.opts)
			}
			ts, e, logs := startIDJAG(t, edit...)
			claims := e.claims(ts, resolve(ts, tc.over))
			sign := tc.sign
			if sign == nil {
				sign = (*enterprise).assertion
			}
			assertion := sign(e, claims)
			status, body := ts.present(t, assertion, tc.form)
			want := tc.status
			if want == 0 {
				want = http.StatusBadRequest
			}
			if status != want || body["error"] != tc.error {
				t.Fatalf("%d %v, want %d %s", status, body, want, tc.error)
			}
			if body["access_token"] != nil {
				t.Fatal("an access token came with the error")
			}
			if ev := (Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "refused", Reason: tc.reason}); !ts.events.has(ev) {
				t.Errorf("no event %+v; events %+v", ev, ts.events.ev)
			}
			if sig := assertion[strings.LastIndexByte(assertion, '.')+1:]; len(sig) > 8 && strings.Contains(logs.String(), sig) {
				t.Errorf("the log holds the assertion:\n%s", logs.String())
			}
			// A refused assertion was not burnt by the refusal of another
			// check: unchanged, it still works where it was valid.
			if tc.over == nil && tc.sign == nil && tc.opts == nil {
				if status, body := ts.present(t, assertion, nil); status != http.StatusOK {
					t.Errorf("the assertion refused for its request no longer works: %d %v", status, body)
				}
			}
		})
	}
}

func TestIDJAGIsSingleUse(t *testing.T) {
	t.Run("replayed jti", func(t *testing.T) {
		ts, e, logs := startIDJAG(t)
		assertion := e.assertion(e.claims(ts, nil))
		if status, body := ts.present(t, assertion, nil); status != http.StatusOK {
			t.Fatalf("first: %d %v", status, body)
		}
		if status, body := ts.present(t, assertion, nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("replay: %d %v, want 400 invalid_grant", status, body)
		}
		if !ts.events.has(Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "refused", Reason: "replay"}) {
			t.Error("no replay event")
		}
		if !strings.Contains(logs.String(), `"event":"assertion_refused","reason":"replay"`) {
			t.Errorf("no audit line of the replay:\n%s", logs.String())
		}
	})
	t.Run("same jti, new signature", func(t *testing.T) {
		ts, e, _ := startIDJAG(t)
		claims := e.claims(ts, nil)
		if status, body := ts.present(t, e.assertion(claims), nil); status != http.StatusOK {
			t.Fatalf("first: %d %v", status, body)
		}
		claims["iat"] = time.Now().Unix() + 1 // another JWT, the same jti
		if status, body := ts.present(t, e.assertion(claims), nil); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
			t.Fatalf("same jti: %d %v, want 400 invalid_grant", status, body)
		}
	})
	t.Run("raced", func(t *testing.T) {
		ts, e, _ := startIDJAG(t)
		assertion := e.assertion(e.claims(ts, nil))
		const n = 8
		var wg sync.WaitGroup
		statuses := make(chan int, n)
		for range n {
			wg.Go(func() {
				status, _ := ts.present(t, assertion, nil)
				statuses <- status
			})
		}
		wg.Wait()
		close(statuses)
		ok := 0
		for s := range statuses {
			if s == http.StatusOK {
				ok++
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d concurrent presentations got a token, want 1", ok, n)
		}
	})
}

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func (c *fakeClock) set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// useClock makes the ID-JAG handler of ts run on a fake clock, starting
// now.
func useClock(t *testing.T, ts *testServer) *fakeClock {
	c := &fakeClock{t: time.Now()}
	idjagHandlerOf(t, ts).now = c.now
	return c
}

func TestIDJAGIdPUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		jwksURL bool // configured, so no discovery
	}{{"discovery", false}, {"JWKS", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var edit []func(*Options)
			if tc.jwksURL {
				edit = append(edit, func(o *Options) { o.EnterpriseIdPs[0].JWKSURL = o.EnterpriseIdPs[0].Issuer + "/jwks" })
			}
			ts, e, logs := startIDJAG(t, edit...)
			clock := useClock(t, ts)
			e.SetFailure(oidctest.BadGateway)
			for i := range 3 {
				status, body := ts.present(t, e.assertion(e.claims(ts, nil)), nil)
				if status != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
					t.Fatalf("IdP down, request %d: %d %v, want 503 temporarily_unavailable", i, status, body)
				}
			}
			if !ts.events.has(Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "error", Reason: "idp_unavailable"}) {
				t.Error("no idp_unavailable event")
			}
			if n := e.JWKSFetches(); tc.jwksURL && n != 1 {
				t.Errorf("%d JWKS fetches for three requests while the IdP is down, want 1", n)
			}
			if n := strings.Count(logs.String(), `"level":"ERROR"`); n != 1 {
				t.Errorf("%d error lines for three requests while the IdP is down, want 1 (one fetch):\n%s", n, logs.String())
			}
			// Back up: not tried again within the interval, then tried.
			e.SetFailure(oidctest.Up)
			if status, body := ts.present(t, e.assertion(e.claims(ts, nil)), nil); status != http.StatusServiceUnavailable {
				t.Fatalf("IdP back, within the interval: %d %v, want 503 (not asked again yet)", status, body)
			}
			clock.add(jwksRefreshInterval + time.Second)
			if status, body := ts.present(t, e.assertion(e.claims(ts, nil)), nil); status != http.StatusOK {
				t.Fatalf("IdP back: %d %v", status, body)
			}
		})
	}
}

func TestIDJAGWithJWKSURL(t *testing.T) {
	key := oidctest.NewECKey("ent-2")
	is := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{key}, Discovery: oidctest.NoDiscovery})
	ts := startServer(t, func(o *Options) {
		o.EnterpriseIdPs = []EnterpriseIdPOptions{{Issuer: is.URL(), JWKSURL: is.JWKSURL(), AllowHTTP: true}}
	})
	e := &enterprise{Issuer: is, key: key}
	if status, body := ts.present(t, e.assertion(e.claims(ts, nil)), nil); status != http.StatusOK {
		t.Fatalf("%d %v", status, body)
	}
}

func TestIDJAGMetadata(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
	}{{"off without enterprise_idps", false}, {"on with them", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var ts *testServer
			if tc.on {
				ts, _, _ = startIDJAG(t)
			} else {
				ts = startServer(t)
			}
			resp, err := http.Get(ts.srv.URL + PathMetadata)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			grants := toJSON(m["grant_types_supported"])
			if strings.Contains(grants, grantJWTBearer) != tc.on || strings.Contains(toJSON(m["authorization_grant_profiles_supported"]), idjagProfile) != tc.on {
				t.Errorf("grant_types_supported %s, authorization_grant_profiles_supported %v: want jwt-bearer and the ID-JAG profile %v", grants, m["authorization_grant_profiles_supported"], tc.on)
			}
			if !tc.on {
				status, body := ts.token(t, url.Values{"grant_type": {grantJWTBearer}, "assertion": {"x"}, "client_id": {"app"}})
				if status != http.StatusBadRequest || body["error"] != "unsupported_grant_type" {
					t.Errorf("jwt-bearer while off: %d %v, want unsupported_grant_type", status, body)
				}
			}
		})
	}
}

func TestEnterpriseIdPsValidate(t *testing.T) {
	base := func() Options {
		return Options{
			Enabled: true,
			IdP:     IdPOptions{Issuer: "https://idp.example", ClientID: "p", ClientSecretFile: "/s"},
			Clients: []ClientOptions{{ClientID: "app", RedirectURIs: []string{testRedirect}}},
		}
	}
	for _, tc := range []struct {
		name string
		e    []EnterpriseIdPOptions
		want string // "" for valid
	}{
		{"valid", []EnterpriseIdPOptions{{Issuer: "https://acme.okta.com", Clients: []string{"app", "https://client.example/cimd.json"}}}, ""},
		{"no issuer", []EnterpriseIdPOptions{{}}, "enterprise_idps[0].issuer: required"},
		{"http issuer", []EnterpriseIdPOptions{{Issuer: "http://acme.okta.com"}}, "enterprise_idps[0].issuer"},
		{"http loopback issuer without allow_http", []EnterpriseIdPOptions{{Issuer: "http://127.0.0.1:9000"}}, "enterprise_idps[0].issuer"},
		{"duplicate", []EnterpriseIdPOptions{{Issuer: "https://a.example"}, {Issuer: "https://a.example"}}, "enterprise_idps[1].issuer: duplicate"},
		{"http jwks_url", []EnterpriseIdPOptions{{Issuer: "https://a.example", JWKSURL: "http://a.example/keys"}}, "enterprise_idps[0].jwks_url"},
		{"unknown client", []EnterpriseIdPOptions{{Issuer: "https://a.example", Clients: []string{"nobody"}}}, "enterprise_idps[0].clients[0]"},
		{"lifetime too long", []EnterpriseIdPOptions{{Issuer: "https://a.example", MaxAssertionLifetime: 2 * time.Hour}}, "enterprise_idps[0].max_assertion_lifetime"},
		{"negative lifetime", []EnterpriseIdPOptions{{Issuer: "https://a.example", MaxAssertionLifetime: -time.Minute}}, "enterprise_idps[0].max_assertion_lifetime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := base()
			o.EnterpriseIdPs = tc.e
			o.Defaults("https://mcp.example/mcp")
			err := o.Validate("https://mcp.example/mcp")
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
	o := base()
	o.EnterpriseIdPs = []EnterpriseIdPOptions{{Issuer: "https://a.example"}}
	o.Defaults("https://mcp.example/mcp")
	if o.EnterpriseIdPs[0].MaxAssertionLifetime != DefaultMaxAssertionLifetime {
		t.Errorf("default max_assertion_lifetime = %s, want %s", o.EnterpriseIdPs[0].MaxAssertionLifetime, DefaultMaxAssertionLifetime)
	}
}

// idjagHandlerOf returns the server's ID-JAG handler, whose clock a test
// sets before any request.
func idjagHandlerOf(t *testing.T, ts *testServer) *idjagHandler {
	t.Helper()
	for _, h := range ts.provider.(*fosite.Fosite).Config.GetTokenEndpointHandlers(context.Background()) {
		if h, ok := h.(*idjagHandler); ok {
			return h
		}
	}
	t.Fatal("no ID-JAG handler")
	return nil
}

func TestIDJAGKeySetFetches(t *testing.T) {
	ts, e, _ := startIDJAG(t)
	clock := useClock(t, ts)
	if status, body := ts.present(t, e.assertion(e.claims(ts, nil)), nil); status != http.StatusOK {
		t.Fatalf("%d %v", status, body)
	}
	// Forged assertions do not each cost a fetch at the IdP.
	for range 5 {
		if status, body := ts.present(t, oidctest.AlterSignature(e.assertion(e.claims(ts, nil))), nil); body["error"] != "invalid_grant" {
			t.Fatalf("forged: %d %v", status, body)
		}
	}
	if n := e.JWKSFetches(); n != 1 {
		t.Errorf("%d JWKS fetches after one valid and five forged assertions, want 1", n)
	}
	// A key the IdP rotates to is found once the interval has passed.
	k2 := oidctest.NewECKey("ent-2")
	e.Publish(k2)
	rotated := func() (int, map[string]any) {
		return ts.present(t, k2.Sign(e.claims(ts, nil), oidctest.Type(idjagType)), nil)
	}
	if status, body := rotated(); body["error"] != "invalid_grant" {
		t.Fatalf("new key within the interval: %d %v, want invalid_grant", status, body)
	}
	clock.add(jwksRefreshInterval + time.Second)
	if status, body := rotated(); status != http.StatusOK {
		t.Fatalf("new key after the interval: %d %v", status, body)
	}
	if n := e.JWKSFetches(); n != 2 {
		t.Errorf("%d JWKS fetches, want 2", n)
	}
}

func TestIDJAGStoreOutageIsA503AndBurnsNothing(t *testing.T) {
	ts, e, _ := startIDJAG(t)
	kv := &switchKV{KV: ts.kv}
	ts.kv, ts.store.kv = kv, kv
	assertion := e.assertion(e.claims(ts, nil))
	kv.down = true
	if status, body := ts.present(t, assertion, nil); status != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
		t.Fatalf("store down: %d %v, want 503 temporarily_unavailable", status, body)
	}
	if !ts.events.has(Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "error", Reason: "store"}) {
		t.Error("no error event for the store outage")
	}
	kv.down = false
	if status, body := ts.present(t, assertion, nil); status != http.StatusOK {
		t.Fatalf("store back: %d %v: the assertion was burnt by the outage", status, body)
	}
}

// TestIDJAGRunsOnTheServersClock: the ID-JAG grant reads the server's
// clock (Deps.Now), not the machine's: an assertion's exp, iat and nbf
// are judged against it, each accepted up to the leeway and refused a
// second past it, and the token it gets is stamped by it. The clock is
// two hours behind the machine's, so an assertion valid by one is
// refused by the other.
func TestIDJAGRunsOnTheServersClock(t *testing.T) {
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	clock := &fakeClock{t: now}
	ts, e, _ := startIDJAGDeps(t, func(d *Deps) { d.Now = clock.now })
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	for _, tc := range []struct {
		name   string
		claims map[string]any // iat, exp and nbf (nil: none)
		reason string         // the refusal's; empty: accepted
	}{
		{name: "valid now", claims: map[string]any{"iat": at(0), "exp": at(4 * time.Minute)}},
		{name: "expired within the leeway", claims: map[string]any{"iat": at(-4*time.Minute - assertionLeeway), "exp": at(-assertionLeeway)}},
		{name: "expired a second past the leeway", claims: map[string]any{"iat": at(-4*time.Minute - assertionLeeway - time.Second), "exp": at(-assertionLeeway - time.Second)}, reason: "expired"},
		{name: "iat ahead within the leeway", claims: map[string]any{"iat": at(assertionLeeway), "exp": at(assertionLeeway + 4*time.Minute)}},
		{name: "iat ahead a second past the leeway", claims: map[string]any{"iat": at(assertionLeeway + time.Second), "exp": at(assertionLeeway + 4*time.Minute)}, reason: "lifetime"},
		{name: "nbf ahead within the leeway", claims: map[string]any{"iat": at(0), "exp": at(4 * time.Minute), "nbf": at(assertionLeeway)}},
		{name: "nbf ahead a second past the leeway", claims: map[string]any{"iat": at(0), "exp": at(4 * time.Minute), "nbf": at(assertionLeeway + time.Second)}, reason: "lifetime"},
		{name: "valid by the machine's clock", claims: map[string]any{"iat": time.Now().Unix(), "exp": time.Now().Add(4 * time.Minute).Unix()}, reason: "lifetime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := ts.present(t, e.assertion(e.claims(ts, tc.claims)), nil)
			if tc.reason != "" {
				ev := Event{Endpoint: "token", Grant: grantJWTBearer, Outcome: "refused", Reason: tc.reason}
				if status != http.StatusBadRequest || body["error"] != "invalid_grant" || !ts.events.has(ev) {
					t.Fatalf("%d %v, want 400 invalid_grant and the event %+v", status, body, ev)
				}
				return
			}
			if status != http.StatusOK {
				t.Fatalf("%d %v, want a token", status, body)
			}
			_, c := decodeJWT(t, body["access_token"].(string))
			ttl := int64(ts.o.AccessTokenTTL / time.Second)
			if iat, exp := int64(c["iat"].(float64)), int64(c["exp"].(float64)); iat != now.Unix() || exp-iat != ttl {
				t.Errorf("token iat %d, exp - iat %d; want the server's clock %d and %d", iat, exp-iat, now.Unix(), ttl)
			}
			if in, _ := body["expires_in"].(float64); int64(in) != ttl {
				t.Errorf("expires_in %v, want %d", body["expires_in"], ttl)
			}
		})
	}
}
