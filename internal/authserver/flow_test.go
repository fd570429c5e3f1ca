package authserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// decodeJWT returns a JWT's header and claims, unverified.
func decodeJWT(t *testing.T, tok string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", tok)
	}
	for i, into := range []*map[string]any{&header, &claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatal(err)
		}
	}
	return header, claims
}

func TestCodeFlowIssuesAResourceBoundAccessToken(t *testing.T) {
	ts := startServer(t)
	tok := ts.fullFlow(t)
	at, _ := tok["access_token"].(string)
	header, claims := decodeJWT(t, at)
	if header["typ"] != "at+jwt" || header["alg"] != "ES256" || header["kid"] != ts.keys.signer().KeyID {
		t.Errorf("header = %v, want typ at+jwt, alg ES256, the signing kid", header)
	}
	want := map[string]any{"iss": ts.Issuer(), "sub": "alice", "client_id": "app", "scope": "mcp:tools", "email": "alice@example.com"}
	for k, v := range want {
		if claims[k] != v {
			t.Errorf("claim %s = %v, want %v", k, claims[k], v)
		}
	}
	if aud, _ := claims["aud"].([]any); len(aud) != 1 || aud[0] != ts.srv.URL+"/mcp" {
		t.Errorf("aud = %v, want [the resource]", claims["aud"])
	}
	if g, _ := claims["groups"].([]any); len(g) != 1 || g[0] != "staff" {
		t.Errorf("groups = %v, want [staff]", claims["groups"])
	}
	exp, _ := claims["exp"].(float64)
	if d := time.Until(time.Unix(int64(exp), 0)); d <= 0 || d > DefaultAccessTokenTTL+time.Minute {
		t.Errorf("expires in %s, want about %s", d, DefaultAccessTokenTTL)
	}
	// The key set /mcp verifies with accepts it.
	v := oidc.NewVerifier(ts.Issuer(), ts.KeySet(), &oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: []string{"ES256"}})
	if _, err := v.Verify(context.Background(), at); err != nil {
		t.Errorf("verify: %v", err)
	}
	if tok["refresh_token"] == nil || tok["token_type"] != "bearer" {
		t.Errorf("token response = %v, want a bearer token with a refresh token", tok)
	}
	for _, e := range []Event{{Endpoint: "authorize", Outcome: "ok"}, {Endpoint: "callback", Outcome: "ok"}, {Endpoint: "consent", Outcome: "ok"}, {Endpoint: "token", Grant: "authorization_code", Outcome: "ok"}} {
		if !ts.events.has(e) {
			t.Errorf("no event %+v", e)
		}
	}
}

// TestAccessTokenLifetimeIsExact: an access token's exp − iat is
// access_token_ttl to the second, whatever fraction of a second it is
// issued at: both come from one reading of the server's clock.
func TestAccessTokenLifetimeIsExact(t *testing.T) {
	base := time.Now().Truncate(time.Second)
	clock := &fakeClock{t: base}
	ts := startServerDeps(t, func(d *Deps) { d.Now = clock.now })
	if ts.o.AccessTokenTTL != 10*time.Minute {
		t.Fatalf("access_token_ttl %s, want the default 10m", ts.o.AccessTokenTTL)
	}
	rt := ""
	tests := []struct {
		name string
		at   time.Duration // into the second
	}{
		{name: "on the second", at: 0},
		{name: "just after", at: time.Millisecond},
		{name: "a third in", at: 300 * time.Millisecond},
		{name: "half", at: 500 * time.Millisecond},
		{name: "late", at: 700 * time.Millisecond},
		{name: "the last millisecond", at: 999 * time.Millisecond},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := base.Add(time.Duration(i)*time.Second + tt.at)
			clock.set(now)
			var tok map[string]any
			if rt == "" {
				tok = ts.fullFlow(t) // the code grant
			} else {
				status, body := ts.refresh(t, rt) // the refresh grant
				if status != http.StatusOK {
					t.Fatalf("refresh: %d %v", status, body)
				}
				tok = body
			}
			rt = tok["refresh_token"].(string)
			_, c := decodeJWT(t, tok["access_token"].(string))
			iat, exp := int64(c["iat"].(float64)), int64(c["exp"].(float64))
			if iat != now.Unix() || exp-iat != int64(ts.o.AccessTokenTTL/time.Second) {
				t.Errorf("iat %d, exp - iat %d s; want iat %d (the server's clock) and exp - iat %d s", iat, exp-iat, now.Unix(), int64(ts.o.AccessTokenTTL/time.Second))
			}
		})
	}
}

