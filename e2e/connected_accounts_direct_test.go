//go:build e2e

package e2e

// Connected accounts without the authorization server (direct mode):
// callers call with tokens the company IdP issues them, and the connect
// pages sign the browser in as an OpenID Connect client of that IdP
// (connections.sign_in). And a stdio upstream run per user with that
// user's connected account's token: the test binary itself, started by
// portcullis with saasStdioEnv set, is that MCP server.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"
)

// saasStdioEnv, set in its environment, makes the e2e test binary the
// stdio MCP server of a SaaS (serveSaaSStdio) instead of running tests.
const saasStdioEnv = "PORTCULLIS_E2E_SAAS_STDIO"

// The environment of the stdio SaaS server: where it introspects its
// token (as idpIntrospector) and the resource the token must be for; the
// token comes in caStdioTokenEnv, or in the file caStdioTokenFileEnv
// names.
const (
	caStdioIntrospectionEnv = "SAAS_INTROSPECTION_URL"
	caStdioResourceEnv      = "SAAS_RESOURCE"
	caStdioTokenEnv         = "SAAS_TOKEN"
	caStdioTokenFileEnv     = "SAAS_TOKEN_FILE"
)

// serveSaaSStdio is a SaaS's MCP server over stdio, as a GitHub MCP
// server run per user is: its whoami introspects the token its process
// was given (in its environment, or in a file that only its owner may
// read) at the SaaS, and answers with the SaaS user it belongs to; its
// token answers with the process's id and a fingerprint of that token
// (caStdioProcess). It serves until stdin closes.
func serveSaaSStdio() int {
	server := sdk.NewServer(&sdk.Implementation{Name: "saas-stdio", Version: "1.0.0"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "token", Description: "This process and the token it has now."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			token, err := saasStdioToken()
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, nil, nil
			}
			sum := sha256.Sum256([]byte(token))
			text := fmt.Sprintf("pid=%d token=%x", os.Getpid(), sum[:8])
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}, nil, nil
		})
	sdk.AddTool(server, &sdk.Tool{Name: "whoami", Description: "The SaaS user this process acts as."},
		func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
			user, err := saasStdioUser(ctx)
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: err.Error()}}}, nil, nil
			}
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: user}}}, nil, nil
		})
	if err := server.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintf(os.Stderr, "saas-stdio: %v\n", err)
		return 1
	}
	return 0
}

// saasStdioToken returns the token the process has now: in its
// environment, or in its token file, read at each call.
func saasStdioToken() (string, error) {
	token := os.Getenv(caStdioTokenEnv)
	if name := os.Getenv(caStdioTokenFileEnv); name != "" {
		fi, err := os.Stat(name)
		if err != nil {
			return "", err
		}
		if fi.Mode().Perm() != 0o600 {
			return "", fmt.Errorf("the token file's mode is %v, want 0600", fi.Mode().Perm())
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return "", err
		}
		token = string(b)
	}
	if token == "" {
		return "", errors.New("this tool needs a user's token")
	}
	return token, nil
}

