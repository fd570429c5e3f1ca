//go:build e2e

package e2e

// Connected accounts (upstreams[].oauth.grant authorization_code), end to
// end: the real binary in authorization-server mode in front of the
// company IdP (e2e/idp, default profile), and two "SaaS" services, each an
// oidc-provider of its own (e2e/idp, default profile, its own users, with
// Portcullis registered as a confidential client whose redirect URI is
// <portcullis>/connections/callback, refresh tokens rotated on each use)
// in front of an MCP server of the test that checks that SaaS's tokens:
//   - octo: JWT access tokens (aud the MCP server's URL), verified
//     against the SaaS's JWKS; Portcullis is configured with its issuer
//     and resource; its access tokens live 33 s, so Portcullis (which
//     refreshes 30 s before expiry) refreshes them within seconds;
//   - bee: opaque access tokens, checked by introspection at the SaaS;
//     Portcullis discovers its authorization server from the MCP server's
//     Protected Resource Metadata.
// Each MCP server's whoami answers with the SaaS user it sees; its
// tools/list also takes a static service credential, which Portcullis's
// listing session sends (upstreams[].headers), and which whoami refuses.
// Headless Chromium is the users' browser on the connect pages.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// caOctoTTL is the octo SaaS's access-token lifetime: a little more than
// the 30 s before expiry at which Portcullis refreshes, so that a token
// is used for a few seconds and then refreshed.
const caOctoTTL = 33

// caServiceUser is who a SaaS MCP server takes the service credential
// for.
const caServiceUser = "service"

// saasMCP is a SaaS's MCP server: tools/list for its users and for the
// service credential, and whoami, answering with the SaaS user whose
// token it got.
type saasMCP struct {
	Name    string
	URL     string // its endpoint, http://127.0.0.1:PORT/mcp
	AS      *IdP
	Service string // the service credential

	opaque bool
	client *http.Client

	mu   sync.Mutex
	jwks *jose.JSONWebKeySet
	// seen are the bearer tokens it got, each with the user it took it
	// for ("" when it refused it).
	seen []saasSeen
}

type saasSeen struct{ Token, User string }

// startSaaSMCP starts the MCP server of the SaaS whose authorization
// server is as; with opaque, it introspects tokens, else it verifies
// them as JWTs. The server listens at addr.
func startSaaSMCP(t *testing.T, name string, as *IdP, addr string, opaque bool) *saasMCP {
	t.Helper()
	m := &saasMCP{Name: name, URL: "http://" + addr + "/mcp", AS: as, Service: name + "-service-credential", opaque: opaque,
		client: &http.Client{Timeout: 10 * time.Second}}
	server := sdk.NewServer(&sdk.Implementation{Name: name + "-mcp", Version: "1.0.0"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "whoami", Description: "The " + name + " user the call acts as."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			ti := req.Extra.TokenInfo
			if ti == nil || ti.UserID == caServiceUser {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "whoami needs a user's token"}}}, nil, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: ti.UserID}}}, nil, nil
		})
	prm := "http://" + addr + "/.well-known/oauth-protected-resource/mcp"
	mux := http.NewServeMux()
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: m.URL, AuthorizationServers: []string{as.Issuer()}, BearerMethodsSupported: []string{"header"},
	}))
	mux.Handle("/mcp", auth.RequireBearerToken(m.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm})(
		sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return m
}

// verify is the MCP server's token check.
func (m *saasMCP) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	user, exp, err := m.check(ctx, token)
	m.mu.Lock()
	m.seen = append(m.seen, saasSeen{Token: token, User: user})
	m.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	return &auth.TokenInfo{UserID: user, Expiration: exp}, nil
}

func (m *saasMCP) check(ctx context.Context, token string) (string, time.Time, error) {
	if token == m.Service {
		return caServiceUser, time.Now().Add(time.Hour), nil
	}
	if m.opaque {
		return m.introspect(ctx, token)
	}
	keys, err := m.keys(ctx)
	if err != nil {
		return "", time.Time{}, err
	}
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256, jose.ES256})
	if err != nil {
		return "", time.Time{}, err
	}
	var c jwt.Claims
	if err := tok.Claims(keys, &c); err != nil {
		return "", time.Time{}, err
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: m.AS.Issuer(), AnyAudience: jwt.Audience{m.URL}, Time: time.Now()}, 0); err != nil {
		return "", time.Time{}, err
	}
	if c.Subject == "" || c.Expiry == nil {
		return "", time.Time{}, errors.New("no subject or expiry")
	}
	return c.Subject, c.Expiry.Time(), nil
}

func (m *saasMCP) keys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.jwks != nil {
		return m.jwks, nil
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.AS.JWKSURL(), nil)
	resp, err := m.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, err
	}
	m.jwks = &set
	return m.jwks, nil
}

