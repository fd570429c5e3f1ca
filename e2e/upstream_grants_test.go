//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// These tests show the http upstreams that act as the caller: oauth.grant
// jwt_bearer (Entra ID's on-behalf-of flow) and id_jag (enterprise-managed
// authorization), against the real IdP (e2e/idp, the entra profile, which
// grants on-behalf-of tokens and issues ID-JAGs), a second oidc-provider
// as the upstream's authorization server (the default profile, accepting
// the IdP's ID-JAGs with the jwt-bearer grant), and a second portcullis as
// the upstream MCP server, trusting both issuers, whose core whoami
// answers with the subject of the token it got. A recording proxy in
// front of it sees every Authorization header the front portcullis sends.
//
// The upstream's authorization server is oidc-provider rather than a
// portcullis in authorization-server mode (whose enterprise_idps accept
// ID-JAGs too, internal/authserver's tests) because the session that
// lists what the upstream offers gets a client-credentials token there,
// a grant portcullis's authorization server does not have.

const (
	grantsUser        = "alice@contoso.example"
	grantsUpstreamApp = "upstream-api"   // the upstream's app id at the IdP (on-behalf-of)
	grantsJAGClient   = "portcullis-jag" // Portcullis's client at the upstream's authorization server
	grantsJAGSecret   = "portcullis-jag-secret"
)

// recordingProxy forwards to target and records the Authorization header
// of every request.
type recordingProxy struct {
	URL   string
	mu    sync.Mutex
	auths []string
}

func startRecordingProxy(t *testing.T, target string) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			p.mu.Lock()
			p.auths = append(p.auths, r.In.Header.Get("Authorization"))
			p.mu.Unlock()
			r.SetURL(u)
			r.Out.Host = u.Host
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

func (p *recordingProxy) seen() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.auths)
}

// grantsWorld is the IdP, the upstream's authorization server, the
// upstream portcullis behind its recording proxy, and the front's
// upstreams entries: "obo" (jwt_bearer) and "jag" (id_jag), both to the
// upstream.
type grantsWorld struct {
	idp, upAS *IdP
	proxy     *recordingProxy
	upstreams []map[string]any
	// userRedirect is the redirect URI of the direct-mode user's sign-in
	// at the IdP, with the relying-party client.
	userRedirect string
}

