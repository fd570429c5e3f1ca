//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// These tests show the IdP profiles of e2e/idp (IDP_PROFILE) on their own,
// against the real process, with a small relying party built as Portcullis
// in authorization-server mode signs users in at a customer's IdP
// (golang.org/x/oauth2 for the code flow with PKCE S256, go-oidc for
// discovery and the ID token): what works with each, and the quirks
// Portcullis must live with.

// idpProfileCase is what one profile does.
type idpProfileCase struct {
	profile string
	// clientID is the relying party's client_id (entra: an app id GUID).
	clientID   string
	authMethod string // client_secret_basic or client_secret_post
	user       string // login name at the dev-interactions form

	registrationEndpoint bool // discovery names registration_endpoint
	anonymousRegister    int  // status of an anonymous POST /reg
	initialAccessToken   bool // POST /reg with an initial access token succeeds
	pkceAdvertised       bool // discovery has code_challenge_methods_supported with S256
	issInCallback        bool // RFC 9207 iss in the authorization response
	refusesResource      bool // an RFC 8707 resource other than the app's is refused
	jwtAccessToken       bool // access tokens are JWTs (else opaque)

	// offline are the authorization request options for a refresh token
	// (nil: every code flow gets one).
	offline []oauth2.AuthCodeOption

	// claims checks the profile's extra ID token claims.
	claims func(t *testing.T, claims map[string]any)
}

// idpEntraAppID is the entra relying party's client_id: an app id.
const idpEntraAppID = "0c5a4b7e-3f2d-4e1a-9b8c-7d6e5f4a3b21"

var idpProfileCases = []idpProfileCase{
	{
		profile:           idpProfileEntra,
		clientID:          idpEntraAppID,
		authMethod:        "client_secret_basic",
		user:              "admin-alice@contoso.example",
		anonymousRegister: http.StatusNotFound,
		refusesResource:   true,
		jwtAccessToken:    true,
		offline:           []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("scope", "openid email profile offline_access")},
		claims: func(t *testing.T, c map[string]any) {
			wantStrings(t, c, "groups", idpObjectID("users"), idpObjectID("admins"))
			wantStrings(t, c, "roles", "MCP.User", "MCP.Admin")
			wantClaim(t, c, "tid", idpEntraTenant)
			wantClaim(t, c, "oid", idpObjectID("user:admin-alice@contoso.example"))
			wantClaim(t, c, "preferred_username", "admin-alice@contoso.example")
			wantNoClaim(t, c, "hd", "realm_access")
		},
	},
	{
		profile:              idpProfileOkta,
		authMethod:           "client_secret_post",
		user:                 "alice@example.com",
		registrationEndpoint: true,
		anonymousRegister:    http.StatusUnauthorized,
		initialAccessToken:   true,
		pkceAdvertised:       true,
		issInCallback:        true,
		offline:              []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("scope", "openid email profile offline_access")},
		claims: func(t *testing.T, c map[string]any) {
			wantStrings(t, c, "groups", "Everyone", "users")
			wantClaim(t, c, "email_verified", true)
			wantNoClaim(t, c, "roles", "hd", "realm_access")
		},
	},
	{
		profile:           idpProfileGoogle,
		authMethod:        "client_secret_basic",
		user:              "alice@example.com",
		anonymousRegister: http.StatusNotFound,
		pkceAdvertised:    true,
		offline:           []oauth2.AuthCodeOption{oauth2.AccessTypeOffline},
		claims: func(t *testing.T, c map[string]any) {
			wantClaim(t, c, "hd", "example.com")
			wantClaim(t, c, "email_verified", true)
			wantNoClaim(t, c, "groups", "roles", "realm_access")
		},
	},
	{
		profile:              idpProfileKeycloak,
		authMethod:           "client_secret_post",
		user:                 "admin-kim",
		registrationEndpoint: true,
		anonymousRegister:    http.StatusForbidden,
		initialAccessToken:   true,
		pkceAdvertised:       true,
		issInCallback:        true,
		claims: func(t *testing.T, c map[string]any) {
			ra, _ := c["realm_access"].(map[string]any)
			wantStrings(t, ra, "roles", "default-roles-portcullis", "offline_access", "users", "admins")
			wantClaim(t, c, "preferred_username", "admin-kim")
			wantClaim(t, c, "email", "admin-kim@example.test")
			wantNoClaim(t, c, "groups", "roles", "hd")
		},
	},
}