// introspect asks the SaaS about token (RFC 7662) as its introspecting
// client.
func (m *saasMCP) introspect(ctx context.Context, token string) (string, time.Time, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.AS.IntrospectionURL(), strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(idpIntrospector, idpIntrospectorSecret)
	resp, err := m.client.Do(req)
	if err != nil {
		return "", time.Time{}, err
	}
	defer resp.Body.Close()
	var in struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
		Exp    int64  `json:"exp"`
		Aud    any    `json:"aud"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return "", time.Time{}, err
	}
	aud := fmt.Sprint(in.Aud)
	if !in.Active || in.Sub == "" || (aud != m.URL && aud != "["+m.URL+"]") {
		return "", time.Time{}, fmt.Errorf("inactive or not for %s (aud %s)", m.URL, aud)
	}
	return in.Sub, time.Unix(in.Exp, 0), nil
}

// Seen returns the tokens the MCP server got.
func (m *saasMCP) Seen() []saasSeen {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.seen)
}

// LastToken is the last token the MCP server took for user.
func (m *saasMCP) LastToken(user string) string {
	seen := m.Seen()
	for i := len(seen) - 1; i >= 0; i-- {
		if seen[i].User == user {
			return seen[i].Token
		}
	}
	return ""
}

// startSaaS starts a SaaS: its authorization server, with Portcullis
// (at origin) registered as clientID, and its MCP server, which the
// authorization server's tokens name as their resource.
func startSaaS(t *testing.T, name, origin, clientID string, opaque bool, env ...string) *saasMCP {
	t.Helper()
	return startSaaSMCP(t, name, startSaaSAS(t, origin, clientID, env...), freeLoopbackAddr(t), opaque)
}

// startSaaSAS starts a SaaS's authorization server, with Portcullis (at
// origin) registered as clientID, refresh tokens rotated, and every
// token it issues logged; env is more of its environment.
func startSaaSAS(t *testing.T, origin, clientID string, env ...string) *IdP {
	t.Helper()
	return startIdP(t, append(idpRP{ClientID: clientID, RedirectURIs: []string{origin + "/connections/callback"}}.Env(),
		append([]string{"IDP_REFRESH_TOKENS=rotate", "IDP_LOG_TOKENS=1"}, env...)...)...)
}

// saasGrant is one token response a SaaS logged (IDP_LOG_TOKENS).
type saasGrant struct {
	GrantType    string `json:"grant_type"`
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
}

// saasGrants returns the token responses as logged.
func saasGrants(t *testing.T, as *IdP) []saasGrant {
	t.Helper()
	var out []saasGrant
	for line := range strings.Lines(as.Stderr()) {
		raw, ok := strings.CutPrefix(strings.TrimSpace(line), "idp: issued ")
		if !ok {
			continue
		}
		var g saasGrant
		if err := json.Unmarshal([]byte(raw), &g); err != nil {
			t.Fatalf("IdP log line %q: %v", line, err)
		}
		out = append(out, g)
	}
	return out
}

// recordingTransport keeps everything the MCP client receives.
type recordingTransport struct {
	mu   sync.Mutex
	got  strings.Builder
	base http.RoundTripper
}

func (rt *recordingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := rt.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	for k, v := range resp.Header {
		fmt.Fprintf(&rt.got, "%s: %s\n", k, strings.Join(v, ", "))
	}
	rt.mu.Unlock()
	resp.Body = &recordingBody{ReadCloser: resp.Body, rt: rt}
	return resp, nil
}

func (rt *recordingTransport) String() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.got.String()
}

type recordingBody struct {
	io.ReadCloser
	rt *recordingTransport
}

func (b *recordingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.rt.mu.Lock()
	b.rt.got.Write(p[:n])
	b.rt.mu.Unlock()
	return n, err
}

// caClient is a company user's MCP client (the Go SDK, 2025-11-25),
// signed in through Portcullis's authorization server.
type caClient struct {
	User string
	cs   *sdk.ClientSession
	rec  *recordingTransport
	// completed gets the ids of notifications/elicitation/complete.
	completed chan string
}

// caConnect signs user in through Portcullis at endpoint, declining the
// connections chained into the sign-in (so that the calls ask for them),
// and connects the SDK's client, declaring URL elicitation when
// urlElicitation.
func caConnect(t *testing.T, ctx context.Context, idp *IdP, endpoint, user string, urlElicitation bool) *caClient {
	t.Helper()
	b := newSignInBrowser(idp, user)
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		PreregisteredClient:      &oauthex.ClientCredentials{ClientID: asAppClient},
		RedirectURL:              "http://" + freeLoopbackAddr(t) + "/callback",
		AuthorizationCodeFetcher: b.CodeFetcher(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := caConnectWith(t, ctx, &sdk.StreamableClientTransport{Endpoint: endpoint, OAuthHandler: h}, http.DefaultTransport, user, urlElicitation)
	if b.Declined == 0 {
		t.Fatalf("%s's sign-in chained no connection to decline", user)
	}
	return c
}

// caConnectWith connects the SDK's client of user with tr, whose HTTP
// client sends by base, declaring URL elicitation when urlElicitation.
func caConnectWith(t *testing.T, ctx context.Context, tr *sdk.StreamableClientTransport, base http.RoundTripper, user string, urlElicitation bool) *caClient {
	t.Helper()
	c := &caClient{User: user, rec: &recordingTransport{base: base}, completed: make(chan string, 4)}
	opts := &sdk.ClientOptions{}
	if urlElicitation {
		opts.Capabilities = &sdk.ClientCapabilities{Elicitation: &sdk.ElicitationCapabilities{URL: &sdk.URLElicitationCapabilities{}}}
		opts.ElicitationCompleteHandler = func(_ context.Context, req *sdk.ElicitationCompleteNotificationRequest) {
			c.completed <- req.Params.ElicitationID
		}
	}
	client := sdk.NewClient(&sdk.Implementation{Name: "portcullis-e2e-" + user, Version: "0.0.1"}, opts)
	tr.MaxRetries = -1
	tr.HTTPClient = &http.Client{Transport: c.rec, Timeout: 60 * time.Second}
	var err error
	c.cs, err = client.Connect(ctx, tr, &sdk.ClientSessionOptions{ProtocolVersion: asProtocol})
	if err != nil {
		t.Fatalf("%s: connect: %v", user, err)
	}
	t.Cleanup(func() { _ = c.cs.Close() })
	return c
}

// caAnswer is a call's outcome: the tool's text, or the URL elicitation
// asked for (-32042), or a tool error.
type caAnswer struct {
	Text    string
	IsError bool
	// Elicitation is the URL-mode elicitation of a -32042 error.
	Elicitation *sdk.ElicitParams
	Err         error
}

func (a caAnswer) String() string {
	switch {
	case a.Elicitation != nil:
		return fmt.Sprintf("URL elicitation %s (%s)", a.Elicitation.URL, a.Elicitation.ElicitationID)
	case a.Err != nil:
		return "error: " + a.Err.Error()
	case a.IsError:
		return "tool error: " + a.Text
	}
	return a.Text
}

// Call calls tool.
func (c *caClient) Call(t *testing.T, ctx context.Context, tool string) caAnswer {
	t.Helper()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: map[string]any{}})
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) && rpcErr.Code == sdk.CodeURLElicitationRequired {
		var data struct {
			Elicitations []*sdk.ElicitParams `json:"elicitations"`
		}
		if err := json.Unmarshal(rpcErr.Data, &data); err != nil || len(data.Elicitations) != 1 {
			t.Fatalf("%s: %s: -32042 with data %s: want one elicitation (%v)", c.User, tool, rpcErr.Data, err)
		}
		return caAnswer{Elicitation: data.Elicitations[0]}
	}
	if err != nil {
		return caAnswer{Err: err}
	}
	return caAnswer{Text: strings.TrimSpace(resultText(res)), IsError: res.IsError}
}

// Want calls tool and wants the answer text.
func (c *caClient) Want(t *testing.T, ctx context.Context, tool, want string) {
	t.Helper()
	if a := c.Call(t, ctx, tool); a.Text != want || a.IsError || a.Err != nil || a.Elicitation != nil {
		t.Fatalf("%s: %s answered %s, want %q", c.User, tool, a, want)
	}
}

// connectLink matches the link of the connect page in a tool error.
var connectLink = regexp.MustCompile(`http://127\.0\.0\.1:\d+/connections/start\?id=[A-Za-z0-9_%-]+`)

// WantPage calls tool and wants the tool error naming the connect page of
// origin, whose link it returns.
func (c *caClient) WantPage(t *testing.T, ctx context.Context, tool, origin string) string {
	t.Helper()
	a := c.Call(t, ctx, tool)
	link := connectLink.FindString(a.Text)
	if !a.IsError || a.Err != nil || a.Elicitation != nil || !strings.HasPrefix(link, origin+"/connections/start?id=") {
		t.Fatalf("%s: %s answered %s; want a tool error naming the connect page", c.User, tool, a)
	}
	return link
}

// WantElicitation calls tool and wants the URL elicitation error for the
// connect page of origin.
func (c *caClient) WantElicitation(t *testing.T, ctx context.Context, tool, origin string) *sdk.ElicitParams {
	t.Helper()
	a := c.Call(t, ctx, tool)
	e := a.Elicitation
	if e == nil || e.Mode != "url" || e.ElicitationID == "" || !strings.HasPrefix(e.URL, origin+"/connections/start?id=") || e.Message == "" {
		t.Fatalf("%s: %s answered %s; want the URL elicitation error (-32042) for the connect page", c.User, tool, a)
	}
	return e
}

// WaitCompleted waits for notifications/elicitation/complete of id.
func (c *caClient) WaitCompleted(t *testing.T, id string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case got := <-c.completed:
			if got == id {
				return
			}
			t.Errorf("%s: notifications/elicitation/complete for %q, want %q", c.User, got, id)
		case <-timeout:
			t.Fatalf("%s: no notifications/elicitation/complete for %s within 30s", c.User, id)
		}
	}
}

