//go:build e2e

package e2e

// End-to-end tests of auth: the real
// binary as an OAuth 2.1 resource server in front of a real OpenID provider
// (e2e/idp, oidc-provider), driven by plain HTTP, the Go SDK's OAuth client
// and the MCP Inspector; and `serve --dev` with its printed token and
// Inspector command.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// The protocol revisions the auth tests speak: the legacy, session-based
// one and the stateless one.
const (
	legacyProtocol = "2025-06-18"
	modernProtocol = "2026-07-28"
)

// otherResource is a resource that is not the server under test: tokens
// minted for it must be refused.
const otherResource = "http://127.0.0.1:1/mcp"

// authServer is a `portcullis serve` with auth on, trusting an IdP.
type authServer struct {
	*server
	// Resource is the configured public URL of /mcp (the token audience).
	Resource string
	IdP      *IdP
}

// authConfig is the auth section the tests use: the IdP as the one issuer,
// mcp:tools for any call, mcp:admin for echo (a hidden rule) and for
// calculator (a rule clients step up to).
func authConfig(idp *IdP, resource string) map[string]any {
	return map[string]any{
		"resource":         resource,
		"issuers":          []map[string]any{{"issuer": idp.Issuer()}},
		"scopes_supported": []string{"mcp:tools", "mcp:admin"},
		"required_scopes":  []string{"mcp:tools"},
		"policy": []map[string]any{
			{"tool": "echo", "scopes": []string{"mcp:admin"}, "hidden": true},
			{"tool": "calculator", "scopes": []string{"mcp:admin"}},
		},
	}
}

// startAuthServer starts the binary with auth (see authConfig) and the
// given toolsets on a loopback address chosen in advance, so that the
// resource URL is known when the config is written.
func startAuthServer(t *testing.T, idp *IdP, authSection map[string]any, toolsets ...string) *authServer {
	t.Helper()
	addr := freeLoopbackAddr(t)
	resource := "http://" + addr + "/mcp"
	if authSection == nil {
		authSection = authConfig(idp, resource)
	}
	cfg := writeConfigFile(t, map[string]any{
		"auth":  authSection,
		"tools": map[string]any{"toolsets": toolsets},
	})
	srv := startServer(t, nil, "--config", cfg, "--listen", addr)
	if srv.MCPURL() != resource {
		t.Fatalf("server listens at %s, want %s", srv.MCPURL(), resource)
	}
	return &authServer{server: srv, Resource: resource, IdP: idp}
}

// bearer returns the header carrying token.
func bearer(token string) http.Header {
	h := http.Header{}
	if token != "" {
		h.Set("Authorization", "Bearer "+token)
	}
	return h
}

// withHeaders returns h plus the "key", "value" pairs in kv.
func withHeaders(h http.Header, kv ...string) http.Header {
	h = h.Clone()
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// challengeParams parses the auth-params of a Bearer WWW-Authenticate
// challenge (key="value", comma separated).
func challengeParams(t *testing.T, h http.Header) map[string]string {
	t.Helper()
	vals := h.Values("WWW-Authenticate")
	if len(vals) != 1 {
		t.Fatalf("WWW-Authenticate: %q, want one challenge", vals)
	}
	v := vals[0]
	if !strings.HasPrefix(v, "Bearer ") {
		t.Fatalf("WWW-Authenticate %q: not a Bearer challenge", v)
	}
	params := map[string]string{}
	for _, m := range authParamRe.FindAllStringSubmatch(v, -1) {
		params[m[1]] = strings.ReplaceAll(m[2], `\"`, `"`)
	}
	return params
}

var authParamRe = regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`)

// modernMeta is the _meta a 2026-07-28 request carries.
const modernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"portcullis-e2e","version":"0.0.1"},"io.modelcontextprotocol/clientCapabilities":{}}`

// modernHeaders returns token's header plus the 2026-07-28 request headers
// for method (and the tool name for tools/call).
func modernHeaders(token, method, name string) http.Header {
	h := withHeaders(bearer(token), "MCP-Protocol-Version", modernProtocol, "Mcp-Method", method)
	if name != "" {
		h.Set("Mcp-Name", name)
	}
	return h
}

// modernToolCall is a 2026-07-28 tools/call body.
func modernToolCall(id int, name, args string) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + modernMeta + `}}`
}

// modernToolsList is a 2026-07-28 tools/list body.
func modernToolsList(id int) string {
	return `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list","params":{` + modernMeta + `}}`
}