// TestExpiresInIsTheLifetime: a token response's expires_in is
// access_token_ttl exactly, the lifetime the token carries (exp - iat),
// whatever the second the server's clock reads and however far it is
// from the machine's, for the code and the refresh grants.
func TestExpiresInIsTheLifetime(t *testing.T) {
	for _, tt := range []struct {
		name   string
		offset time.Duration // of the server's clock from the machine's
	}{
		{name: "clock on the machine's", offset: 0},
		{name: "clock an hour behind", offset: -time.Hour},
		{name: "clock an hour ahead", offset: time.Hour},
	} {
		t.Run(tt.name, func(t *testing.T) {
			base := time.Now().Add(tt.offset).Truncate(time.Second)
			clock := &fakeClock{t: base}
			ts := startServerDeps(t, func(d *Deps) { d.Now = clock.now })
			want := ts.o.AccessTokenTTL / time.Second
			check := func(t *testing.T, grant string, tok map[string]any) {
				t.Helper()
				in, _ := tok["expires_in"].(float64)
				_, c := decodeJWT(t, tok["access_token"].(string))
				exp, iat := c["exp"].(float64), c["iat"].(float64)
				if int64(in) != int64(want) || int64(exp-iat) != int64(want) {
					t.Errorf("%s: expires_in %v, exp - iat %v; want both %d", grant, tok["expires_in"], exp-iat, want)
				}
			}
			for i, into := range []time.Duration{0, 999 * time.Millisecond} {
				clock.set(base.Add(time.Duration(i)*time.Minute + into))
				tok := ts.fullFlow(t)
				check(t, "code", tok)
				status, body := ts.refresh(t, tok["refresh_token"].(string))
				if status != http.StatusOK {
					t.Fatalf("refresh: %d %v", status, body)
				}
				check(t, "refresh", body)
			}
		})
	}
}

// TestRefreshRotatesAndReuseRevokesTheFamily: a reused refresh token
// revokes its family, and withdraws the user's consent to the client.
func TestRefreshRotatesAndReuseRevokesTheFamily(t *testing.T) {
	ts := startServer(t)
	tok := ts.fullFlow(t)
	rt1 := tok["refresh_token"].(string)
	status, tok2 := ts.refresh(t, rt1)
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, tok2)
	}
	rt2 := tok2["refresh_token"].(string)
	if rt2 == rt1 || tok2["access_token"] == tok["access_token"] {
		t.Fatal("refresh did not rotate")
	}
	_, c1 := decodeJWT(t, tok["access_token"].(string))
	_, c2 := decodeJWT(t, tok2["access_token"].(string))
	if c1["jti"] == c2["jti"] || c2["iat"].(float64) < c1["iat"].(float64) || c2["sub"] != "alice" || c2["scope"] != "mcp:tools" {
		t.Errorf("refreshed token claims %v, first %v: want a new jti, same grant", c2, c1)
	}
	if !ts.consentRemembered(t) {
		t.Fatal("consent not remembered after the first sign-in")
	}
	// The used token again: refused, and the family with it, and the
	// user's consent to the client is withdrawn.
	if status, body := ts.refresh(t, rt1); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("reused refresh token: %d %v, want 400 invalid_grant", status, body)
	}
	if status, body := ts.refresh(t, rt2); status == http.StatusOK {
		t.Fatalf("the family's newest refresh token still works after reuse: %v", body)
	}
	if ts.consentRemembered(t) {
		t.Error("consent still remembered after a refresh token was reused: want the consent page again")
	}
	if n := ts.events.count(Event{Endpoint: "token", Grant: "refresh_token", Outcome: "refused", Reason: "refresh_reuse"}); n != 2 {
		t.Errorf("%d refresh_reuse events, want 2 (the reuse, and the family's newest token after it)", n)
	}
	if n := ts.events.count(Event{Endpoint: "token", Grant: "refresh_token", Outcome: "refused", Reason: "invalid_grant"}); n != 0 {
		t.Errorf("a reuse was also counted as invalid_grant %d times", n)
	}
}