// saasStdioUser returns the SaaS user of the process's token.
func saasStdioUser(ctx context.Context) (string, error) {
	token, err := saasStdioToken()
	if err != nil {
		return "", err
	}
	form := url.Values{"token": {token}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, os.Getenv(caStdioIntrospectionEnv), strings.NewReader(form))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(idpIntrospector, idpIntrospectorSecret)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var in struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
		Aud    any    `json:"aud"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil {
		return "", err
	}
	resource := os.Getenv(caStdioResourceEnv)
	if aud := fmt.Sprint(in.Aud); !in.Active || in.Sub == "" || (aud != resource && aud != "["+resource+"]") {
		return "", fmt.Errorf("the token is inactive or not for %s (aud %s)", resource, aud)
	}
	return in.Sub, nil
}

// caStdioUpstream is the upstreams entry of a stdio server of the SaaS
// whose authorization server is as (Portcullis its client clientID),
// run per user (the default of oauth.grant authorization_code on stdio)
// with the user's token in the environment variable caStdioTokenEnv, or
// in a file caStdioTokenFileEnv names when inFile.
func caStdioUpstream(t *testing.T, name string, as *IdP, clientID, secret, resource string, inFile bool) map[string]any {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	oauth := map[string]any{"grant": "authorization_code", "issuer": as.Issuer(), "resource": resource,
		"client_id": clientID, "client_secret_file": caFile(t, name+"-secret", secret)}
	if inFile {
		oauth["token_file_env"] = caStdioTokenFileEnv
	} else {
		oauth["token_env"] = caStdioTokenEnv
	}
	return map[string]any{"name": name, "transport": "stdio", "command": self, "required": true, "oauth": oauth,
		"env": []map[string]any{
			{"name": saasStdioEnv, "value": "1"},
			{"name": caStdioIntrospectionEnv, "value": as.IntrospectionURL()},
			{"name": caStdioResourceEnv, "value": resource},
		}}
}

// TestConnectedAccountsDirect shows connected accounts where callers'
// tokens come from the company IdP directly (no authorization server):
//   - alice's client (URL elicitation declared), calling with her IdP
//     token, calls octo's whoami and gets the URL elicitation error
//     (-32042); her browser opens the link, signs in at the company IdP
//     (the connect pages' own sign-in, /connections/signed-in), then at
//     octo as octo-alice; the client gets
//     notifications/elicitation/complete and the retried call answers
//     octo-alice; octo's answer at the callback, replayed, is refused;
//   - desk and deskfile are stdio servers of a third SaaS run for each
//     user, given the user's token in an environment variable (desk) or
//     a file (deskfile); each introspects its token at the SaaS; alice
//     connects desk the same way, and deskfile, whose sign-in at the
//     SaaS her browser has already, and each answers desk-alice; desk's
//     tokens expire within seconds, and once refreshed, the new token
//     reaches her desk process as a new process, her deskfile process
//     in its file;
//   - bob's link, opened in alice's browser (signed in at the IdP as
//     alice), is refused (403); his own browser connects octo-bob and
//     desk-bob; each user sees only their own accounts, in processes of
//     their own;
//   - no token of a SaaS or of the company IdP is in Portcullis's logs
//     or in any span it exported to a real OpenTelemetry Collector, and
//     no SaaS token in anything an MCP client received.
func TestConnectedAccountsDirect(t *testing.T) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	addr := freeLoopbackAddr(t)
	origin := "http://" + addr
	resource := origin + "/mcp"
	company := startIdP(t, append(idpRP{RedirectURIs: []string{origin + "/connections/signed-in"}}.Env(), "IDP_LOG_TOKENS=1")...)
	octo := startSaaS(t, "octo", origin, idpRPClient, false)
	// desk's client is the one idp.mjs gives opaque tokens, which its
	// stdio server introspects.
	// Its access tokens live caOctoTTL seconds: Portcullis refreshes them
	// within seconds.
	desk := startSaaSAS(t, origin, idpOpaqueClient, fmt.Sprintf("IDP_ACCESS_TOKEN_TTL=%d", caOctoTTL))
	deskResource := "http://" + freeLoopbackAddr(t) + "/desk"
	browser := startChromium(t)
	// Portcullis exports every span to a real OpenTelemetry Collector,
	// which forwards them to sink.
	sink := &otlpSink{}
	collector, _ := startCollector(t, sink)

	cfg := map[string]any{
		"auth": map[string]any{"resource": resource, "issuers": []map[string]any{{"issuer": company.Issuer()}}},
		"connections": map[string]any{
			"keys_file": caVaultKeys(t),
			"sign_in": map[string]any{"issuer": company.Issuer(), "client_id": idpRPClient,
				"client_secret_file": caFile(t, "sign-in-secret", idpRPClientSecret)},
		},
		"upstreams": []map[string]any{
			caUpstream(t, octo, idpRPClient, idpRPClientSecret, true),
			caStdioUpstream(t, "desk", desk, idpOpaqueClient, idpOpaqueClientSecret, deskResource, false),
			caStdioUpstream(t, "deskfile", desk, idpOpaqueClient, idpOpaqueClientSecret, deskResource, true),
		},
	}
	srv := startServer(t, []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + collector, "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_SAMPLER=always_on"},
		"--config", writeConfigFile(t, cfg), "--listen", addr)
	t.Logf("setup (3 IdPs, Chromium, a collector, portcullis) took %v", time.Since(start).Round(time.Millisecond))

	// Each user's client calls with the access token the company IdP
	// issued them for Portcullis.
	connect := func(user string) (*caClient, string) {
		t.Helper()
		token := company.AuthorizationCodeFlow(t, user, resource).AccessToken
		c := caConnectWith(t, ctx, &sdk.StreamableClientTransport{Endpoint: srv.MCPURL()}, bearerTransport{token}, user, true)
		var names []string
		if !poll(30*time.Second, 100*time.Millisecond, func() bool {
			names = sdkToolNames(t, ctx, c.cs)
			return slices.Contains(names, "octo_whoami") && slices.Contains(names, "desk_whoami") && slices.Contains(names, "deskfile_whoami")
		}) {
			t.Fatalf("%s is offered %v, want octo_whoami, desk_whoami and deskfile_whoami", user, names)
		}
		return c, token
	}
	// connectTool: c's call of tool asks for the connection, the browser
	// in tab completes it (logins: each IdP's login name on the way), the
	// client is told, and the retried call answers want.
	connectTool := func(c *caClient, tab context.Context, tool string, logins map[string]string, want string) {
		t.Helper()
		e := c.WantElicitation(t, ctx, tool, origin)
		name, _, _ := strings.Cut(tool, "_")
		if text := chromeConnect(t, tab, e.URL, origin, logins); !strings.Contains(text, name+" is connected") {
			t.Errorf("the connect page after %s's sign-in: %q", name, text)
		}
		c.WaitCompleted(t, e.ElicitationID)
		c.Want(t, ctx, tool, want)
	}

	alice, aliceToken := connect("alice")
	aliceTab := newTab(t, browser, false)
	connectTool(alice, aliceTab, "octo_whoami", map[string]string{company.Issuer(): "alice", octo.AS.Issuer(): "octo-alice"}, "octo-alice")
	// The SaaS's answer is good once: replayed, its state is unknown, and
	// the account stays connected.
	callback, err := chromedp.Run(aliceTab, chromedp.Location())
	if err != nil || !strings.HasPrefix(callback, origin+"/connections/callback?") {
		t.Fatalf("alice's browser is at %q (%v), want octo's answer at the callback", callback, err)
	}
	if resp, err := chromedp.Run(aliceTab, chromedp.NavigateResponse(callback)); err != nil || resp.Status != http.StatusBadRequest {
		t.Errorf("octo's answer replayed: %v, %v; want 400", resp, err)
	}
	alice.Want(t, ctx, "octo_whoami", "octo-alice")
	connectTool(alice, aliceTab, "desk_whoami", map[string]string{desk.Issuer(): "desk-alice"}, "desk-alice")
	// Signed in at desk already, the browser goes through without a form.
	connectTool(alice, aliceTab, "deskfile_whoami", map[string]string{desk.Issuer(): "desk-alice"}, "desk-alice")
	// Her processes, and the tokens they have now.
	process := func(c *caClient, tool string) (pid, token string) {
		t.Helper()
		a := c.Call(t, ctx, tool)
		if _, err := fmt.Sscanf(a.Text, "pid=%s token=%s", &pid, &token); err != nil || a.IsError || a.Err != nil || a.Elicitation != nil {
			t.Fatalf("%s: %s answered %s (%v), want pid=… token=…", c.User, tool, a, err)
		}
		return pid, token
	}
	envPID, envToken := process(alice, "desk_token")
	filePID, fileToken := process(alice, "deskfile_token")

	// Bob's link is his alone: alice's browser, signed in at the IdP as
	// alice, is refused it.
	bob, bobToken := connect("bob")
	e := bob.WantElicitation(t, ctx, "octo_whoami", origin)
	if resp, err := chromedp.Run(aliceTab, chromedp.NavigateResponse(e.URL)); err != nil || resp.Status != http.StatusForbidden {
		t.Errorf("bob's link in alice's browser: %v, %v; want 403", resp, err)
	}
	bobTab := newTab(t, browser, false)
	if text := chromeConnect(t, bobTab, e.URL, origin, map[string]string{company.Issuer(): "bob", octo.AS.Issuer(): "octo-bob"}); !strings.Contains(text, "octo is connected") {
		t.Errorf("the connect page after bob's octo sign-in: %q", text)
	}
	bob.WaitCompleted(t, e.ElicitationID)
	bob.Want(t, ctx, "octo_whoami", "octo-bob")
	connectTool(bob, bobTab, "desk_whoami", map[string]string{desk.Issuer(): "desk-bob"}, "desk-bob")

	// Each sees only their own accounts; bob has not connected deskfile.
	alice.Want(t, ctx, "octo_whoami", "octo-alice")
	alice.Want(t, ctx, "desk_whoami", "desk-alice")
	alice.Want(t, ctx, "deskfile_whoami", "desk-alice")
	bob.Want(t, ctx, "desk_whoami", "desk-bob")
	bob.WantElicitation(t, ctx, "deskfile_whoami", origin)

	// desk's tokens are due for refresh a few seconds after they are
	// issued. A refreshed token reaches alice's processes: the one given
	// it in its environment is replaced by a new one, the one given a
	// file keeps running and reads the new token there.
	var pid, token, fpid, ftoken string
	if !poll(time.Duration(caOctoTTL)*time.Second, 500*time.Millisecond, func() bool {
		pid, token = process(alice, "desk_token")
		fpid, ftoken = process(alice, "deskfile_token")
		return token != envToken && ftoken != fileToken
	}) {
		t.Fatalf("alice's desk processes still have their first tokens (%s, %s): no refresh reached them", token, ftoken)
	}
	if pid == envPID {
		t.Errorf("desk: the process given the token in its environment (pid %s) kept running with the refreshed token, want a new process", pid)
	}
	if fpid != filePID {
		t.Errorf("deskfile: the process given the token in a file was replaced (pid %s, then %s), want the same, the file rewritten", filePID, fpid)
	}
	alice.Want(t, ctx, "desk_whoami", "desk-alice")
	alice.Want(t, ctx, "deskfile_whoami", "desk-alice")

	// Nothing leaked: no token in Portcullis's logs or in a span it
	// exported (stopping it flushes them), no SaaS token in what the
	// clients received.
	srv.stop(t)
	var spans []exportedSpan
	if !poll(30*time.Second, 50*time.Millisecond, func() bool {
		var errs []string
		spans, errs = sink.snapshot()
		if len(errs) > 0 {
			t.Fatalf("the test's OTLP sink could not decode what the collector sent: %v", errs)
		}
		return slices.ContainsFunc(spans, func(s exportedSpan) bool {
			a := attrMap(s.Span.GetAttributes())
			return a["mcp.session.id"] == bob.cs.ID() && a["gen_ai.tool.name"] == "deskfile_whoami"
		})
	}) {
		t.Fatalf("the collector forwarded no span of bob's last call within 30s; got %d span(s):\n%s", len(spans), describeSpans(spans))
	}
	exported := make([][]byte, len(spans))
	for i, s := range spans {
		var err error
		if exported[i], err = proto.Marshal(s.Span); err != nil {
			t.Fatal(err)
		}
	}
	inSpans := func(v string) bool {
		return slices.ContainsFunc(exported, func(b []byte) bool { return bytes.Contains(b, []byte(v)) })
	}
	if !inSpans(bob.cs.ID()) {
		t.Fatal("bob's session id is in no exported span: the search for tokens would find none either")
	}
	logs := srv.Stderr() + srv.Stdout()
	received := alice.rec.String() + bob.rec.String()
	for name, as := range map[string]*IdP{"octo": octo.AS, "desk": desk, "the company IdP": company} {
		issued := as.IssuedTokens(t)
		if len(issued) == 0 {
			t.Fatalf("%s issued no token", name)
		}
		for _, tok := range issued {
			if strings.Contains(logs, tok) {
				t.Errorf("Portcullis logged a token %s issued", name)
			}
			if as != company && strings.Contains(received, tok) {
				t.Errorf("an MCP client received a token %s issued", name)
			}
			if inSpans(tok) {
				t.Errorf("a span Portcullis exported holds a token %s issued", name)
			}
		}
	}
	for _, tok := range []string{aliceToken, bobToken} {
		if strings.Contains(logs, tok) {
			t.Errorf("Portcullis logged a caller's token")
		}
	}
	t.Logf("TestConnectedAccountsDirect took %v", time.Since(start).Round(time.Millisecond))
}