// chromeConnect opens the connect link in tab and goes through the
// sign-ins on the way (at each IdP of logins, its login name: the
// company's, then the SaaS's), up to Portcullis's page after the
// callback, whose text it returns.
func chromeConnect(t *testing.T, tab context.Context, link, origin string, logins map[string]string) string {
	t.Helper()
	resp, _ := chromeThrough(t, tab, link, origin+"/connections/callback?", logins)
	text, err := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusOK {
		t.Fatalf("connect: the callback page answered %d: %s", resp.Status, text)
	}
	return text
}

// chromeThrough opens link in tab and goes through the IdPs' forms on the
// way (at each IdP of logins, its login name, then its consent) until the
// browser lands on a URL that starts with end. It returns that page's
// response and every URL the browser landed on.
func chromeThrough(t *testing.T, tab context.Context, link, end string, logins map[string]string) (*network.Response, []string) {
	t.Helper()
	resp, err := chromedp.Run(tab, chromedp.NavigateResponse(link))
	var path []string
	for step := 0; ; step++ {
		if err != nil {
			t.Fatalf("step %d from %s (after %v): %v", step, link, path, err)
		}
		path = append(path, resp.URL)
		if strings.HasPrefix(resp.URL, end) {
			return resp, path
		}
		var login string
		for issuer, l := range logins {
			if strings.HasPrefix(resp.URL, issuer+"/") {
				login = l
			}
		}
		if step > 12 || login == "" {
			text, _ := chromedp.Run(tab, chromedp.Text(chromedp.CSS("body")))
			t.Fatalf("step %d: at %s (status %d), want an IdP's forms or %s; path %v; page: %s", step, resp.URL, resp.Status, end, path, text)
		}
		inputs, qerr := chromedp.Run(tab, chromedp.Nodes(chromedp.CSS(`input[name="login"]`), chromedp.AtLeast(0)))
		if qerr != nil {
			t.Fatalf("step %d at %s: %v", step, resp.URL, qerr)
		}
		if len(inputs) > 0 {
			if err := chromedp.Do(tab,
				chromedp.SendKeys(chromedp.CSS(`input[name="login"]`), login),
				chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "any"),
			); err != nil {
				t.Fatalf("the login form at %s: %v", resp.URL, err)
			}
		}
		resp, err = chromedp.RunResponse(tab, chromedp.Click(chromedp.CSS(`button[type="submit"]`)))
	}
}