// TestStoreHoldsNoTokenMaterial: after a code exchange and a refresh,
// neither a key nor a value of the store holds a code, an access token or
// a refresh token, whole or its signature part (a JWT's last part, the
// HMAC of fosite's opaque tokens): whoever reads the store (a Redis
// shared by replicas) learns nothing a token could be rebuilt or matched
// from.
func TestStoreHoldsNoTokenMaterial(t *testing.T) {
	ts := startServer(t)
	b := newBrowser(t)
	authURL, verifier := ts.authorizeURL(nil)
	_, page := ts.signIn(b, authURL)
	resp, _ := ts.approve(b, page, "approve")
	code := ts.codeFrom(t, resp)
	status, first := ts.exchange(t, code, verifier)
	if status != http.StatusOK {
		t.Fatalf("token: %d %v", status, first)
	}
	status, second := ts.refresh(t, first["refresh_token"].(string))
	if status != http.StatusOK {
		t.Fatalf("refresh: %d %v", status, second)
	}
	secrets := map[string]string{"code": code}
	for name, tok := range map[string]map[string]any{"first": first, "refreshed": second} {
		for _, kind := range []string{"access_token", "refresh_token"} {
			v := tok[kind].(string)
			secrets[name+" "+kind] = v
			secrets[name+" "+kind+"'s signature"] = v[strings.LastIndexByte(v, '.')+1:]
		}
	}
	mem := ts.Server.kv.(*kv.Memory)
	n := 0
	mem.Each(func(key string, value []byte) {
		n++
		for what, secret := range secrets {
			if strings.Contains(key, secret) || strings.Contains(string(value), secret) {
				t.Errorf("the %s is in the store under %q: %s", what, key, value)
			}
		}
	})
	if n == 0 {
		t.Fatal("the store holds nothing: nothing was checked")
	}
}

// TestCodeIsSingleUseAndReplayRevokesItsTokens: a replayed code revokes
// the grant it was exchanged for, and withdraws the user's consent to the
// client.
func TestCodeIsSingleUseAndReplayRevokesItsTokens(t *testing.T) {
	ts := startServer(t)
	b := newBrowser(t)
	authURL, verifier := ts.authorizeURL(nil)
	_, page := ts.signIn(b, authURL)
	resp, _ := ts.approve(b, page, "approve")
	code := ts.codeFrom(t, resp)
	status, tok := ts.exchange(t, code, verifier)
	if status != http.StatusOK {
		t.Fatalf("first exchange: %d %v", status, tok)
	}
	if !ts.consentRemembered(t) {
		t.Fatal("consent not remembered after the first sign-in")
	}
	if status, body := ts.exchange(t, code, verifier); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
		t.Fatalf("replayed code: %d %v, want 400 invalid_grant", status, body)
	}
	if status, _ := ts.refresh(t, tok["refresh_token"].(string)); status == http.StatusOK {
		t.Fatal("the refresh token of a replayed code still works")
	}
	if ts.consentRemembered(t) {
		t.Error("consent still remembered after a code was replayed: want the consent page again")
	}
}

func TestAuthorizeRefusals(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct {
		name string
		over url.Values
		// back: the refusal goes back to the client with this error;
		// "" means it must not redirect anywhere (a page).
		back string
	}{
		{"no resource", url.Values{"resource": nil}, "invalid_target"},
		{"another resource", url.Values{"resource": {"https://other.example/mcp"}}, "invalid_target"},
		{"two resources", url.Values{"resource": {ts.srv.URL + "/mcp", "https://other.example/mcp"}}, "invalid_target"},
		{"no PKCE", url.Values{"code_challenge": nil, "code_challenge_method": nil}, "invalid_request"},
		{"plain PKCE", url.Values{"code_challenge_method": {"plain"}}, "invalid_request"},
		{"PKCE method missing", url.Values{"code_challenge_method": nil}, "invalid_request"},
		{"token response type", url.Values{"response_type": {"token"}}, "unsupported_response_type"},
		{"form_post response mode", url.Values{"response_mode": {"form_post"}}, "unsupported_response_mode"},
		{"fragment response mode", url.Values{"response_mode": {"fragment"}}, "unsupported_response_mode"},
		{"unknown scope", url.Values{"scope": {"mcp:tools root"}}, "invalid_scope"},
		{"unknown client", url.Values{"client_id": {"nobody"}}, ""},
		{"other redirect", url.Values{"redirect_uri": {"https://evil.example/callback"}}, ""},
		{"redirect path traversal", url.Values{"redirect_uri": {"http://127.0.0.1:7777/callback/../evil"}}, ""},
		{"redirect suffix", url.Values{"redirect_uri": {"http://127.0.0.1:7777/callbackx"}}, ""},
		{"redirect host lookalike", url.Values{"redirect_uri": {"http://127.0.0.1.evil.example:7777/callback"}}, ""},
		{"redirect userinfo", url.Values{"redirect_uri": {"http://127.0.0.1:7777@evil.example/callback"}}, ""},
		{"redirect query added", url.Values{"redirect_uri": {"http://127.0.0.1:7777/callback?next=https://evil.example"}}, ""},
		{"redirect fragment", url.Values{"redirect_uri": {"http://127.0.0.1:7777/callback#x"}}, ""},
		{"redirect https downgrade of loopback name", url.Values{"redirect_uri": {"http://localhost:7777/callback"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			authURL, _ := ts.authorizeURL(tc.over)
			resp, body := newBrowser(t).get(authURL)
			loc := resp.Header.Get("Location")
			if tc.back == "" {
				if loc != "" || resp.StatusCode < 400 {
					t.Fatalf("%d Location %q: want an error page, no redirect", resp.StatusCode, loc)
				}
				return
			}
			u, err := url.Parse(loc)
			if err != nil || !strings.HasPrefix(loc, testRedirect+"?") {
				t.Fatalf("%d Location %q, want back to the client; body %s", resp.StatusCode, loc, body)
			}
			if got := u.Query().Get("error"); got != tc.back {
				t.Errorf("error = %q (%s), want %q", got, u.Query().Get("error_description"), tc.back)
			}
			if u.Query().Get("state") != "client-state-123" || u.Query().Get("iss") != ts.Issuer() {
				t.Errorf("state = %q, iss = %q: want the client's state and the issuer (RFC 9207)", u.Query().Get("state"), u.Query().Get("iss"))
			}
		})
	}
	t.Run("loopback redirect on another port", func(t *testing.T) {
		authURL, _ := ts.authorizeURL(url.Values{"redirect_uri": {"http://127.0.0.1:9999/callback"}})
		resp, body := newBrowser(t).get(authURL)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), ts.idp.srv.URL) {
			t.Fatalf("%d %q %s: want on to the IdP (RFC 8252 loopback, any port)", resp.StatusCode, resp.Header.Get("Location"), body)
		}
	})
}