// legacySession runs the initialize handshake of revision version with
// token and returns the headers later requests of the session carry.
func legacySession(t *testing.T, endpoint, token, version string) http.Header {
	t.Helper()
	resp, body := postMCP(t, http.DefaultClient, endpoint, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`, bearer(token))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize %s: status %d: %s", version, resp.StatusCode, body)
	}
	rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), body), "1")
	h := withHeaders(bearer(token), "MCP-Protocol-Version", version)
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		h.Set("Mcp-Session-Id", id)
	}
	resp, body = postMCP(t, http.DefaultClient, endpoint, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: status %d, want 202: %s", resp.StatusCode, body)
	}
	return h
}

// callOK POSTs body (a request with id 2) and returns its result, failing
// unless the answer is 200 with a result.
func callOK(t *testing.T, endpoint, body string, h http.Header) json.RawMessage {
	t.Helper()
	resp, b := postMCP(t, http.DefaultClient, endpoint, body, h)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200 (WWW-Authenticate %q): %s", resp.StatusCode, resp.Header.Values("WWW-Authenticate"), b)
	}
	return rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2")
}

// toolNames decodes a tools/list result into its tool names.
func toolNames(t *testing.T, res json.RawMessage) []string {
	t.Helper()
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(res, &list); err != nil {
		t.Fatalf("tools/list result: %v\n%s", err, res)
	}
	var names []string
	for _, tl := range list.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// checkToolText fails unless res is a successful tools/call result whose
// first text block contains want.
func checkToolText(t *testing.T, res json.RawMessage, want string) {
	t.Helper()
	var tr toolResult
	if err := json.Unmarshal(res, &tr); err != nil {
		t.Fatalf("tools/call result: %v\n%s", err, res)
	}
	if tr.IsError || len(tr.Content) == 0 || !strings.Contains(tr.Content[0].Text, want) {
		t.Fatalf("tools/call result %s: want a text block with %q and no error", res, want)
	}
}

const pingCallLegacy = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`

// bearerTransport adds a fixed bearer token to every request.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connectSDK connects the Go SDK client to url over Streamable HTTP, with
// transport's HTTPClient and OAuthHandler, asking for protocol version
// (empty: the SDK's latest). The session is closed on cleanup.
func connectSDK(t *testing.T, ctx context.Context, tr *sdk.StreamableClientTransport, version string) *sdk.ClientSession {
	t.Helper()
	tr.DisableStandaloneSSE = true
	tr.MaxRetries = -1
	client := sdk.NewClient(&sdk.Implementation{Name: "portcullis-e2e", Version: "0.0.1"}, nil)
	cs, err := client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("SDK connect to %s (protocol %q): %v", tr.Endpoint, version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func sdkToolNames(t *testing.T, ctx context.Context, cs *sdk.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

func sdkCallText(t *testing.T, ctx context.Context, cs *sdk.ClientSession, name string, args map[string]any, want string) {
	t.Helper()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if res.IsError || !strings.Contains(resultText(res), want) {
		t.Fatalf("tools/call %s: isError %v, text %q; want %q", name, res.IsError, resultText(res), want)
	}
}

// TestAuthClientCredentials: a client_credentials JWT for the server's
// resource URL is accepted, one for another resource is refused, a request
// without a token gets the challenge that leads to the metadata, and the
// metadata is right.
func TestAuthClientCredentials(t *testing.T) {
	idp := startIdP(t)
	srv := startAuthServer(t, idp, nil, "core")
	metadataURL := srv.BaseURL + "/.well-known/oauth-protected-resource/mcp"

	t.Run("RS256 token for the resource calls PingME", func(t *testing.T) {
		token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, srv.Resource)
		checkToolText(t, callOK(t, srv.MCPURL(), pingCallLegacy, bearer(token)), "BISMILLAH")

		// The same through the Go SDK client (2026-07-28), the token added
		// by the HTTP client.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{
			Endpoint:   srv.MCPURL(),
			HTTPClient: &http.Client{Transport: bearerTransport{token}, Timeout: 30 * time.Second},
		}, "")
		if v := cs.InitializeResult().ProtocolVersion; v != modernProtocol {
			t.Errorf("SDK negotiated %s, want %s", v, modernProtocol)
		}
		sdkCallText(t, ctx, cs, "PingME", nil, "BISMILLAH")
	})

	t.Run("ES256 token calls PingME", func(t *testing.T) {
		token := idp.ClientCredentialsToken(t, idpES256Client, idpES256ClientSecret, srv.Resource)
		if h, _ := decodeJWT(t, token); h["alg"] != "ES256" {
			t.Fatalf("alg %v, want ES256", h["alg"])
		}
		checkToolText(t, callOK(t, srv.MCPURL(), pingCallLegacy, bearer(token)), "BISMILLAH")
	})

	t.Run("token for another resource is invalid_token", func(t *testing.T) {
		token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, otherResource)
		for _, h := range []http.Header{bearer(token), modernHeaders(token, "tools/call", "PingME")} {
			body := pingCallLegacy
			if h.Get("Mcp-Method") != "" {
				body = modernToolCall(2, "PingME", "{}")
			}
			resp, b := postMCP(t, http.DefaultClient, srv.MCPURL(), body, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.StatusCode, b)
			}
			p := challengeParams(t, resp.Header)
			if p["error"] != "invalid_token" {
				t.Errorf("WWW-Authenticate %q: error %q, want invalid_token", resp.Header.Get("WWW-Authenticate"), p["error"])
			}
			if p["resource_metadata"] != metadataURL {
				t.Errorf("WWW-Authenticate %q: resource_metadata %q, want %q", resp.Header.Get("WWW-Authenticate"), p["resource_metadata"], metadataURL)
			}
			if strings.Contains(string(b), "BISMILLAH") {
				t.Errorf("the refused call ran the tool: %s", b)
			}
		}
	})

	t.Run("no token is 401 with the metadata URL and scope", func(t *testing.T) {
		for _, h := range []http.Header{nil, withHeaders(http.Header{}, "MCP-Protocol-Version", modernProtocol, "Mcp-Method", "tools/call", "Mcp-Name", "PingME")} {
			resp, b := postMCP(t, http.DefaultClient, srv.MCPURL(), pingCallLegacy, h)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", resp.StatusCode, b)
			}
			p := challengeParams(t, resp.Header)
			if p["resource_metadata"] != metadataURL {
				t.Errorf("WWW-Authenticate %q: resource_metadata %q, want %q", resp.Header.Get("WWW-Authenticate"), p["resource_metadata"], metadataURL)
			}
			if _, ok := p["scope"]; !ok || !slices.Contains(strings.Fields(p["scope"]), "mcp:tools") {
				t.Errorf("WWW-Authenticate %q: scope %q, want one naming mcp:tools", resp.Header.Get("WWW-Authenticate"), p["scope"])
			}
			if _, ok := p["error"]; ok {
				t.Errorf("WWW-Authenticate %q: a request without a token gets no error code (RFC 6750 §3.1)", resp.Header.Get("WWW-Authenticate"))
			}
		}
	})

	t.Run("token in the query string is refused", func(t *testing.T) {
		token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, srv.Resource)
		resp, b := postMCP(t, http.DefaultClient, srv.MCPURL()+"?access_token="+token, pingCallLegacy, nil)
		if resp.StatusCode < 400 || resp.StatusCode >= 500 || strings.Contains(string(b), "BISMILLAH") {
			t.Errorf("token in the query: status %d, want a 4xx refusal: %s", resp.StatusCode, b)
		}
	})

	t.Run("protected resource metadata", func(t *testing.T) {
		for _, u := range []string{srv.BaseURL + "/.well-known/oauth-protected-resource", metadataURL} {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, body := doRequest(t, http.DefaultClient, req)
			cancel()
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("GET %s: status %d, Content-Type %q: %s", u, resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			var meta struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
				ScopesSupported      []string `json:"scopes_supported"`
				BearerMethods        []string `json:"bearer_methods_supported"`
				ResourceName         string   `json:"resource_name"`
			}
			if err := json.Unmarshal(body, &meta); err != nil {
				t.Fatalf("GET %s: %v\n%s", u, err, body)
			}
			if meta.Resource != srv.Resource || !slices.Equal(meta.AuthorizationServers, []string{idp.Issuer()}) ||
				!slices.Equal(meta.BearerMethods, []string{"header"}) ||
				!slices.Equal(sortedStrings(meta.ScopesSupported), []string{"mcp:admin", "mcp:tools"}) || meta.ResourceName == "" {
				t.Errorf("GET %s: %s\nwant resource %s, authorization_servers [%s], bearer_methods_supported [header], scopes_supported [mcp:tools mcp:admin], a resource_name",
					u, body, srv.Resource, idp.Issuer())
			}
		}
	})
}