// TestIdPProfiles runs, for each enterprise profile, the relying party's
// code flow and the profile's quirks: discovery, registration, resource.
func TestIdPProfiles(t *testing.T) {
	for _, tc := range idpProfileCases {
		t.Run(tc.profile, func(t *testing.T) {
			clientID := tc.clientID
			if clientID == "" {
				clientID = idpRPClient
			}
			// Never served: Authorize catches the redirect to it.
			redirectURI := "http://" + freeLoopbackAddr(t) + "/oauth/callback"
			idp := startIdPProfile(t, tc.profile, idpRP{
				ClientID:     clientID,
				ClientSecret: "rp-secret-" + tc.profile,
				RedirectURIs: []string{redirectURI},
				AuthMethod:   tc.authMethod,
			}.Env()...)
			rp := newTestRP(t, idp, clientID, "rp-secret-"+tc.profile, redirectURI, tc.authMethod)

			t.Run("discovery", func(t *testing.T) {
				meta := idp.Discovery(t)
				if _, ok := meta["registration_endpoint"]; ok != tc.registrationEndpoint {
					t.Errorf("registration_endpoint %v present = %v, want %v", meta["registration_endpoint"], ok, tc.registrationEndpoint)
				}
				methods, ok := meta["code_challenge_methods_supported"].([]any)
				if ok != tc.pkceAdvertised || (ok && !slices.Contains(methods, any("S256"))) {
					t.Errorf("code_challenge_methods_supported = %v, want present with S256: %v", meta["code_challenge_methods_supported"], tc.pkceAdvertised)
				}
				if iss, _ := meta["authorization_response_iss_parameter_supported"].(bool); iss != tc.issInCallback {
					t.Errorf("authorization_response_iss_parameter_supported = %v, want %v", meta["authorization_response_iss_parameter_supported"], tc.issInCallback)
				}
			})

			t.Run("registration", func(t *testing.T) {
				client := map[string]any{
					"client_name":                "mcp-client",
					"redirect_uris":              []string{"http://127.0.0.1:33418/callback"},
					"grant_types":                []string{"authorization_code", "refresh_token"},
					"response_types":             []string{"code"},
					"token_endpoint_auth_method": "none",
					"application_type":           "native",
				}
				status, body := idp.Register(t, "", client)
				if status != tc.anonymousRegister {
					t.Errorf("anonymous registration: status %d, want %d: %s", status, tc.anonymousRegister, body)
				}
				if tc.initialAccessToken {
					if status, body := idp.Register(t, idpInitialAccessToken(tc.profile), client); status != http.StatusCreated {
						t.Errorf("registration with the initial access token: status %d, want 201: %s", status, body)
					}
					if status, body := idp.Register(t, "wrong-token", client); status != http.StatusUnauthorized {
						t.Errorf("registration with a wrong initial access token: status %d, want 401: %s", status, body)
					}
				}
			})

			t.Run("code flow", func(t *testing.T) {
				f := rp.signIn(t, tc.user)
				if got := f.callback.Query().Has("iss"); got != tc.issInCallback {
					t.Errorf("iss in the authorization response = %v (%s), want %v", got, f.callback, tc.issInCallback)
				}
				tok, err := rp.exchange(t, f.code, f.verifier)
				if err != nil {
					t.Fatalf("code exchange: %v", err)
				}
				claims := rp.verifyIDToken(t, tok, f.nonce)
				wantClaim(t, claims, "sub", tc.user)
				wantClaim(t, claims, "name", tc.user)
				if strings.Contains(tc.user, "@") {
					wantClaim(t, claims, "email", tc.user)
				}
				tc.claims(t, claims)

				if tc.jwtAccessToken {
					header, _ := decodeJWT(t, tok.AccessToken)
					if header["typ"] != "JWT" {
						t.Errorf("access token typ = %v, want JWT", header["typ"])
					}
					// The app's own token: aud is its client_id, and it
					// verifies as a JWT from the IdP's keys.
					at, err := rp.provider.Verifier(&oidc.Config{ClientID: clientID}).Verify(t.Context(), tok.AccessToken)
					if err != nil {
						t.Fatalf("access token does not verify with aud %s: %v", clientID, err)
					}
					var atClaims map[string]any
					if err := at.Claims(&atClaims); err != nil {
						t.Fatal(err)
					}
					// Entra's access tokens carry groups and roles too.
					wantClaim(t, atClaims, "sub", tc.user)
					for _, name := range []string{"groups", "roles", "tid", "oid"} {
						if !reflect.DeepEqual(atClaims[name], claims[name]) {
							t.Errorf("access token claim %s = %v, want %v as in the ID token", name, atClaims[name], claims[name])
						}
					}
				} else if strings.Count(tok.AccessToken, ".") == 2 {
					t.Errorf("access token is a JWT, want an opaque token")
				}
			})

			t.Run("refresh", func(t *testing.T) {
				f := rp.signIn(t, tc.user)
				tok, err := rp.exchange(t, f.code, f.verifier)
				if err != nil {
					t.Fatal(err)
				}
				if got := tok.RefreshToken != ""; got != (tc.offline == nil) {
					t.Errorf("refresh token without offline access: %v, want %v", got, tc.offline == nil)
				}
				if tc.offline != nil {
					f = rp.signIn(t, tc.user, tc.offline...)
					if tok, err = rp.exchange(t, f.code, f.verifier); err != nil {
						t.Fatal(err)
					}
				}
				if tok.RefreshToken == "" {
					t.Fatalf("no refresh token with offline access")
				}
				ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
				defer cancel()
				fresh, err := rp.conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
				if err != nil {
					t.Fatalf("refresh: %v", err)
				}
				if fresh.AccessToken == "" || fresh.AccessToken == tok.AccessToken {
					t.Errorf("refresh: access token %q, want a new one", fresh.AccessToken)
				}
				claims := rp.verifyIDToken(t, fresh, f.nonce)
				wantClaim(t, claims, "sub", tc.user)
				tc.claims(t, claims)
			})

			if tc.profile == idpProfileEntra {
				t.Run("app scopes", func(t *testing.T) {
					// Entra v2: the app's own scopes api://<app id>/NAME
					// (.default: all consented) give an access token for the
					// app with scp the names; refreshing keeps them.
					app := "api://" + clientID + "/"
					f := rp.signIn(t, tc.user, oauth2.SetAuthURLParam("scope", "openid email profile offline_access "+app+".default "+app+"mcp.access"))
					tok, err := rp.exchange(t, f.code, f.verifier)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					fresh, err := rp.conf.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
					if err != nil {
						t.Fatalf("refresh: %v", err)
					}
					for _, at := range []string{tok.AccessToken, fresh.AccessToken} {
						_, c := decodeJWT(t, at)
						wantClaim(t, c, "scp", "mcp.access")
						wantClaim(t, c, "azp", clientID)
						wantClaim(t, c, "ver", "2.0")
						wantClaim(t, c, "aud", clientID)
						wantNoClaim(t, c, "scope", "client_id")
					}
				})
			}

			t.Run("browser session", func(t *testing.T) {
				// One browser: the second authorization finds the IdP
				// session (and the consent), so the login name given then
				// is never asked for.
				jar, err := cookiejar.New(nil)
				if err != nil {
					t.Fatal(err)
				}
				browser := *rp
				browser.jar = jar
				for _, user := range []string{tc.user, "someone-else"} {
					f := browser.signIn(t, user)
					tok, err := browser.exchange(t, f.code, f.verifier)
					if err != nil {
						t.Fatal(err)
					}
					wantClaim(t, browser.verifyIDToken(t, tok, f.nonce), "sub", tc.user)
				}
			})

			t.Run("pkce is checked", func(t *testing.T) {
				f := rp.signIn(t, tc.user)
				_, err := rp.exchange(t, f.code, oauth2.GenerateVerifier())
				wantTokenError(t, err, "invalid_grant", "")
			})

			t.Run("resource", func(t *testing.T) {
				const mcp = "http://127.0.0.1:18080/mcp"
				f := rp.authorize(t, tc.user, oauth2.SetAuthURLParam("resource", mcp))
				q := f.callback.Query()
				if tc.refusesResource {
					if q.Get("error") != "invalid_target" || !strings.Contains(q.Get("error_description"), "AADSTS9010010") {
						t.Fatalf("authorization with resource=%s: %s, want error invalid_target mentioning AADSTS9010010", mcp, f.callback)
					}
					// The token request too: a code got without resource,
					// exchanged with one.
					f := rp.signIn(t, tc.user)
					_, err := rp.exchange(t, f.code, f.verifier, oauth2.SetAuthURLParam("resource", mcp))
					wantTokenError(t, err, "invalid_target", "AADSTS9010010")
					// The app's own identifier URI is the one resource
					// accepted.
					own := "api://" + clientID
					f = rp.signIn(t, tc.user, oauth2.SetAuthURLParam("resource", own))
					tok, err := rp.exchange(t, f.code, f.verifier, oauth2.SetAuthURLParam("resource", own))
					if err != nil {
						t.Fatalf("resource=%s: %v", own, err)
					}
					if _, c := decodeJWT(t, tok.AccessToken); !slices.Equal(jwtAudience(c), []string{clientID}) {
						t.Errorf("access token aud = %v, want [%s]", c["aud"], clientID)
					}
					return
				}
				// Ignored: the flow succeeds, the token names no resource.
				if e := q.Get("error"); e != "" {
					t.Fatalf("authorization with resource=%s: error %q: %s", mcp, e, q.Get("error_description"))
				}
				tok, err := rp.exchange(t, q.Get("code"), f.verifier, oauth2.SetAuthURLParam("resource", mcp))
				if err != nil {
					t.Fatalf("code exchange with resource=%s: %v", mcp, err)
				}
				rp.verifyIDToken(t, tok, f.nonce)
				if strings.Count(tok.AccessToken, ".") == 2 {
					t.Errorf("access token is a JWT, want an opaque token")
				}
			})
		})
	}
}