func TestTokenRefusals(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct {
		name string
		edit func(form url.Values)
		want string
	}{
		{"wrong verifier", func(f url.Values) { f.Set("code_verifier", strings.Repeat("a", 43)) }, "invalid_grant"},
		{"no verifier", func(f url.Values) { f.Del("code_verifier") }, "invalid_grant"},
		{"other redirect_uri", func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:7777/other") }, "invalid_grant"},
		{"another resource", func(f url.Values) { f.Set("resource", "https://other.example/mcp") }, "invalid_target"},
		{"other client", func(f url.Values) { f.Set("client_id", "nobody") }, "invalid_client"},
		{"unknown code", func(f url.Values) { f.Set("code", "x."+f.Get("code")) }, "invalid_grant"},
		{"password grant", func(f url.Values) { f.Set("grant_type", "password") }, "unsupported_grant_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBrowser(t)
			authURL, verifier := ts.authorizeURL(nil)
			resp, page := ts.signIn(b, authURL)
			if resp.StatusCode == http.StatusOK {
				resp, _ = ts.approve(b, page, "approve")
			}
			form := url.Values{"grant_type": {"authorization_code"}, "code": {ts.codeFrom(t, resp)}, "code_verifier": {verifier}, "client_id": {"app"}, "redirect_uri": {testRedirect}}
			tc.edit(form)
			status, body := ts.token(t, form)
			if status < 400 || body["error"] != tc.want {
				t.Fatalf("%d %v, want error %s", status, body, tc.want)
			}
			if body["access_token"] != nil {
				t.Fatal("an access token came with the error")
			}
		})
	}
}