// TestAuthIDTokenRefused shows that an ID token from the real IdP is no
// access token here, even when its aud (the client's id) is an accepted
// audience, so only its type gives it away: 401 invalid_token, counted as
// wrong_token_type. With allow_untyped_access_tokens off its typ (not
// at+jwt) refuses it; on, its nonce does. An access token of the same
// issuer is accepted by the same server.
func TestAuthIDTokenRefused(t *testing.T) {
	idp := startIdP(t)
	tr := idp.AuthorizationCodeFlow(t, "alice", otherResource, "openid", "mcp:tools")
	if tr.IDToken == "" {
		t.Fatal("authorization code flow with scope openid: no id_token")
	}
	header, claims := decodeJWT(t, tr.IDToken)
	if typ, _ := header["typ"].(string); strings.EqualFold(typ, "at+jwt") {
		t.Fatalf("ID token header typ %q: the IdP types its ID tokens as access tokens", typ)
	}
	if claims["nonce"] == nil {
		t.Fatalf("ID token claims %v: no nonce", claims)
	}
	clientAud := jwtAudience(claims)
	for _, untyped := range []bool{false, true} {
		t.Run("allow_untyped_access_tokens="+strconv.FormatBool(untyped), func(t *testing.T) {
			addr := freeLoopbackAddr(t)
			resource := "http://" + addr + "/mcp"
			section := authConfig(idp, resource)
			section["issuers"] = []map[string]any{{"issuer": idp.Issuer(), "audiences": clientAud, "allow_untyped_access_tokens": untyped}}
			cfg := writeConfigFile(t, map[string]any{"auth": section, "tools": map[string]any{"toolsets": []string{"core"}}})
			srv := startServer(t, nil, "--config", cfg, "--listen", addr)

			resp, b := postMCP(t, http.DefaultClient, srv.MCPURL(), pingCallLegacy, bearer(tr.IDToken))
			if resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(b), "BISMILLAH") {
				t.Fatalf("ID token: status %d, want 401: %s", resp.StatusCode, b)
			}
			p := challengeParams(t, resp.Header)
			if p["error"] != "invalid_token" || p["error_description"] != "token is not an access token" {
				t.Errorf("WWW-Authenticate %q: want invalid_token, \"token is not an access token\"", resp.Header.Get("WWW-Authenticate"))
			}
			if n := scrapeSum(t, srv, "portcullis_auth_requests_total", `outcome="denied"`, `reason="wrong_token_type"`); n != 1 {
				t.Errorf(`portcullis_auth_requests_total{reason="wrong_token_type"} = %v, want 1`, n)
			}

			token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)
			checkToolText(t, callOK(t, srv.MCPURL(), pingCallLegacy, bearer(token)), "BISMILLAH")
		})
	}
}