// caFile writes content to a new file and returns its path.
func caFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// caVaultKeys writes connections.keys_file: one random key.
func caVaultKeys(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return caFile(t, "vault-keys", base64.StdEncoding.EncodeToString(key))
}

// caUpstream is the upstreams entry of the SaaS s, whose authorization
// server has Portcullis as clientID: its issuer and resource configured
// when configured, else discovered from its MCP server's metadata; the
// listing session sends the service credential.
func caUpstream(t *testing.T, s *saasMCP, clientID, secret string, configured bool) map[string]any {
	t.Helper()
	oauth := map[string]any{"grant": "authorization_code", "client_id": clientID, "client_secret_file": caFile(t, s.Name+"-secret", secret)}
	if configured {
		oauth["issuer"], oauth["resource"] = s.AS.Issuer(), s.URL
	}
	return map[string]any{"name": s.Name, "transport": "http", "url": s.URL, "required": true, "oauth": oauth,
		"headers": []map[string]any{{"name": "Authorization", "value_file": caFile(t, s.Name+"-service", "Bearer "+s.Service)}}}
}

// atSignIn is u with oauth.connect_at_sign_in: its account is chained
// into each sign-in at the authorization server.
func atSignIn(u map[string]any) map[string]any {
	u["oauth"].(map[string]any)["connect_at_sign_in"] = true
	return u
}