func startGrantsWorld(t *testing.T, asOrigin string) *grantsWorld {
	t.Helper()
	w := &grantsWorld{userRedirect: "http://" + freeLoopbackAddr(t) + "/callback"}
	upASAddr := freeLoopbackAddr(t)
	_, upASPort, _ := net.SplitHostPort(upASAddr)
	upASIssuer := "http://" + upASAddr
	rp, _ := json.Marshal([]map[string]any{{
		"client_id":     idpRPClient,
		"client_secret": idpRPClientSecret,
		"redirect_uris": []string{asOrigin + "/oauth/callback", w.userRedirect},
		"grant_types": []string{"authorization_code", "refresh_token", "client_credentials",
			"urn:ietf:params:oauth:grant-type:jwt-bearer", "urn:ietf:params:oauth:grant-type:token-exchange"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "client_secret_basic",
	}})
	jagClients, _ := json.Marshal(map[string]string{upASIssuer: grantsJAGClient})
	w.idp = startIdPProfile(t, idpProfileEntra, "IDP_CLIENTS="+string(rp), "IDP_IDJAG_CLIENTS="+string(jagClients), "IDP_LOG_TOKENS=1")
	jag, _ := json.Marshal([]map[string]any{{
		"client_id": grantsJAGClient, "client_secret": grantsJAGSecret,
		"grant_types":    []string{"client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"response_types": []string{}, "redirect_uris": []string{},
		"token_endpoint_auth_method": "client_secret_basic", "scope": "mcp:tools",
	}})
	w.upAS = startIdP(t, "IDP_PORT="+upASPort, "IDP_IDJAG_TRUSTED_ISSUER="+w.idp.Issuer(), "IDP_CLIENTS="+string(jag), "IDP_LOG_TOKENS=1")
	if w.upAS.Issuer() != upASIssuer {
		t.Fatalf("the upstream's authorization server is %s, want %s", w.upAS.Issuer(), upASIssuer)
	}

	upAddr := freeLoopbackAddr(t)
	w.proxy = startRecordingProxy(t, "http://"+upAddr)
	startServer(t, nil, "--config", writeConfigFile(t, map[string]any{
		"auth": map[string]any{
			"resource": w.proxy.URL + "/mcp",
			"issuers": []map[string]any{
				{"issuer": w.idp.Issuer(), "audiences": []string{grantsUpstreamApp}, "allow_untyped_access_tokens": true},
				{"issuer": w.upAS.Issuer()},
			},
		},
		"tools": map[string]any{"toolsets": []string{"core"}},
	}), "--listen", upAddr)

	secret := func(name, value string) string {
		f := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(f, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	rpSecret := secret("rp-secret", idpRPClientSecret)
	w.upstreams = []map[string]any{
		{"name": "obo", "transport": "http", "url": w.proxy.URL + "/mcp", "required": true,
			"oauth": map[string]any{"grant": "jwt_bearer", "token_url": w.idp.TokenURL(), "client_id": idpRPClient,
				"client_secret_file": rpSecret, "scopes": []string{"api://" + grantsUpstreamApp + "/.default"}}},
		{"name": "jag", "transport": "http", "url": w.proxy.URL + "/mcp", "required": true,
			"oauth": map[string]any{"grant": "id_jag", "token_url": w.upAS.TokenURL(), "client_id": grantsJAGClient,
				"client_secret_file": secret("jag-secret", grantsJAGSecret), "audience": w.upAS.Issuer(), "scopes": []string{"mcp:tools"},
				"identity_provider": map[string]any{"token_url": w.idp.TokenURL(), "client_id": idpRPClient, "client_secret_file": rpSecret}}},
	}
	return w
}

// userToken signs user in at the IdP with the relying-party client, as
// an MCP client of the app does, and returns the app's access token.
func (w *grantsWorld) userToken(t *testing.T, ctx context.Context) string {
	t.Helper()
	q := url.Values{"response_type": {"code"}, "client_id": {idpRPClient}, "redirect_uri": {w.userRedirect}, "scope": {"openid"}, "state": {"s"}}
	cb, err := w.idp.Authorize(ctx, w.idp.Issuer()+"/auth?"+q.Encode(), grantsUser)
	if err != nil {
		t.Fatal(err)
	}
	code := cb.Query().Get("code")
	if code == "" {
		t.Fatalf("sign-in at the IdP: redirect to %s", cb)
	}
	status, tr := w.idp.Token(t, idpRPClient, idpRPClientSecret, url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {w.userRedirect}})
	if status != http.StatusOK || tr.AccessToken == "" {
		t.Fatalf("code exchange: status %d, %s: %s", status, tr.Error, tr.ErrorDescription)
	}
	return tr.AccessToken
}

// checkCalls waits for the front to list obo_whoami and jag_whoami, then
// calls each and wants the upstream to have seen user, through the
// issuer of each grant.
func (w *grantsWorld) checkCalls(t *testing.T, ctx context.Context, cs *sdk.ClientSession) {
	t.Helper()
	var names []string
	if !poll(30*time.Second, 200*time.Millisecond, func() bool {
		names = sdkToolNames(t, ctx, cs)
		return slices.Contains(names, "obo_whoami") && slices.Contains(names, "jag_whoami")
	}) {
		t.Fatalf("the front lists %v, want obo_whoami and jag_whoami", names)
	}
	for tool, issuer := range map[string]string{"obo_whoami": w.idp.Issuer(), "jag_whoami": w.upAS.Issuer()} {
		for range 2 { // the second call reuses the cached token
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tool})
			if err != nil {
				t.Fatalf("tools/call %s: %v", tool, err)
			}
			var who struct {
				Subject string `json:"subject"`
				Issuer  string `json:"issuer"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			if res.IsError || json.Unmarshal(b, &who) != nil || who.Subject != grantsUser || who.Issuer != issuer {
				t.Fatalf("tools/call %s: isError %v, %s %s; want the upstream to see %s from %s", tool, res.IsError, resultText(res), b, grantsUser, issuer)
			}
		}
	}
}

// checkNoLeak fails t when a token other than the upstream's own reached
// the upstream (every bearer token it saw must be for it: aud the
// upstream app or its resource; never one of callerTokens), or when a
// token either IdP issued is in the front's log.
func (w *grantsWorld) checkNoLeak(t *testing.T, front *server, callerTokens ...string) {
	t.Helper()
	seen := w.proxy.seen()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, a := range seen {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		if !ok {
			t.Errorf("the upstream got Authorization %q", a)
			continue
		}
		if slices.Contains(callerTokens, tok) {
			t.Errorf("the upstream got the caller's own token")
			continue
		}
		_, claims := decodeJWT(t, tok)
		if aud := jwtAudience(claims); !slices.Contains(aud, grantsUpstreamApp) && !slices.Contains(aud, w.proxy.URL+"/mcp") {
			t.Errorf("the upstream got a token for %v (issuer %v)", aud, claims["iss"])
		}
	}
	logs := front.Stderr() + front.Stdout()
	for _, tok := range append(append(w.idp.IssuedTokens(t), w.upAS.IssuedTokens(t)...), callerTokens...) {
		if strings.Contains(logs, tok) {
			t.Errorf("the front logged a token")
		}
	}
}

// TestUpstreamUserGrants: a go-sdk client calls, through the front
// portcullis, the upstream's whoami by both grants, signed in at the IdP
// directly (the caller's token is the app's access token, presented as
// the on-behalf-of assertion and as the ID-JAG request's subject) and
// through the front's authorization server (the IdP tokens kept from the
// sign-in: its access token for on-behalf-of, its ID token for the
// ID-JAG); the upstream sees the same user each time, and never the
// caller's token.
func TestUpstreamUserGrants(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	asAddr := freeLoopbackAddr(t)
	asOrigin := "http://" + asAddr
	w := startGrantsWorld(t, asOrigin)

	t.Run("signed in at the IdP", func(t *testing.T) {
		addr := freeLoopbackAddr(t)
		front := startServer(t, nil, "--config", writeConfigFile(t, map[string]any{
			"auth": map[string]any{
				"resource": "http://" + addr + "/mcp",
				"issuers":  []map[string]any{{"issuer": w.idp.Issuer(), "audiences": []string{idpRPClient}, "allow_untyped_access_tokens": true}},
			},
			"upstreams": w.upstreams,
		}), "--listen", addr)
		token := w.userToken(t, ctx)
		cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: front.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}, Timeout: 30 * time.Second}}, "")
		w.checkCalls(t, ctx, cs)
		if !strings.Contains(w.idp.Stderr(), "idp: on-behalf-of for "+grantsUser) || !strings.Contains(w.idp.Stderr(), "idp: id-jag for "+grantsUser+" from access_token") {
			t.Errorf("the IdP did not grant on-behalf-of and an ID-JAG for the caller's access token:\n%s", w.idp.Stderr())
		}
		w.checkNoLeak(t, front, token)
	})

	t.Run("signed in through the authorization server", func(t *testing.T) {
		cfg := asConfig(t, w.idp, asOrigin, asKeysFile(t), map[string]any{"upstreams": w.upstreams}, map[string]any{"idp": map[string]any{"preset": idpProfileEntra}})
		front := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", asAddr)
		cs, h, _ := sdkASConnect(t, ctx, w.idp, front.MCPURL(), grantsUser, "", nil)
		w.checkCalls(t, ctx, cs)
		if !strings.Contains(w.idp.Stderr(), "idp: id-jag for "+grantsUser+" from id_token") {
			t.Errorf("the IdP issued no ID-JAG for the kept ID token:\n%s", w.idp.Stderr())
		}
		w.checkNoLeak(t, front, sdkAccessToken(t, ctx, h))
	})
}