// TestAuthConnectorFlowSDK runs the Go SDK's OAuth client against the
// binary: 401 → Protected Resource Metadata → authorization server
// metadata → dynamic client registration → authorization code + PKCE with
// resource → token → tools/list and tools/call; then a call of echo, which
// needs mcp:admin under a hidden rule, fails as a call of an unknown tool
// would, without a 403 that would make the SDK step up (and so confirm
// that echo exists); and a call of calculator, which needs mcp:admin under
// a rule that is not hidden, gets the 403 insufficient_scope that the SDK
// answers by stepping up (a second authorization for the scopes the
// challenge names), and then runs. Both protocol eras: the SDK's latest
// (2026-07-28) and a legacy session.
func TestAuthConnectorFlowSDK(t *testing.T) {
	idp := startIdP(t)
	srv := startAuthServer(t, idp, nil, "core")
	for _, version := range []string{"", legacyProtocol} {
		name := "protocol " + version
		if version == "" {
			name = "protocol latest"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			var authorizations []string // the scope of each authorization request
			fetch := idp.CodeFetcher("carol")
			h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
				DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{
					Metadata: &oauthex.ClientRegistrationMetadata{
						ClientName:   "portcullis-e2e-sdk",
						RedirectURIs: []string{"http://" + freeLoopbackAddr(t) + "/callback"},
					},
				},
				AuthorizationCodeFetcher: func(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
					authorizations = append(authorizations, scopeOfAuthURL(args.URL))
					return fetch(ctx, args)
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{
				Endpoint:     srv.MCPURL(),
				HTTPClient:   &http.Client{Timeout: 30 * time.Second},
				OAuthHandler: h,
			}, version)
			want := version
			if want == "" {
				want = modernProtocol
			}
			if v := cs.InitializeResult().ProtocolVersion; v != want {
				t.Errorf("negotiated %s, want %s", v, want)
			}
			if len(authorizations) != 1 {
				t.Fatalf("%d authorization(s) during connect, want 1 (the 401 challenge's)", len(authorizations))
			}
			if got := strings.Fields(authorizations[0]); !slices.Contains(got, "mcp:tools") || slices.Contains(got, "mcp:admin") {
				t.Errorf("first authorization asked for scope %q, want the 401 challenge's (mcp:tools, not mcp:admin)", authorizations[0])
			}
			ts, err := h.TokenSource(ctx)
			if err != nil || ts == nil {
				t.Fatalf("TokenSource: %v, %v", ts, err)
			}
			tok, err := ts.Token()
			if err != nil {
				t.Fatal(err)
			}
			claims := verifyIdPToken(t, idp, tok.AccessToken, srv.Resource)
			if claims["sub"] != "carol" {
				t.Errorf("sub %v, want carol", claims["sub"])
			}

			names := sdkToolNames(t, ctx, cs)
			if !slices.Contains(names, "PingME") || slices.Contains(names, "echo") {
				t.Errorf("tools/list with scope %v: %v, want PingME and no echo", tokenScopes(claims), names)
			}
			sdkCallText(t, ctx, cs, "PingME", nil, "BISMILLAH")

			// echo needs mcp:admin: hidden, it answers as a missing tool.
			_, hiddenErr := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hidden"}})
			_, missingErr := cs.CallTool(ctx, &sdk.CallToolParams{Name: "ohce", Arguments: map[string]any{"text": "hidden"}})
			if hiddenErr == nil || missingErr == nil || strings.ReplaceAll(hiddenErr.Error(), "echo", "ohce") != missingErr.Error() {
				t.Errorf("hidden echo: %v; missing ohce: %v; want the same unknown-tool error", hiddenErr, missingErr)
			}
			if len(authorizations) != 1 {
				t.Errorf("authorizations %q: a hidden tool must not start a step-up", authorizations)
			}

			// calculator needs mcp:admin and is listed: the 403's
			// challenge makes the SDK step up, and the call then runs.
			if !slices.Contains(names, "calculator") {
				t.Errorf("tools/list %v: want calculator, which callers can step up to", names)
			}
			sdkCallText(t, ctx, cs, "calculator", map[string]any{"operation": "add", "a": 2, "b": 3}, "5")
			if len(authorizations) != 2 || !slices.Contains(strings.Fields(authorizations[1]), "mcp:admin") || !slices.Contains(strings.Fields(authorizations[1]), "mcp:tools") {
				t.Errorf("authorizations %q: want a second one (the step-up) asking for mcp:tools and mcp:admin", authorizations)
			}
			if names := sdkToolNames(t, ctx, cs); !slices.Contains(names, "echo") {
				t.Errorf("tools/list after the step-up: %v, want echo, which mcp:admin now grants", names)
			}
		})
	}
}