// TestConnectedAccounts shows connected accounts end to end (each user's
// sign-in through the authorization server goes on without the
// connections chained into it: they decline them at the SaaS and follow
// "Continue without it"):
//   - alice's client (URL elicitation declared) calls octo's whoami and
//     gets the URL elicitation error (-32042) for the connect page; her
//     browser opens it, signs in at the company IdP, then at octo as
//     octo-alice; the client gets notifications/elicitation/complete and
//     the retried call answers octo-alice; the same for bee, discovered
//     from its MCP server's metadata, as bee-alice;
//   - bob's client (no URL elicitation) gets a tool error naming the
//     page; his browser connects octo as octo-bob; each sees only their
//     own account, and bob is asked to connect bee, which alice has;
//   - the TypeScript SDK's client of carol gets the same tool error;
//   - the TypeScript SDKs' clients (v1, v2) of dave and erin, declaring
//     URL elicitation, get it, are told when their user's browser has
//     connected octo, and the retried call answers octo-dave, octo-erin;
//     fay's (v2 on 2026-07-28) gets it in an input-required result, and
//     the call the SDK makes again once she connected answers octo-fay;
//   - octo's access tokens expire within seconds: alice's calls keep
//     answering while Portcullis refreshes them (octo saw refresh_token
//     grants, each rotating the refresh token);
//   - revoked at the SaaS (octo: bob's refresh token; bee: alice's
//     grant), the next calls ask to connect again: the page for bob once
//     his token is due, the URL elicitation for alice at once (bee's
//     server refuses the token); she connects again and is answered;
//   - the connections metric counts the connects and refreshes;
//   - no token of either SaaS is in Portcullis's logs or anything an MCP
//     client received, and each MCP server got only its own SaaS's
//     tokens and its service credential.
func TestConnectedAccounts(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	addr := freeLoopbackAddr(t)
	origin := "http://" + addr
	idp := startASIdP(t, "", origin)
	octo := startSaaS(t, "octo", origin, idpRPClient, false, fmt.Sprintf("IDP_ACCESS_TOKEN_TTL=%d", caOctoTTL))
	// bee's client is the one idp.mjs gives opaque tokens.
	bee := startSaaS(t, "bee", origin, idpOpaqueClient, true)
	browser := startChromium(t)

	cfg := asConfig(t, idp, origin, asKeysFile(t), map[string]any{
		"upstreams": []map[string]any{
			atSignIn(caUpstream(t, octo, idpRPClient, idpRPClientSecret, true)),
			// bee: the authorization server and resource come from its
			// MCP server's Protected Resource Metadata.
			atSignIn(caUpstream(t, bee, idpOpaqueClient, idpOpaqueClientSecret, false)),
		},
		"connections": map[string]any{"keys_file": caVaultKeys(t)},
	}, nil)
	srv := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	t.Logf("setup (3 IdPs, Chromium, portcullis) took %v", time.Since(start).Round(time.Millisecond))

	alice := caConnect(t, ctx, idp, srv.MCPURL(), "alice", true)
	var names []string
	if !poll(30*time.Second, 100*time.Millisecond, func() bool {
		names = sdkToolNames(t, ctx, alice.cs)
		return slices.Contains(names, "octo_whoami") && slices.Contains(names, "bee_whoami")
	}) {
		t.Fatalf("alice is offered %v, want octo_whoami and bee_whoami (listed with the service credentials)", names)
	}
	aliceTab := newTab(t, browser, false)
	company := idp.Issuer()

	// 1. URL elicitation: the connect page, the company sign-in, the
	// SaaS's; the completion notice; the retried call.
	e := alice.WantElicitation(t, ctx, "octo_whoami", origin)
	text := chromeConnect(t, aliceTab, e.URL, origin, map[string]string{company: "alice", octo.AS.Issuer(): "octo-alice"})
	if !strings.Contains(text, "octo is connected") {
		t.Errorf("the connect page after octo's sign-in: %q", text)
	}
	alice.WaitCompleted(t, e.ElicitationID)
	alice.Want(t, ctx, "octo_whoami", "octo-alice")
	connectedOcto := time.Now()

	// The same for bee; the browser is signed in already, so only bee's
	// sign-in shows.
	e = alice.WantElicitation(t, ctx, "bee_whoami", origin)
	chromeConnect(t, aliceTab, e.URL, origin, map[string]string{bee.AS.Issuer(): "bee-alice"})
	alice.WaitCompleted(t, e.ElicitationID)
	alice.Want(t, ctx, "bee_whoami", "bee-alice")

	// 5. No URL elicitation: a tool error naming the page, which bob's
	// own browser completes; a link is for its user alone, so alice's
	// browser is refused it.
	bob := caConnect(t, ctx, idp, srv.MCPURL(), "bob", false)
	link := bob.WantPage(t, ctx, "octo_whoami", origin)
	if resp, err := chromedp.Run(aliceTab, chromedp.NavigateResponse(link)); err != nil || resp.Status != http.StatusForbidden {
		t.Errorf("bob's link in alice's browser: %v, %v; want 403", resp, err)
	}
	bobTab := newTab(t, browser, false)
	chromeConnect(t, bobTab, link, origin, map[string]string{company: "bob", octo.AS.Issuer(): "octo-bob"})
	bob.Want(t, ctx, "octo_whoami", "octo-bob")

	// 2. Each sees only their own account.
	alice.Want(t, ctx, "octo_whoami", "octo-alice")
	alice.Want(t, ctx, "bee_whoami", "bee-alice")
	bob.WantPage(t, ctx, "bee_whoami", origin)

	// 6. The TypeScript SDK's client (no URL elicitation) gets the tool
	// error naming the page.
	run := runTSClients(t, ctx, newSignInBrowser(idp, "carol").Run, "v1", srv.MCPURL(), "http://"+freeLoopbackAddr(t)+"/callback",
		[]string{"MCP_CLIENT_ID=" + asAppClient}, []map[string]any{{"name": "octo_whoami", "arguments": map[string]any{}}})
	if r, ok := run.Results["octo_whoami"]; !ok || !r.IsError || !strings.HasPrefix(connectLink.FindString(r.Text), origin+"/connections/start?id=") {
		t.Errorf("the TypeScript client (%s): octo_whoami answered %+v; want a tool error naming the connect page", run.SDK, r)
	}

	// 7. The TypeScript SDKs' clients declaring URL elicitation (v1, v2)
	// get it; their user's browser connects octo; they are told, and the
	// retried call answers. On 2026-07-28 the request comes in an
	// input-required result, and there is no completion notice: the SDK
	// calls again once the user is done.
	for _, c := range []struct{ sdk, user, protocol string }{{"v1", "dave", ""}, {"v2", "erin", ""}, {"v2", "fay", "2026-07-28"}} {
		tab := newTab(t, browser, false)
		env := []string{"MCP_CLIENT_ID=" + asAppClient, "MCP_URL_ELICITATION=1"}
		if c.protocol != "" {
			env = append(env, "MCP_PROTOCOL="+c.protocol)
		}
		run := runTSClientsElicit(t, ctx, newSignInBrowser(idp, c.user).Run, func(ev tsClientsEvent) {
			// 2026-07-28's URL elicitation has no id: no completion
			// notice refers to it.
			if ev.Name != "octo_whoami" || (ev.ElicitationID == "") != (c.protocol != "") || !strings.HasPrefix(ev.URL, origin+"/connections/start?id=") {
				t.Errorf("the TypeScript client (%s %s): URL elicitation %+v; want one for octo_whoami's connect page", c.sdk, c.protocol, ev)
				return
			}
			chromeConnect(t, tab, ev.URL, origin, map[string]string{company: c.user, octo.AS.Issuer(): "octo-" + c.user})
		}, c.sdk, srv.MCPURL(), "http://"+freeLoopbackAddr(t)+"/callback", env, []map[string]any{{"name": "octo_whoami", "arguments": map[string]any{}}})
		switch {
		case len(run.Elicitations) != 1:
			t.Errorf("the TypeScript client (%s, %s): elicitations %+v; want one", run.SDK, run.Protocol, run.Elicitations)
		case c.protocol == "" && !slices.Equal(run.Completed, []string{run.Elicitations[0].ElicitationID}):
			t.Errorf("the TypeScript client (%s, %s): completed %v; want the elicitation's completion notice", run.SDK, run.Protocol, run.Completed)
		case c.protocol != "" && (run.Protocol != c.protocol || len(run.Completed) != 0):
			t.Errorf("the TypeScript client (%s, %s): completed %v; want %s and no completion notice", run.SDK, run.Protocol, run.Completed, c.protocol)
		}
		if r := run.Results["octo_whoami"]; r.Event != "result" || r.IsError || r.Text != "octo-"+c.user {
			t.Errorf("the TypeScript client (%s): the retried octo_whoami answered %+v, want octo-%s", run.SDK, r, c.user)
		}
		t.Logf("%s (%s): URL elicitation, completions %v, then %q", run.SDK, run.Protocol, run.Completed, run.Results["octo_whoami"].Text)
	}

	// 3. Expiry and refresh: octo's tokens are due for refresh caOctoTTL-30
	// seconds after they are issued; alice's calls keep answering while
	// octo sees refresh_token grants, each rotating the refresh token.
	refreshes := func() []saasGrant {
		return slices.DeleteFunc(saasGrants(t, octo.AS), func(g saasGrant) bool { return g.GrantType != "refresh_token" })
	}
	first := octo.LastToken("octo-alice")
	if !poll(time.Duration(caOctoTTL)*time.Second, 500*time.Millisecond, func() bool {
		alice.Want(t, ctx, "octo_whoami", "octo-alice")
		return octo.LastToken("octo-alice") != first && len(refreshes()) > 0
	}) {
		t.Fatalf("%v after connecting, octo saw no refresh of alice's token", time.Since(connectedOcto))
	}
	for _, g := range refreshes() {
		if g.AccessToken == "" || g.RefreshToken == "" {
			t.Errorf("a refresh at octo issued no new access or refresh token")
		}
	}
	t.Logf("alice's octo token refreshed %v after she connected", time.Since(connectedOcto).Round(time.Millisecond))

	// 4. Revoked at the SaaS, the next call asks again. At octo, bob's
	// refresh token (the latest octo issued him): his access token, a
	// JWT, stays good until it is due, then the refresh is refused
	// (invalid_grant) and he gets the page again.
	var bobRefresh string
	for _, g := range saasGrants(t, octo.AS) {
		if _, claims := decodeJWT(t, g.AccessToken); claims["sub"] == "octo-bob" && g.RefreshToken != "" {
			bobRefresh = g.RefreshToken
		}
	}
	if bobRefresh == "" {
		t.Fatal("octo issued bob no refresh token")
	}
	octo.AS.Revoke(t, bobRefresh)
	var last caAnswer
	if !poll(time.Duration(caOctoTTL)*time.Second, 500*time.Millisecond, func() bool {
		last = bob.Call(t, ctx, "octo_whoami")
		if last.Text == "octo-bob" && !last.IsError {
			return false
		}
		return last.IsError && strings.HasPrefix(connectLink.FindString(last.Text), origin+"/connections/start?id=")
	}) {
		t.Fatalf("bob's call after his octo grant was revoked: %s; want the page once his token is due", last)
	}
	alice.Want(t, ctx, "octo_whoami", "octo-alice")

	// At bee, alice's grant (revoking her access token, opaque, revokes
	// it): bee's MCP server refuses the token at once (401), the refresh
	// is refused, and the very call is answered with the URL elicitation.
	// She connects again, and the retried call answers.
	bee.AS.Revoke(t, bee.LastToken("bee-alice"))
	e = alice.WantElicitation(t, ctx, "bee_whoami", origin)
	text = chromeConnect(t, aliceTab, e.URL, origin, map[string]string{bee.AS.Issuer(): "bee-alice"})
	if !strings.Contains(text, "bee is connected") {
		t.Errorf("the connect page after bee's sign-in: %q", text)
	}
	alice.WaitCompleted(t, e.ElicitationID)
	alice.Want(t, ctx, "bee_whoami", "bee-alice")

	// Nothing of a SaaS's leaked: no token of theirs in Portcullis's logs
	// or in what the MCP clients received; each MCP server got only its
	// SaaS's tokens and its service credential, never a company token.
	logs := srv.Stderr() + srv.Stdout()
	received := alice.rec.String() + bob.rec.String()
	for _, s := range []*saasMCP{octo, bee} {
		issued := s.AS.IssuedTokens(t)
		if len(issued) == 0 {
			t.Fatalf("%s issued no token", s.Name)
		}
		for _, tok := range issued {
			if strings.Contains(logs, tok) {
				t.Errorf("Portcullis logged a token %s issued", s.Name)
			}
			if strings.Contains(received, tok) {
				t.Errorf("an MCP client received a token %s issued", s.Name)
			}
		}
		service := 0
		for _, seen := range s.Seen() {
			switch {
			case seen.Token == s.Service:
				service++
			case !slices.Contains(issued, seen.Token):
				t.Errorf("%s's MCP server got a token its SaaS did not issue", s.Name)
			}
		}
		if service == 0 {
			t.Errorf("%s's MCP server never got the service credential (the listing session's)", s.Name)
		}
	}

	// The metrics count what happened: connections at octo (alice's and
	// bob's) and bee (alice's, twice), refreshes at octo, and a refused
	// refresh at each after its revocation.
	const metric = "portcullis_connected_accounts_total"
	for _, c := range []struct {
		labels  []string
		atLeast float64
	}{
		{[]string{`upstream="octo"`, `action="connect"`, `outcome="ok"`}, 2},
		{[]string{`upstream="bee"`, `action="connect"`, `outcome="ok"`}, 2},
		{[]string{`upstream="octo"`, `action="refresh"`, `outcome="ok"`}, 1},
		{[]string{`upstream="octo"`, `action="refresh"`, `outcome="refused"`}, 1},
		{[]string{`upstream="bee"`, `action="refresh"`, `outcome="refused"`}, 1},
	} {
		if v := scrapeSum(t, srv, metric, c.labels...); v < c.atLeast {
			t.Errorf("%s{%s} = %v, want at least %v", metric, strings.Join(c.labels, ","), v, c.atLeast)
		}
	}
	t.Logf("TestConnectedAccounts took %v", time.Since(start).Round(time.Millisecond))
}