func TestConsent(t *testing.T) {
	t.Run("page refuses framing and caching, has no script", func(t *testing.T) {
		ts := startServer(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		resp, page := ts.signIn(b, authURL)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("consent page: %d", resp.StatusCode)
		}
		h := resp.Header
		if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
			t.Errorf("headers %v: want frame-ancestors 'none', X-Frame-Options DENY, no-store", h)
		}
		// Under no-referrer a browser posts the form with "Origin: null",
		// which the answer's same-origin check refuses (headless Chromium
		// did: e2e TestAuthServerBrowser); same-origin lets the page's own
		// origin through and keeps its URL from other sites.
		if rp := h.Get("Referrer-Policy"); rp != "same-origin" {
			t.Errorf("Referrer-Policy %q, want same-origin", rp)
		}
		for _, want := range []string{"Test App", "127.0.0.1:7777", "mcp:tools", "alice@example.com", `<html lang="en">`} {
			if !strings.Contains(page, want) {
				t.Errorf("page lacks %q", want)
			}
		}
		if strings.Contains(page, "<script") {
			t.Error("page has a script")
		}
	})
	t.Run("deny goes back with access_denied", func(t *testing.T) {
		ts := startServer(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		_, page := ts.signIn(b, authURL)
		resp, _ := ts.approve(b, page, "deny")
		u, _ := url.Parse(resp.Header.Get("Location"))
		if !strings.HasPrefix(u.String(), testRedirect) || u.Query().Get("error") != "access_denied" || u.Query().Get("code") != "" {
			t.Fatalf("deny: %q", u)
		}
	})
	const self = "self" // stands for the server's own origin
	for _, tc := range []struct {
		name       string
		origin     string // the Origin header; self: the server's
		fetchSite  string // the Sec-Fetch-Site header
		edit       func(url.Values)
		jar        bool   // the POST carries the browser's cookie
		wantReason string // of the refusal's event
	}{
		{name: "cross-site origin", origin: "https://evil.example", jar: true, wantReason: "cross_site"},
		{name: "cross-site fetch", origin: self, fetchSite: "cross-site", jar: true, wantReason: "cross_site"},
		{name: "same-site other origin", origin: self, fetchSite: "same-site", jar: true, wantReason: "cross_site"},
		{name: "null origin", origin: "null", jar: true, wantReason: "cross_site"},
		{name: "no Origin, nor Sec-Fetch-Site", jar: true, wantReason: "cross_site"},
		{name: "no Origin, same-origin fetch", fetchSite: "same-origin", jar: true, wantReason: "cross_site"},
		{name: "no csrf token", origin: self, edit: func(f url.Values) { f.Del("csrf") }, jar: true, wantReason: "csrf"},
		{name: "wrong csrf token", origin: self, edit: func(f url.Values) { f.Set("csrf", "x") }, jar: true, wantReason: "csrf"},
		{name: "another browser", origin: self, wantReason: "csrf"},
	} {
		t.Run("refused: "+tc.name, func(t *testing.T) {
			ts := startServer(t)
			b := newBrowser(t)
			authURL, _ := ts.authorizeURL(nil)
			_, page := ts.signIn(b, authURL)
			form := consentForm(page)
			form.Set("action", "approve")
			if tc.edit != nil {
				tc.edit(form)
			}
			poster := b
			if !tc.jar {
				poster = newBrowser(t)
			}
			hdr := http.Header{}
			switch tc.origin {
			case "":
			case self:
				hdr.Set("Origin", ts.srv.URL)
			default:
				hdr.Set("Origin", tc.origin)
			}
			if tc.fetchSite != "" {
				hdr.Set("Sec-Fetch-Site", tc.fetchSite)
			}
			resp, _ := poster.postForm(ts.srv.URL+PathConsent, form, hdr)
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Location") != "" {
				t.Fatalf("%d Location %q: want 403, no redirect", resp.StatusCode, resp.Header.Get("Location"))
			}
			if want := (Event{Endpoint: "consent", Outcome: "refused", Reason: tc.wantReason}); !ts.events.has(want) {
				t.Errorf("no event %+v", want)
			}
			// The real page still works afterwards.
			resp, _ = ts.approve(b, page, "approve")
			ts.codeFrom(t, resp)
		})
	}
	t.Run("accepted: same origin without Sec-Fetch-Site", func(t *testing.T) {
		ts := startServer(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		_, page := ts.signIn(b, authURL)
		form := consentForm(page)
		form.Set("action", "approve")
		resp, _ := b.postForm(ts.srv.URL+PathConsent, form, http.Header{"Origin": {ts.srv.URL}})
		ts.codeFrom(t, resp)
	})
	t.Run("answered once", func(t *testing.T) {
		ts := startServer(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		_, page := ts.signIn(b, authURL)
		resp, _ := ts.approve(b, page, "approve")
		ts.codeFrom(t, resp)
		if resp, _ := ts.approve(b, page, "approve"); resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Fatalf("second answer: %d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("remembered for the same scopes, asked again for more", func(t *testing.T) {
		ts := startServer(t)
		ts.fullFlow(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		resp, _ := ts.signIn(b, authURL)
		ts.codeFrom(t, resp) // no page
		authURL, _ = ts.authorizeURL(url.Values{"scope": {"mcp:tools mcp:admin"}})
		if resp, _ := ts.signIn(newBrowser(t), authURL); resp.StatusCode != http.StatusOK {
			t.Fatalf("more scopes: %d, want the consent page", resp.StatusCode)
		}
	})
	t.Run("not remembered when off", func(t *testing.T) {
		ts := startServer(t, func(o *Options) { o.Consent.RememberFor = -1 })
		ts.fullFlow(t)
		authURL, _ := ts.authorizeURL(nil)
		if resp, _ := ts.signIn(newBrowser(t), authURL); resp.StatusCode != http.StatusOK {
			t.Fatalf("%d, want the consent page again", resp.StatusCode)
		}
	})
}

func TestCallbackRefusals(t *testing.T) {
	t.Run("idp refuses", func(t *testing.T) {
		ts := startServer(t)
		ts.idp.refuse = "access_denied"
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		resp, _ := b.get(authURL)
		resp, _ = b.get(resp.Header.Get("Location"))
		resp, _ = b.get(resp.Header.Get("Location"))
		u, _ := url.Parse(resp.Header.Get("Location"))
		if !strings.HasPrefix(u.String(), testRedirect) || u.Query().Get("error") != "access_denied" {
			t.Fatalf("%q: want access_denied back to the client", u)
		}
	})
	t.Run("callback in another browser", func(t *testing.T) {
		ts := startServer(t)
		b := newBrowser(t)
		authURL, _ := ts.authorizeURL(nil)
		resp, _ := b.get(authURL)
		resp, _ = b.get(resp.Header.Get("Location"))
		resp, _ = newBrowser(t).get(resp.Header.Get("Location"))
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
			t.Fatalf("%d %q", resp.StatusCode, resp.Header.Get("Location"))
		}
	})
	t.Run("unknown state", func(t *testing.T) {
		ts := startServer(t)
		resp, _ := newBrowser(t).get(ts.srv.URL + PathCallback + "?state=forged&code=x")
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%d", resp.StatusCode)
		}
	})
	for _, tc := range []struct {
		name  string
		edit  func(*Options)
		user  map[string]any
		allow bool
	}{
		{"hosted domain allowed", func(o *Options) { o.IdP.Preset = "google"; o.IdP.HostedDomains = []string{"example.com"} }, map[string]any{"sub": "g1", "hd": "example.com", "email": "a@example.com", "email_verified": true}, true},
		{"other hosted domain", func(o *Options) { o.IdP.Preset = "google"; o.IdP.HostedDomains = []string{"example.com"} }, map[string]any{"sub": "g1", "hd": "evil.example", "email": "a@evil.example", "email_verified": true}, false},
		{"no hosted domain", func(o *Options) { o.IdP.Preset = "google"; o.IdP.HostedDomains = []string{"example.com"} }, map[string]any{"sub": "g1", "email": "a@gmail.com", "email_verified": true}, false},
		{"email domain allowed", func(o *Options) { o.IdP.AllowedEmailDomains = []string{"example.com"} }, map[string]any{"sub": "u", "email": "a@EXAMPLE.com"}, true},
		{"unverified email", func(o *Options) { o.IdP.AllowedEmailDomains = []string{"example.com"} }, map[string]any{"sub": "u", "email": "a@example.com", "email_verified": false}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, tc.edit)
			ts.idp.user = tc.user
			b := newBrowser(t)
			authURL, _ := ts.authorizeURL(nil)
			resp, _ := ts.signIn(b, authURL)
			if tc.allow {
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("%d: want the consent page", resp.StatusCode)
				}
				return
			}
			u, _ := url.Parse(resp.Header.Get("Location"))
			if u.Query().Get("error") != "access_denied" {
				t.Fatalf("%d %q: want access_denied", resp.StatusCode, u)
			}
		})
	}
}