// TestIdPProfileGoogle shows the rest of the google profile: an account
// without a hosted domain (a login name without one) has no hd claim, so a
// relying party restricting sign-in to a domain must refuse it; the
// offline_access scope is refused (access_type=offline gives a refresh
// token);
// and a relying party registered through IDP_CLIENTS (here with
// client_secret_post) instead of IDP_RP_*.
func TestIdPProfileGoogle(t *testing.T) {
	redirectURI := "http://" + freeLoopbackAddr(t) + "/oauth/callback"
	clients, err := json.Marshal([]map[string]any{{
		"client_id":                  "google-rp.apps.example",
		"client_secret":              "google-rp-secret",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "client_secret_post",
	}})
	if err != nil {
		t.Fatal(err)
	}
	idp := startIdPProfile(t, idpProfileGoogle, "IDP_CLIENTS="+string(clients))
	rp := newTestRP(t, idp, "google-rp.apps.example", "google-rp-secret", redirectURI, "client_secret_post")

	f := rp.signIn(t, "carol")
	tok, err := rp.exchange(t, f.code, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	claims := rp.verifyIDToken(t, tok, f.nonce)
	wantNoClaim(t, claims, "hd")
	wantClaim(t, claims, "email", "carol@example.test")

	// The offline_access scope: an error page at Google, no redirect.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	offline := rp.conf.AuthCodeURL(rand.Text(), oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("scope", "openid email offline_access"))
	if cb, err := idp.Authorize(ctx, offline, "carol"); err == nil || !strings.Contains(err.Error(), "status 400") || !strings.Contains(err.Error(), "invalid_scope") {
		t.Errorf("authorization with scope offline_access: redirect %v, error %v; want a 400 invalid_scope page", cb, err)
	}

	// As real IdPs do, oidc-provider takes the secret in either place,
	// whatever method the client registered.
	basic := *rp
	basic.conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	f = basic.signIn(t, "carol", oauth2.AccessTypeOffline)
	if tok, err = basic.exchange(t, f.code, f.verifier); err != nil {
		t.Fatalf("client_secret_basic for a client_secret_post client: %v", err)
	}
	if tok.RefreshToken == "" {
		t.Errorf("access_type=offline gave no refresh token")
	}
}

// TestIdPProfileDefaultRP shows that the default profile (the one the auth
// tests use) registers the relying-party client too, with PKCE required.
func TestIdPProfileDefaultRP(t *testing.T) {
	redirectURI := "http://" + freeLoopbackAddr(t) + "/oauth/callback"
	idp := startIdP(t, idpRP{RedirectURIs: []string{redirectURI}}.Env()...)
	if idp.Profile() != idpProfileDefault {
		t.Fatalf("profile %q, want %q", idp.Profile(), idpProfileDefault)
	}
	rp := newTestRP(t, idp, idpRPClient, idpRPClientSecret, redirectURI, "client_secret_basic")
	f := rp.signIn(t, "alice")
	tok, err := rp.exchange(t, f.code, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	claims := rp.verifyIDToken(t, tok, f.nonce)
	wantClaim(t, claims, "sub", "alice")
	// Without PKCE the default profile refuses the authorization request.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cb, err := idp.Authorize(ctx, rp.conf.AuthCodeURL(rand.Text(), oidc.Nonce(rand.Text())), "alice")
	if err != nil {
		t.Fatal(err)
	}
	if cb.Query().Get("error") != "invalid_request" {
		t.Errorf("authorization without PKCE: %s, want error invalid_request", cb)
	}
}

// testRP is a small OIDC relying party as Portcullis is one in
// authorization-server mode: a confidential client with a client secret.
type testRP struct {
	idp      *IdP
	provider *oidc.Provider
	conf     oauth2.Config
	// jar, when set, is the browser's cookie jar (AuthorizeWithJar);
	// otherwise each authorization starts in a fresh browser.
	jar http.CookieJar
}

// newTestRP discovers idp with go-oidc and configures the client.
func newTestRP(t *testing.T, idp *IdP, clientID, secret, redirectURI, authMethod string) *testRP {
	t.Helper()
	provider, err := oidc.NewProvider(t.Context(), idp.Issuer())
	if err != nil {
		t.Fatalf("discovery of %s: %v", idp.Issuer(), err)
	}
	endpoint := provider.Endpoint()
	endpoint.AuthStyle = oauth2.AuthStyleInHeader
	if authMethod == "client_secret_post" {
		endpoint.AuthStyle = oauth2.AuthStyleInParams
	}
	return &testRP{idp: idp, provider: provider, conf: oauth2.Config{
		ClientID:     clientID,
		ClientSecret: secret,
		Endpoint:     endpoint,
		RedirectURL:  redirectURI,
		Scopes:       []string{oidc.ScopeOpenID, "email", "profile"},
	}}
}

// rpFlow is one authorization request and its answer.
type rpFlow struct {
	callback               *url.URL
	code                   string
	verifier, state, nonce string
}

// authorize sends the user's browser to the IdP with state, nonce and PKCE
// S256 (and opts), signs in as user and returns the redirect back, which
// may carry an error.
func (rp *testRP) authorize(t *testing.T, user string, opts ...oauth2.AuthCodeOption) rpFlow {
	t.Helper()
	f := rpFlow{verifier: oauth2.GenerateVerifier(), state: rand.Text(), nonce: rand.Text()}
	authURL := rp.conf.AuthCodeURL(f.state, append([]oauth2.AuthCodeOption{oauth2.S256ChallengeOption(f.verifier), oidc.Nonce(f.nonce)}, opts...)...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var cb *url.URL
	var err error
	if rp.jar != nil {
		cb, err = rp.idp.AuthorizeWithJar(ctx, rp.jar, authURL, user)
	} else {
		cb, err = rp.idp.Authorize(ctx, authURL, user)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cb.String(), rp.conf.RedirectURL+"?") {
		t.Fatalf("authorization: redirect to %s, want %s", cb, rp.conf.RedirectURL)
	}
	if got := cb.Query().Get("state"); got != f.state {
		t.Fatalf("authorization: state %q, want %q", got, f.state)
	}
	if iss := cb.Query().Get("iss"); iss != "" && iss != rp.idp.Issuer() {
		t.Errorf("authorization: iss %q, want %q", iss, rp.idp.Issuer())
	}
	f.callback = cb
	f.code = cb.Query().Get("code")
	return f
}

// signIn is authorize that fails the test unless the answer has a code.
func (rp *testRP) signIn(t *testing.T, user string, opts ...oauth2.AuthCodeOption) rpFlow {
	t.Helper()
	f := rp.authorize(t, user, opts...)
	if q := f.callback.Query(); q.Get("error") != "" || f.code == "" {
		t.Fatalf("authorization: no code: %s", f.callback)
	}
	return f
}

// exchange redeems code with the PKCE verifier (and opts).
func (rp *testRP) exchange(t *testing.T, code, verifier string, opts ...oauth2.AuthCodeOption) (*oauth2.Token, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return rp.conf.Exchange(ctx, code, append([]oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}, opts...)...)
}

// verifyIDToken verifies the token response's ID token with go-oidc (the
// IdP's keys, iss, aud = client_id, expiry) and its nonce, and returns its
// claims.
func (rp *testRP) verifyIDToken(t *testing.T, tok *oauth2.Token, nonce string) map[string]any {
	t.Helper()
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("token response has no id_token")
	}
	idt, err := rp.provider.Verifier(&oidc.Config{ClientID: rp.conf.ClientID}).Verify(t.Context(), raw)
	if err != nil {
		t.Fatalf("ID token does not verify: %v", err)
	}
	if idt.Nonce != nonce {
		t.Errorf("ID token nonce %q, want %q", idt.Nonce, nonce)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// wantTokenError fails the test unless err is a token endpoint error with
// code (and, when set, a description containing desc).
func wantTokenError(t *testing.T, err error, code, desc string) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		t.Fatalf("token request: %v, want error %s", err, code)
	}
	if re.ErrorCode != code || !strings.Contains(re.ErrorDescription, desc) {
		t.Fatalf("token request: error %q (%s), want %q mentioning %q", re.ErrorCode, re.ErrorDescription, code, desc)
	}
}

func wantClaim(t *testing.T, claims map[string]any, name string, want any) {
	t.Helper()
	if got := claims[name]; got != want {
		t.Errorf("claim %s = %v, want %v", name, got, want)
	}
}

// wantStrings checks that claim name is exactly the list want.
func wantStrings(t *testing.T, claims map[string]any, name string, want ...string) {
	t.Helper()
	list, _ := claims[name].([]any)
	var got []string
	for _, v := range list {
		s, _ := v.(string)
		got = append(got, s)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claim %s = %v, want %v", name, claims[name], want)
	}
}

func wantNoClaim(t *testing.T, claims map[string]any, names ...string) {
	t.Helper()
	for _, name := range names {
		if v, ok := claims[name]; ok {
			t.Errorf("claim %s = %v, want none", name, v)
		}
	}
}