// scopeOfAuthURL returns the scope parameter of an authorization request URL.
func scopeOfAuthURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return parsed.Query().Get("scope")
}

// TestAuthPolicy: a caller without echo's scope (mcp:admin, a hidden rule)
// does not see it in tools/list, and a call of it gets the unknown-tool
// error (not a 403 naming mcp:admin, which would confirm it exists), in
// both protocol eras; the same caller sees calculator (mcp:admin, not
// hidden) and a call of it gets the step-up 403 naming the scopes; a
// caller with mcp:admin sees and calls both.
func TestAuthPolicy(t *testing.T) {
	idp := startIdP(t)
	srv := startAuthServer(t, idp, nil, "core")
	limited := idp.ClientCredentialsToken(t, idpLimitedClient, idpLimitedClientSecret, srv.Resource)
	full := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, srv.Resource)
	const echoLegacy = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi there"}}}`
	const listLegacy = `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`

	checkDenied := func(t *testing.T, resp *http.Response, body []byte) {
		t.Helper()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `Unknown tool: \"echo\"`) {
			t.Fatalf("status %d, want 200 with the unknown-tool error: %s", resp.StatusCode, body)
		}
		if v := resp.Header.Get("WWW-Authenticate"); v != "" || strings.Contains(string(body), "mcp:admin") {
			t.Errorf("the answer names the scope: WWW-Authenticate %q, body %s", v, body)
		}
		if strings.Contains(string(body), "hi there") {
			t.Errorf("the denied call ran echo: %s", body)
		}
	}

	t.Run("limited, "+legacyProtocol, func(t *testing.T) {
		h := legacySession(t, srv.MCPURL(), limited, legacyProtocol)
		if names := toolNames(t, callOK(t, srv.MCPURL(), listLegacy, h)); !slices.Contains(names, "PingME") || slices.Contains(names, "echo") {
			t.Errorf("tools/list: %v, want PingME and no echo", names)
		}
		resp, body := postMCP(t, http.DefaultClient, srv.MCPURL(), echoLegacy, h)
		checkDenied(t, resp, body)
		checkToolText(t, callOK(t, srv.MCPURL(), pingCallLegacy, h), "BISMILLAH")
	})

	t.Run("limited, "+modernProtocol, func(t *testing.T) {
		res := callOK(t, srv.MCPURL(), modernToolsList(2), modernHeaders(limited, "tools/list", ""))
		if names := toolNames(t, res); !slices.Contains(names, "PingME") || slices.Contains(names, "echo") {
			t.Errorf("tools/list: %v, want PingME and no echo", names)
		}
		// Decided from the headers (Mcp-Name), and from the body alone.
		resp, body := postMCP(t, http.DefaultClient, srv.MCPURL(), modernToolCall(2, "echo", `{"text":"hi there"}`), modernHeaders(limited, "tools/call", "echo"))
		checkDenied(t, resp, body)
		resp, body = postMCP(t, http.DefaultClient, srv.MCPURL(), modernToolCall(2, "echo", `{"text":"hi there"}`), withHeaders(bearer(limited), "MCP-Protocol-Version", modernProtocol))
		checkDenied(t, resp, body)
		checkToolText(t, callOK(t, srv.MCPURL(), modernToolCall(2, "PingME", "{}"), modernHeaders(limited, "tools/call", "PingME")), "BISMILLAH")
		if names := toolNames(t, res); !slices.Contains(names, "calculator") {
			t.Errorf("tools/list: %v, want calculator, which the caller can step up to", names)
		}
		resp, body = postMCP(t, http.DefaultClient, srv.MCPURL(), modernToolCall(2, "calculator", `{"operation":"add","a":2,"b":3}`), modernHeaders(limited, "tools/call", "calculator"))
		p := challengeParams(t, resp.Header)
		if resp.StatusCode != http.StatusForbidden || p["error"] != "insufficient_scope" ||
			!slices.Contains(strings.Fields(p["scope"]), "mcp:admin") || !slices.Contains(strings.Fields(p["scope"]), "mcp:tools") ||
			p["resource_metadata"] != srv.BaseURL+"/.well-known/oauth-protected-resource/mcp" {
			t.Errorf("calculator without mcp:admin: status %d, WWW-Authenticate %q; want 403 insufficient_scope naming mcp:tools and mcp:admin and the metadata\n%s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	})

	t.Run("full, "+legacyProtocol, func(t *testing.T) {
		h := legacySession(t, srv.MCPURL(), full, legacyProtocol)
		if names := toolNames(t, callOK(t, srv.MCPURL(), listLegacy, h)); !slices.Contains(names, "echo") {
			t.Errorf("tools/list: %v, want echo", names)
		}
		checkToolText(t, callOK(t, srv.MCPURL(), echoLegacy, h), "hi there")
	})

	t.Run("full, "+modernProtocol, func(t *testing.T) {
		res := callOK(t, srv.MCPURL(), modernToolsList(2), modernHeaders(full, "tools/list", ""))
		if names := toolNames(t, res); !slices.Contains(names, "echo") {
			t.Errorf("tools/list: %v, want echo", names)
		}
		checkToolText(t, callOK(t, srv.MCPURL(), modernToolCall(2, "echo", `{"text":"hi there"}`), modernHeaders(full, "tools/call", "echo")), "hi there")
		checkToolText(t, callOK(t, srv.MCPURL(), modernToolCall(2, "calculator", `{"operation":"add","a":2,"b":3}`), modernHeaders(full, "tools/call", "calculator")), "5")
	})

	// The three calls of echo above are counted under the tool's name and
	// logged with the caller, never the token.
	t.Run("denials are counted and logged", func(t *testing.T) {
		if n := scrapeSum(t, srv.server, "portcullis_tool_calls_denied_total", `reason="policy"`, `tool="echo"`); n != 3 {
			t.Errorf(`portcullis_tool_calls_denied_total{reason="policy",tool="echo"} = %v, want 3`, n)
		}
		if n := scrapeSum(t, srv.server, "portcullis_tool_calls_denied_total", `reason="insufficient_scope"`, `tool="calculator"`); n != 1 {
			t.Errorf(`portcullis_tool_calls_denied_total{reason="insufficient_scope",tool="calculator"} = %v, want 1`, n)
		}
		if n := waitLogCount(srv.server, `"msg":"tool call denied"`, 4); n != 4 {
			t.Fatalf("%d denial log lines, want 4:\n%s", n, srv.Tail(20))
		}
		for line := range strings.Lines(srv.Stderr()) {
			if !strings.Contains(line, `"msg":"tool call denied"`) {
				continue
			}
			if !strings.Contains(line, `"subject":"`+idpLimitedClient+`"`) || !(strings.Contains(line, `"tool":"echo"`) && strings.Contains(line, `"reason":"policy"`) ||
				strings.Contains(line, `"tool":"calculator"`) && strings.Contains(line, `"reason":"insufficient_scope"`)) {
				t.Errorf("denial log line lacks the subject, tool or reason: %s", line)
			}
			if strings.Contains(line, limited) || strings.Contains(line, "hi there") {
				t.Errorf("denial log line holds the token or an argument: %s", line)
			}
		}
	})

	t.Run("a legacy session is bound to its caller", func(t *testing.T) {
		h := legacySession(t, srv.MCPURL(), full, legacyProtocol)
		other := idp.ClientCredentialsToken(t, idpES256Client, idpES256ClientSecret, srv.Resource)
		h.Set("Authorization", "Bearer "+other)
		resp, body := postMCP(t, http.DefaultClient, srv.MCPURL(), echoLegacy, h)
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "hi there") {
			t.Errorf("another caller's token used the session: status %d: %s", resp.StatusCode, body)
		}
	})
}

// TestAuthInspector: the MCP Inspector CLI (the TypeScript SDK) calls a
// tool with the bearer header, and fails without it.
func TestAuthInspector(t *testing.T) {
	idp := startIdP(t)
	srv := startAuthServer(t, idp, nil, "core")
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, srv.Resource)
	dir := t.TempDir()
	base := []string{"--cli", srv.MCPURL(), "--transport", "http"}
	call := []string{"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=through the gate"}

	t.Run("with the bearer header", func(t *testing.T) {
		args := slices.Concat(base, []string{"--header", "Authorization: Bearer " + token}, call)
		run := runTool(t, 2*time.Minute, dir, "inspector", args...)
		if run.ExitCode != 0 {
			t.Fatalf("inspector tools/call with the header: exit %d\nstdout:\n%s\nstderr:\n%s", run.ExitCode, run.Stdout, run.Stderr)
		}
		var res toolResult
		if err := json.Unmarshal([]byte(run.Stdout), &res); err != nil {
			t.Fatalf("tools/call output is not JSON: %v\n%s", err, run.Stdout)
		}
		if res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, "through the gate") {
			t.Errorf("echo: %s, want a text block with the argument and no error", run.Stdout)
		}
	})

	t.Run("without it", func(t *testing.T) {
		run := runTool(t, 2*time.Minute, dir, "inspector", slices.Concat(base, call)...)
		if run.ExitCode == 0 || strings.Contains(run.Stdout, "through the gate") {
			t.Errorf("inspector tools/call without a token: exit %d, want a failure\nstdout:\n%s\nstderr:\n%s", run.ExitCode, run.Stdout, run.Stderr)
		}
	})
}