func TestGroupsClaims(t *testing.T) {
	p := &idp{o: IdPOptions{Preset: "keycloak"}, preset: presets["keycloak"]}
	u, err := p.user("u1", map[string]any{"realm_access": map[string]any{"roles": []any{"admin", "user"}}, "groups": "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(u.Groups, []string{"admin", "user", "ops"}) {
		t.Errorf("groups = %v", u.Groups)
	}
}

func TestMetadata(t *testing.T) {
	ts := startServer(t)
	for _, path := range []string{PathMetadata, PathOpenID} {
		resp, err := http.Get(ts.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		json.NewDecoder(resp.Body).Decode(&m)
		resp.Body.Close()
		if m["issuer"] != ts.Issuer() || m["token_endpoint"] != ts.Issuer()+PathToken || m["authorization_response_iss_parameter_supported"] != true {
			t.Errorf("%s: %v", path, m)
		}
		if ccm, _ := m["code_challenge_methods_supported"].([]any); len(ccm) != 1 || ccm[0] != "S256" {
			t.Errorf("%s: code_challenge_methods_supported = %v, want [S256]", path, m["code_challenge_methods_supported"])
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s: no CORS", path)
		}
	}
}

// failingKV fails every call, as Redis does when it is down.
type failingKV struct{ kv.KV }

var errDown = errors.Join(kv.ErrUnavailable, errors.New("connection refused"))

func (failingKV) Get(context.Context, string) ([]byte, error) { return nil, errDown }
func (failingKV) Set(context.Context, string, []byte, time.Duration) error {
	return errDown
}
func (failingKV) SetNX(context.Context, string, []byte, time.Duration) (bool, error) {
	return false, errDown
}
func (failingKV) GetDel(context.Context, string) ([]byte, error) { return nil, errDown }
func (failingKV) Del(context.Context, ...string) error           { return errDown }

// switchKV fails while down is set.
type switchKV struct {
	kv.KV
	down bool
}

func (k *switchKV) pick() kv.KV {
	if k.down {
		return failingKV{}
	}
	return k.KV
}
func (k *switchKV) Get(ctx context.Context, key string) ([]byte, error) {
	return k.pick().Get(ctx, key)
}
func (k *switchKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	return k.pick().Set(ctx, key, v, ttl)
}
func (k *switchKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	return k.pick().SetNX(ctx, key, v, ttl)
}
func (k *switchKV) GetDel(ctx context.Context, key string) ([]byte, error) {
	return k.pick().GetDel(ctx, key)
}
func (k *switchKV) Del(ctx context.Context, keys ...string) error { return k.pick().Del(ctx, keys...) }

func TestStoreOutageIsA503AndLosesNothing(t *testing.T) {
	ts := startServer(t)
	kv := &switchKV{KV: ts.kv}
	ts.kv, ts.store.kv = kv, kv
	tok := ts.fullFlow(t)

	kv.down = true
	authURL, _ := ts.authorizeURL(nil)
	resp, _ := newBrowser(t).get(authURL)
	u, _ := url.Parse(resp.Header.Get("Location"))
	if u.Query().Get("error") != "temporarily_unavailable" {
		t.Errorf("authorize with the store down: %d %q, want temporarily_unavailable", resp.StatusCode, u)
	}
	if status, body := ts.refresh(t, tok["refresh_token"].(string)); status != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
		t.Errorf("refresh with the store down: %d %v, want 503 temporarily_unavailable", status, body)
	}
	if !ts.events.has(Event{Endpoint: "token", Grant: "refresh_token", Outcome: "error", Reason: "store"}) {
		t.Error("the store failure was not counted as reason store")
	}
	kv.down = false
	if status, body := ts.refresh(t, tok["refresh_token"].(string)); status != http.StatusOK {
		t.Errorf("refresh after the store is back: %d %v: the refresh token was lost", status, body)
	}
}

func TestRevocationRevokesTheGrantAndItsConsent(t *testing.T) {
	ts := startServer(t)
	tok := ts.fullFlow(t)
	resp, err := http.PostForm(ts.srv.URL+PathRevoke, url.Values{"token": {tok["refresh_token"].(string)}, "token_type_hint": {"refresh_token"}, "client_id": {"app"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	if status, _ := ts.refresh(t, tok["refresh_token"].(string)); status == http.StatusOK {
		t.Fatal("a revoked refresh token still works")
	}
	authURL, _ := ts.authorizeURL(nil)
	if resp, _ := ts.signIn(newBrowser(t), authURL); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in after revocation: %d, want the consent page again", resp.StatusCode)
	}
	// Revoking another client's token is refused and changes nothing.
	tok = ts.fullFlow(t)
	resp, _ = http.PostForm(ts.srv.URL+PathRevoke, url.Values{"token": {tok["refresh_token"].(string)}, "client_id": {"other"}})
	resp.Body.Close()
	if status, _ := ts.refresh(t, tok["refresh_token"].(string)); status != http.StatusOK {
		t.Fatal("another client revoked this client's grant")
	}
}

func TestRateLimitPerAddress(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	ts := startServerDeps(t, func(d *Deps) { d.Now = func() time.Time { return now } }, func(o *Options) { o.Rate = RateOptions{PerSecond: 1, Burst: 3} })
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"x"}, "client_id": {"app"}}
	for i := range 3 {
		if status, _ := ts.token(t, form); status == http.StatusTooManyRequests {
			t.Fatalf("request %d refused within the burst", i+1)
		}
	}
	resp, err := http.PostForm(ts.srv.URL+PathToken, form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the burst: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	authURL, _ := ts.authorizeURL(nil)
	if resp, _ := newBrowser(t).get(authURL); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("authorize over the limit: %d", resp.StatusCode)
	}
	now = now.Add(time.Second)
	if status, _ := ts.token(t, form); status == http.StatusTooManyRequests {
		t.Fatal("still refused after the bucket refilled")
	}
}

func TestScopesRestrictedToGroups(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Scopes = []ScopeRule{{Scope: "mcp:admin", Groups: []string{"admins"}}} })
	for _, tc := range []struct {
		name   string
		groups []string
		want   string
	}{
		{"not in the group", []string{"staff"}, "mcp:tools"},
		{"in the group", []string{"staff", "admins"}, "mcp:tools mcp:admin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts.idp.user = map[string]any{"sub": "u-" + tc.name, "groups": tc.groups}
			b := newBrowser(t)
			authURL, verifier := ts.authorizeURL(url.Values{"scope": {"mcp:tools mcp:admin"}})
			resp, page := ts.signIn(b, authURL)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("consent page: %d", resp.StatusCode)
			}
			withheld := strings.Contains(page, "Not granted, since your groups do not allow it: mcp:admin")
			if withheld != (tc.want == "mcp:tools") || strings.Contains(page, "<code>mcp:admin</code>") == withheld {
				t.Errorf("the page does not say what is granted and withheld:\n%s", page)
			}
			resp, _ = ts.approve(b, page, "approve")
			status, tok := ts.exchange(t, ts.codeFrom(t, resp), verifier)
			if status != http.StatusOK {
				t.Fatalf("token: %d %v", status, tok)
			}
			if _, claims := decodeJWT(t, tok["access_token"].(string)); claims["scope"] != tc.want {
				t.Errorf("scope = %v, want %q", claims["scope"], tc.want)
			}
		})
	}
}