// TestConnectedAccountsReplicas: two replicas share the vault through
// Redis. Alice's client on replica A is asked to connect octo; her
// browser, behind the load balancer, does it on replica B; her client on
// A gets notifications/elicitation/complete, and her retried call on A,
// a client on B, and a client on a replica started after A is
// stopped (a rolling restart) all act as octo-alice. Redis holds none of
// octo's tokens in the clear.
func TestConnectedAccountsReplicas(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rdb := redistest.Start(t)
	front := startLB(t)
	idp := startASIdP(t, "", front.URL)
	octo := startSaaS(t, "octo", front.URL, idpRPClient, false)
	browser := startChromium(t)
	cfg := writeConfigFile(t, asConfig(t, idp, front.URL, asKeysFile(t), map[string]any{
		"redis":       map[string]any{"url": "redis://" + rdb.Addr + "/0"},
		"upstreams":   []map[string]any{atSignIn(caUpstream(t, octo, idpRPClient, idpRPClientSecret, true))},
		"connections": map[string]any{"keys_file": caVaultKeys(t)},
	}, nil))
	a := startServer(t, nil, "--config", cfg)
	b := startServer(t, nil, "--config", cfg)
	replicas := map[string]*server{"A": a, "B": b}

	// Alice's token from the authorization server (the replicas share
	// it), for clients that talk to one replica each.
	app := newASApp(t, front.URL, front.URL+"/mcp", "mcp:tools")
	// She declines octo, chained into the sign-in, to be asked for it at
	// her call.
	br := newSignInBrowser(idp, "alice")
	code := app.Code(t, lbSignIn(t, ctx, front, replicas, br, app, [4]string{"A", "A", "A", "A"}))
	if br.Declined != 1 {
		t.Fatalf("alice declined %d connections chained into her sign-in, want 1 (octo)", br.Declined)
	}
	token := mustToken(t, "code exchange")(app.Exchange(t, a.BaseURL, code)).AccessToken
	on := func(s *server) *caClient {
		t.Helper()
		c := caConnectWith(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL()}, bearerTransport{token}, "alice", true)
		var names []string
		if !poll(30*time.Second, 100*time.Millisecond, func() bool {
			names = sdkToolNames(t, ctx, c.cs)
			return slices.Contains(names, "octo_whoami")
		}) {
			t.Fatalf("alice is offered %v on %s, want octo_whoami", names, s.BaseURL)
		}
		return c
	}

	onA := on(a)
	e := onA.WantElicitation(t, ctx, "octo_whoami", front.URL)
	front.To(b)
	text := chromeConnect(t, newTab(t, browser, false), e.URL, front.URL, map[string]string{idp.Issuer(): "alice", octo.AS.Issuer(): "octo-alice"})
	if !strings.Contains(text, "octo is connected") {
		t.Errorf("the connect page on B after octo's sign-in: %q", text)
	}
	// A, which holds the session, tells the client (B published it).
	onA.WaitCompleted(t, e.ElicitationID)
	onA.Want(t, ctx, "octo_whoami", "octo-alice")
	on(b).Want(t, ctx, "octo_whoami", "octo-alice")

	// A rolling restart: A stops, A2 starts; the connection is kept.
	a.stop(t)
	on(startServer(t, nil, "--config", cfg)).Want(t, ctx, "octo_whoami", "octo-alice")

	issued := octo.AS.IssuedTokens(t)
	for _, e := range rdb.Dump(t) {
		for _, tok := range issued {
			if e.Contains([]byte(tok)) {
				t.Errorf("redis key %q holds a token octo issued, in the clear", e.Key)
			}
		}
	}
	t.Logf("TestConnectedAccountsReplicas took %v", time.Since(start).Round(time.Millisecond))
}

