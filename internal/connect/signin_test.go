package connect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// companyIdP is an OpenID provider for the sign-in's tests: it signs in
// the user the test says, and issues an ID token with the nonce of the
// authorization request.
type companyIdP struct {
	srv  *httptest.Server
	key  *oidctest.Key
	mu   sync.Mutex
	user string
	// nonces by code; badNonce sends another nonce.
	nonces   map[string]string
	badNonce bool
}

func startCompanyIdP(t testing.TB) *companyIdP {
	p := &companyIdP{key: oidctest.NewECKey("k1"), user: "alice", nonces: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
			"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/jwks", "id_token_signing_alg_values_supported": []string{"ES256"}})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{p.key.JWK()}})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p.mu.Lock()
		code := fmt.Sprintf("c%d", len(p.nonces))
		p.nonces[code] = q.Get("nonce") + "\x00" + p.user
		p.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		p.mu.Lock()
		v, ok := p.nonces[r.PostForm.Get("code")]
		delete(p.nonces, r.PostForm.Get("code"))
		bad := p.badNonce
		p.mu.Unlock()
		if !ok {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		nonce, user, _ := strings.Cut(v, "\x00")
		if bad {
			nonce = "another"
		}
		now := time.Now()
		idt := p.key.Sign(map[string]any{"iss": p.srv.URL, "aud": "portcullis-pages", "sub": user, "nonce": nonce,
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}, oidctest.Type("JWT"))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-at", "token_type": "Bearer", "expires_in": 3600, "id_token": idt})
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// oidcEnv is the connect pages signing in through OIDCSignIn.
func oidcEnv(t *testing.T) (*env, *companyIdP) {
	t.Helper()
	idp := startCompanyIdP(t)
	var si *OIDCSignIn
	e := newEnv(t)
	ring, _ := keyring.New([][]byte{bytes.Repeat([]byte{9}, keyring.KeySize)}, SessionPurpose)
	var err error
	si, err = NewOIDCSignIn(OIDCOptions{Issuer: idp.srv.URL, ClientID: "portcullis-pages", ClientSecret: "s", BaseURL: e.srv.URL, Ring: ring, KV: kv.NewMemory(nil)})
	if err != nil {
		t.Fatal(err)
	}
	o := e.svc.o
	o.SignIn, o.OwnerIssuer = si, idp.srv.URL
	svc, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.srv.Config.Handler = svc.Handler()
	return e, idp
}

// signInAndConnect walks a browser with no session through a connect link:
// the company IdP's sign-in, then the SaaS; it returns the last response.
func signInAndConnect(t *testing.T, e *env, b *browser, link string) (*http.Response, string) {
	t.Helper()
	resp, body := b.get(link)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("link: %d %s", resp.StatusCode, body)
	}
	resp, _ = b.get(resp.Header.Get("Location")) // the company IdP
	resp, body = b.get(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") == "" {
		return resp, body
	}
	resp, body = b.get(e.srv.URL + resp.Header.Get("Location")) // back to the link, signed in
	return b.get(b.toCallback(resp, body))
}

// TestOIDCSignIn: without an authorization server of Portcullis, the
// connect page signs the browser in at the company IdP, and still refuses
// a user other than the link's.
func TestOIDCSignIn(t *testing.T) {
	e, idp := oidcEnv(t)
	ctx := context.Background()
	alice := ownerAt(idp.srv.URL, "alice")
	link, id, err := e.svc.Require(ctx, "saas", alice)
	if err != nil {
		t.Fatal(err)
	}
	if resp, body := signInAndConnect(t, e, e.browser(""), link); resp.StatusCode != http.StatusOK || !strings.Contains(body, "connected") {
		t.Fatalf("connect: %d %s", resp.StatusCode, body)
	}
	if tok, err := e.svc.Token(ctx, "saas", alice); err != nil || !strings.HasPrefix(tok, "at-octocat") || len(e.completed) != 1 || e.completed[0] != id {
		t.Fatalf("Token = %q %v, completed %v", tok, err, e.completed)
	}

	// Bob signs in at the IdP and opens Alice's link.
	idp.mu.Lock()
	idp.user = "bob"
	idp.mu.Unlock()
	link, _, _ = e.svc.Require(ctx, "saas", ownerAt(idp.srv.URL, "carol"))
	b := e.browser("")
	resp, _ := b.get(link)
	resp, _ = b.get(resp.Header.Get("Location"))
	resp, _ = b.get(resp.Header.Get("Location"))
	resp, body := b.get(e.srv.URL + resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("another user's link after signing in: %d %s", resp.StatusCode, body)
	}
}

func ownerAt(issuer, sub string) vault.Owner { return vault.Owner{Issuer: issuer, Subject: sub} }

// toSignedIn walks b from the page to the IdP and returns the URL it
// sends the browser back to.
func toSignedIn(e *env, b *browser) string {
	resp, _ := b.get(e.srv.URL + PathPage)
	resp, _ = b.get(resp.Header.Get("Location"))
	return resp.Header.Get("Location")
}

func TestOIDCSignInRefusals(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(e *env, idp *companyIdP) (*http.Response, string)
	}{
		{"a bad nonce", func(e *env, idp *companyIdP) (*http.Response, string) {
			idp.badNonce = true
			b := e.browser("")
			return b.get(toSignedIn(e, b))
		}},
		{"another browser", func(e *env, idp *companyIdP) (*http.Response, string) {
			return e.browser("").get(toSignedIn(e, e.browser("")))
		}},
		{"a replayed state", func(e *env, idp *companyIdP) (*http.Response, string) {
			b := e.browser("")
			cb := toSignedIn(e, b)
			if resp, body := b.get(cb); resp.StatusCode != http.StatusSeeOther {
				e.t.Fatalf("first: %d %s", resp.StatusCode, body)
			}
			return b.get(cb)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, idp := oidcEnv(t)
			resp, body := c.run(e, idp)
			if resp.StatusCode/100 != 4 {
				t.Fatalf("%d %s, want refused", resp.StatusCode, body)
			}
			if _, body := e.browser("").get(e.srv.URL + PathPage); strings.Contains(body, "Connected accounts") {
				t.Fatal("a browser is signed in")
			}
		})
	}
}