func TestRefreshTokensModes(t *testing.T) {
	for _, tc := range []struct {
		name, mode, scope string
		refresh           bool
	}{
		{"always, without offline_access", "always", "mcp:tools", true},
		{"offline_access mode, without it", "offline_access", "mcp:tools", false},
		{"offline_access mode, with it", "offline_access", "mcp:tools offline_access", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(o *Options) { o.RefreshTokens = tc.mode })
			if sc, _ := ts.metadata()["scopes_supported"].([]string); !slices.Contains(sc, "offline_access") {
				t.Errorf("scopes_supported = %v, want offline_access listed (SEP-2207)", sc)
			}
			b := newBrowser(t)
			authURL, verifier := ts.authorizeURL(url.Values{"scope": {tc.scope}})
			_, page := ts.signIn(b, authURL)
			resp, _ := ts.approve(b, page, "approve")
			status, tok := ts.exchange(t, ts.codeFrom(t, resp), verifier)
			if status != http.StatusOK {
				t.Fatalf("token: %d %v", status, tok)
			}
			if got := tok["refresh_token"] != nil; got != tc.refresh {
				t.Errorf("refresh token issued: %v, want %v", got, tc.refresh)
			}
		})
	}
}

// The consent answer's Origin is compared as an origin, not as a string:
// a default port written or not, and the host's case, do not matter; any
// other scheme, host or port, a path, or "null" is another origin.
func TestSameOriginURL(t *testing.T) {
	tests := []struct {
		name   string
		origin string
		issuer string
		want   bool
	}{
		{name: "exact", origin: "https://as.example.com", issuer: "https://as.example.com", want: true},
		{name: "default port written in the issuer", origin: "https://as.example.com", issuer: "https://as.example.com:443", want: true},
		{name: "default port written in the origin", origin: "https://as.example.com:443", issuer: "https://as.example.com", want: true},
		{name: "host case", origin: "https://AS.example.com", issuer: "https://as.example.com", want: true},
		{name: "http on 80", origin: "http://127.0.0.1", issuer: "http://127.0.0.1:80", want: true},
		{name: "explicit port", origin: "http://127.0.0.1:8080", issuer: "http://127.0.0.1:8080", want: true},
		{name: "other port", origin: "https://as.example.com:8443", issuer: "https://as.example.com", want: false},
		{name: "other scheme", origin: "http://as.example.com", issuer: "https://as.example.com", want: false},
		{name: "other host", origin: "https://evil.example.com", issuer: "https://as.example.com", want: false},
		{name: "suffix host", origin: "https://as.example.com.evil.test", issuer: "https://as.example.com", want: false},
		{name: "null", origin: "null", issuer: "https://as.example.com", want: false},
		{name: "empty", origin: "", issuer: "https://as.example.com", want: false},
		{name: "with a path", origin: "https://as.example.com/x", issuer: "https://as.example.com", want: false},
		{name: "with a user", origin: "https://u@as.example.com", issuer: "https://as.example.com", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sameOriginURL(tt.origin, tt.issuer); got != tt.want {
				t.Errorf("sameOriginURL(%q, %q) = %v, want %v", tt.origin, tt.issuer, got, tt.want)
			}
		})
	}
}