// devServer is a `portcullis serve --dev` process and what it printed.
type devServer struct {
	*server
	Banner string // everything printed to stdout up to the Inspector command
}

// startDevServer runs `portcullis serve --dev` (the README's `make run`, on
// a free port) with the extra environment variables env and waits for its
// banner on stdout, up to the line of the Inspector command.
func startDevServer(t *testing.T, env ...string) *devServer {
	t.Helper()
	return waitDevBanner(t, startServer(t, env, "--dev"))
}

// waitDevBanner waits for the banner of s, a server started with --dev.
func waitDevBanner(t *testing.T, s *server) *devServer {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		out := s.Stdout()
		if i := strings.Index(out, "--method"); i >= 0 {
			if end := strings.IndexByte(out[i:], '\n'); end >= 0 {
				return &devServer{server: s, Banner: out[:i+end+1]}
			}
		}
		select {
		case <-tick.C:
		case <-s.Done():
			t.Fatalf("portcullis --dev exited before printing its banner: %v\nstdout: %q", s.ExitErr(), out)
		case <-deadline.C:
			t.Fatalf("portcullis --dev did not print its banner within 60s (stdout so far: %q)", out)
		}
	}
}

// shellWords splits a line of sh words: blanks separate words, double
// quotes group (no escapes are needed by the banner), $NAME expands from vars.
func shellWords(line string, vars map[string]string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			quoted = !quoted
			inWord = true
		case !quoted && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '$':
			j := i + 1
			for j < len(line) && (line[j] == '_' || 'A' <= line[j] && line[j] <= 'Z' || 'a' <= line[j] && line[j] <= 'z' || '0' <= line[j] && line[j] <= '9') {
				j++
			}
			cur.WriteString(vars[line[i+1:j]])
			i = j - 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestDevModeInspector: `portcullis serve --dev` starts, prints a token and
// an Inspector command, and that command, with that token, lists the tools.
func TestDevModeInspector(t *testing.T) {
	d := startDevServer(t)
	t.Logf("banner:\n%s", d.Banner)

	m := regexp.MustCompile(`(?m)^\s*export MCP_TOKEN=(\S+)\s*$`).FindStringSubmatch(d.Banner)
	if m == nil {
		t.Fatalf("no `export MCP_TOKEN=…` line in the banner:\n%s", d.Banner)
	}
	token := m[1]
	header, claims := decodeJWT(t, token)
	if aud := jwtAudience(claims); !slices.Equal(aud, []string{d.MCPURL()}) {
		t.Errorf("dev token aud %v, want [%s]", aud, d.MCPURL())
	}
	t.Logf("dev token header %v, iss %v, scope %v", header, claims["iss"], claims["scope"])

	// The printed command: "npx --yes PKG --cli URL … \" continued on the
	// next line. --yes: on a fresh npm config, npx otherwise asks before
	// installing, and fails when it cannot ask.
	i := strings.Index(d.Banner, "npx ")
	if i < 0 {
		t.Fatalf("no npx command in the banner:\n%s", d.Banner)
	}
	command := strings.ReplaceAll(d.Banner[i:], "\\\n", " ")
	command, _, _ = strings.Cut(command, "\n")
	words := shellWords(command, map[string]string{"MCP_TOKEN": token})
	if len(words) < 4 || words[0] != "npx" || words[1] != "--yes" || !strings.HasPrefix(words[2], "@modelcontextprotocol/inspector") {
		t.Fatalf("printed command %q: want npx --yes @modelcontextprotocol/inspector…", command)
	}
	if v := installedInspectorVersion(t); words[2] != "@modelcontextprotocol/inspector@"+v {
		t.Errorf("printed command runs %s, but the tested Inspector is %s", words[2], v)
	}
	args := words[3:]
	if !slices.Contains(args, d.MCPURL()) || !slices.Contains(args, "Authorization: Bearer "+token) {
		t.Fatalf("printed command %q: want the URL %s and the bearer header", command, d.MCPURL())
	}

	dir := t.TempDir()
	run := runTool(t, 2*time.Minute, dir, "inspector", args...)
	if run.ExitCode != 0 {
		t.Fatalf("printed inspector command: exit %d\nstdout:\n%s\nstderr:\n%s", run.ExitCode, run.Stdout, run.Stderr)
	}
	if names := toolNames(t, json.RawMessage(run.Stdout)); !slices.Contains(names, "PingME") {
		t.Errorf("tools/list: %v, want PingME", names)
	}

	// The same command without the token fails.
	noAuth := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return strings.HasPrefix(a, "Authorization:") })
	noAuth = slices.DeleteFunc(noAuth, func(a string) bool { return a == "--header" })
	if run := runTool(t, 2*time.Minute, dir, "inspector", noAuth...); run.ExitCode == 0 {
		t.Errorf("inspector %q without the token: exit 0, want a failure\n%s", noAuth, run.Stdout)
	}
}

// installedInspectorVersion is the version of the Inspector runTool runs.
func installedInspectorVersion(t *testing.T) string {
	t.Helper()
	path, _ := nodeTool(t, "inspector")
	root := filepath.Join(filepath.Dir(filepath.Dir(path)), "@modelcontextprotocol", "inspector", "package.json")
	data, err := os.ReadFile(root)
	if err != nil {
		t.Fatalf("Inspector version: %v", err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(data, &pkg); err != nil || pkg.Version == "" {
		t.Fatalf("Inspector version in %s: %v", root, err)
	}
	return pkg.Version
}