// TestConnectedAccountsChained: with Portcullis as the authorization
// server, a sign-in goes, after the company IdP and before the consent
// page, through the connect flow of each account the server needs that
// the user lacks, in Chromium:
//   - alice's sign-in for /mcp connects octo as octo-alice, then bee as
//     bee-alice, then shows the consent page; her client's first calls
//     of both SaaS tools answer as those accounts at once: no URL
//     elicitation, no completion notice;
//   - bob's sign-in for a virtual server that selects from octo alone
//     connects octo (octo-bob) and not bee; his client there is answered
//     as octo-bob at once;
//   - alice signs in again, for that server: she lacks no account, so
//     the IdP's sign-in leads straight to the consent page.
func TestConnectedAccountsChained(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := freeLoopbackAddr(t)
	origin := "http://" + addr
	idp := startASIdP(t, "", origin)
	octo := startSaaS(t, "octo", origin, idpRPClient, false)
	bee := startSaaS(t, "bee", origin, idpOpaqueClient, true)
	browser := startChromium(t)
	cfg := asConfig(t, idp, origin, asKeysFile(t), map[string]any{
		"upstreams": []map[string]any{
			atSignIn(caUpstream(t, octo, idpRPClient, idpRPClientSecret, true)),
			atSignIn(caUpstream(t, bee, idpOpaqueClient, idpOpaqueClientSecret, false)),
		},
		"connections": map[string]any{"keys_file": caVaultKeys(t)},
		"servers": []map[string]any{{"name": "octo-only", "path": "/mcp/octo", "title": "Octo tools",
			"tools": []map[string]any{{"source": "octo", "name": "whoami"}}}},
	}, nil)
	srv := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	catcher := startPageServer(t, "127.0.0.1")
	t.Logf("setup (3 IdPs, Chromium, portcullis) took %v", time.Since(start).Round(time.Millisecond))

	// signIn runs user's sign-in for resource in tab through the IdPs of
	// logins up to the consent page, which it approves, and
	// returns the access token and the origins of the pages the browser
	// landed on (redirects left out), in order, each once.
	signIn := func(tab context.Context, user, resource string, logins map[string]string) (string, []string) {
		t.Helper()
		app := newASApp(t, origin, resource, "mcp:tools")
		app.redirect = catcher.Set("/callback", "<!doctype html><title>app</title><p>back at the app</p>")
		resp, path := chromeThrough(t, tab, app.AuthURL(origin), origin+"/oauth/consent?", logins)
		if resp.Status != http.StatusOK {
			t.Fatalf("%s: the consent page answered %d", user, resp.Status)
		}
		answerConsent(t, tab, "approve")
		tr := mustToken(t, "code exchange")(app.Exchange(t, origin, app.Code(t, redirectOf(t, catcher))))
		var origins []string
		for _, p := range path {
			u, err := url.Parse(p)
			if err != nil {
				t.Fatal(err)
			}
			if o := u.Scheme + "://" + u.Host; len(origins) == 0 || origins[len(origins)-1] != o {
				origins = append(origins, o)
			}
		}
		return tr.AccessToken, origins
	}
	// client connects user's client to endpoint with token, declaring URL
	// elicitation, once it lists tools.
	client := func(user, endpoint, token string, tools ...string) *caClient {
		t.Helper()
		c := caConnectWith(t, ctx, &sdk.StreamableClientTransport{Endpoint: endpoint}, bearerTransport{token}, user, true)
		var names []string
		if !poll(30*time.Second, 100*time.Millisecond, func() bool {
			names = sdkToolNames(t, ctx, c.cs)
			return !slices.ContainsFunc(tools, func(n string) bool { return !slices.Contains(names, n) })
		}) {
			t.Fatalf("%s is offered %v at %s, want %v", user, names, endpoint, tools)
		}
		return c
	}
	noCompletion := func(c *caClient) {
		t.Helper()
		select {
		case id := <-c.completed:
			t.Errorf("%s: notifications/elicitation/complete for %s, want none (nothing was asked)", c.User, id)
		default:
		}
	}

	// The company IdP, then octo, then bee (the upstreams' order), then
	// the consent page.
	aliceTab := newTab(t, browser, false)
	token, origins := signIn(aliceTab, "alice", srv.MCPURL(), map[string]string{idp.Issuer(): "alice", octo.AS.Issuer(): "octo-alice", bee.AS.Issuer(): "bee-alice"})
	if want := []string{idp.Issuer(), octo.AS.Issuer(), bee.AS.Issuer(), origin}; !slices.Equal(origins, want) {
		t.Errorf("alice's sign-in showed pages of %v, want %v (the IdP, octo, bee, Portcullis's consent page)", origins, want)
	}
	alice := client("alice", srv.MCPURL(), token, "octo_whoami", "bee_whoami")
	alice.Want(t, ctx, "octo_whoami", "octo-alice")
	alice.Want(t, ctx, "bee_whoami", "bee-alice")
	noCompletion(alice)

	// A virtual server that selects from octo alone chains octo alone.
	team := origin + "/mcp/octo"
	token, origins = signIn(newTab(t, browser, false), "bob", team, map[string]string{idp.Issuer(): "bob", octo.AS.Issuer(): "octo-bob"})
	if want := []string{idp.Issuer(), octo.AS.Issuer(), origin}; !slices.Equal(origins, want) {
		t.Errorf("bob's sign-in for %s showed pages of %v, want %v (the IdP, octo, Portcullis's consent page)", team, origins, want)
	}
	bob := client("bob", team, token, "octo_whoami")
	bob.Want(t, ctx, "octo_whoami", "octo-bob")
	noCompletion(bob)

	// Alice has every account that server needs: no connect flow.
	_, origins = signIn(aliceTab, "alice", team, map[string]string{idp.Issuer(): "alice"})
	if want := []string{idp.Issuer(), origin}; !slices.Equal(origins, want) {
		t.Errorf("alice's sign-in for %s showed pages of %v, want %v (no connection to make)", team, origins, want)
	}
	t.Logf("TestConnectedAccountsChained took %v", time.Since(start).Round(time.Millisecond))
}
