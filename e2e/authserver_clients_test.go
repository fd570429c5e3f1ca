//go:build e2e

package e2e

// Real MCP clients that get their client_id at Portcullis's authorization
// server by themselves, as most do in the wild: by dynamic client
// registration (RFC 7591) or through a Client ID Metadata Document (the
// client_id is an https URL; Portcullis fetches the document there). The
// clients are the TypeScript SDK v1 (@modelcontextprotocol/sdk) and v2
// (@modelcontextprotocol/client), through e2e/tsclient/oauth-clients.mjs,
// and the go-sdk; the test plays the user's browser (the IdP's login and
// Portcullis's consent page) for each authorization they ask for.

import (
	"bufio"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// cimdHost serves Client ID Metadata Documents over https from a local
// TLS server; CAFile holds its certificate, for SSL_CERT_FILE of the
// portcullis process (Go's crypto/x509 reads it on Linux), so the fetch
// verifies TLS as in production.
type cimdHost struct {
	CAFile string

	srv     *httptest.Server
	mu      sync.Mutex
	docs    map[string][]byte
	fetches map[string]int
}

func startCIMDHost(t *testing.T) *cimdHost {
	t.Helper()
	h := &cimdHost{docs: map[string][]byte{}, fetches: map[string]int{}}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		doc, ok := h.docs[r.URL.Path]
		h.fetches[r.URL.Path]++
		h.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = w.Write(doc)
	}))
	t.Cleanup(h.srv.Close)
	h.CAFile = filepath.Join(t.TempDir(), "cimd-ca.pem")
	pemCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	if err := os.WriteFile(h.CAFile, pemCert, 0o600); err != nil {
		t.Fatal(err)
	}
	return h
}

// Publish serves a public client's document at path (under
// https://127.0.0.1:PORT) naming it name with the one redirect URI, and
// returns its URL: the client_id.
func (h *cimdHost) Publish(t *testing.T, path, name, redirect string) string {
	t.Helper()
	id := h.srv.URL + path
	doc, err := json.Marshal(map[string]any{
		"client_id":                  id,
		"client_name":                name,
		"redirect_uris":              []string{redirect},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": "none",
	})
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	h.docs[path] = doc
	h.mu.Unlock()
	return id
}

// Fetches is how often the document at path was fetched.
func (h *cimdHost) Fetches(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fetches[path]
}

// startASServerWithCIMD starts Portcullis in authorization-server mode
// (IdP profile as startASServer) trusting host's certificate, with
// documents allowed from loopback addresses (host is on 127.0.0.1).
func startASServerWithCIMD(t *testing.T, profile string, host *cimdHost, extraAS map[string]any) (*server, *IdP) {
	t.Helper()
	as := map[string]any{"client_metadata_documents": map[string]any{"allow_private_addresses": true}}
	for k, v := range extraAS {
		as[k] = v
	}
	return startASServerEnv(t, profile, as, []string{"SSL_CERT_FILE=" + host.CAFile})
}

// tsClientsEvent is a line e2e/tsclient/oauth-clients.mjs writes.
type tsClientsEvent struct {
	Event, URL, Package, Version, ProtocolVersion, Name, Text, Message, ClientID, ElicitationID string
	Names                                                                                       []string
	IsError                                                                                     bool
}

// tsClientRun is what one run of oauth-clients.mjs did.
type tsClientRun struct {
	Events                        []tsClientsEvent
	SDK, Protocol                 string
	Registered, ClientID          string
	Authorizations                int
	Tools                         []string
	Results                       map[string]tsClientsEvent
	AuthorizationScopes, Messages []string
	// Elicitations are the URL elicitations its calls got (-32042), and
	// Completed the ids it was told were complete
	// (MCP_URL_ELICITATION=1).
	Elicitations []tsClientsEvent
	Completed    []string
}

// runTSClients runs e2e/tsclient/oauth-clients.mjs with sdk ("v1" or
// "v2") against endpoint, with env (MCP_CLIENT_ID,
// MCP_CLIENT_METADATA_URL, MCP_PROTOCOL) and redirect as its redirect URI,
// making calls after tools/list; authorize plays the browser for each
// authorization the SDK asks for (signInBrowser.Run, or Chromium) and
// returns the redirect to the client. A call answered with a URL
// elicitation fails the test: see runTSClientsElicit.
func runTSClients(t *testing.T, ctx context.Context, authorize func(context.Context, string) (*url.URL, error), sdkName, endpoint, redirect string, env []string, calls []map[string]any) tsClientRun {
	t.Helper()
	return runTSClientsElicit(t, ctx, authorize, nil, sdkName, endpoint, redirect, env, calls)
}

// runTSClientsElicit is runTSClients where elicit plays the user for each
// URL elicitation a call gets (with MCP_URL_ELICITATION=1 in env): it
// opens the elicitation's URL and returns once done.
func runTSClientsElicit(t *testing.T, ctx context.Context, authorize func(context.Context, string) (*url.URL, error), elicit func(tsClientsEvent),
	sdkName, endpoint, redirect string, env []string, calls []map[string]any) tsClientRun {
	t.Helper()
	node, _, _ := idpPaths(t)
	script, err := filepath.Abs(filepath.Join("tsclient", "oauth-clients.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	callsJSON, err := json.Marshal(calls)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, node, script)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MCP_") || strings.HasPrefix(kv, "NODE_OPTIONS=")
	}),
		"MCP_SDK_DIR="+nodeToolsDir(t),
		"MCP_SDK="+sdkName,
		"MCP_URL="+endpoint,
		"MCP_REDIRECT_URL="+redirect,
		"MCP_CALLS="+string(callsJSON),
	)
	cmd.Env = append(cmd.Env, env...)
	cmd.WaitDelay = 5 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	run := tsClientRun{Results: map[string]tsClientsEvent{}}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ev tsClientsEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Errorf("TypeScript client: a line that is not an event: %s", sc.Text())
			continue
		}
		run.Events = append(run.Events, ev)
		switch ev.Event {
		case "sdk":
			run.SDK = ev.Package + "@" + ev.Version
		case "registered":
			run.Registered = ev.ClientID
		case "connected":
			run.Protocol = ev.ProtocolVersion
		case "tools":
			run.Tools = ev.Names
		case "result", "error":
			run.Results[ev.Name] = ev
		case "client":
			run.ClientID = ev.ClientID
		case "elicitation":
			run.Elicitations = append(run.Elicitations, ev)
			if elicit == nil {
				t.Errorf("TypeScript client: a URL elicitation no one opens: %+v", ev)
			} else {
				elicit(ev)
			}
			if _, err := stdin.Write([]byte("{}\n")); err != nil {
				t.Errorf("TypeScript client's stdin: %v", err)
			}
		case "elicitationComplete":
			run.Completed = append(run.Completed, ev.ElicitationID)
		case "authorize":
			run.Authorizations++
			run.AuthorizationScopes = append(run.AuthorizationScopes, scopeOfAuthURL(ev.URL))
			answer := map[string]string{}
			if cb, err := authorize(ctx, ev.URL); err != nil {
				t.Errorf("TypeScript client's authorization: %v", err)
			} else {
				q := cb.Query()
				answer["code"], answer["state"], answer["iss"] = q.Get("code"), q.Get("state"), q.Get("iss")
			}
			line, _ := json.Marshal(answer)
			if _, err := stdin.Write(append(line, '\n')); err != nil {
				t.Errorf("TypeScript client's stdin: %v", err)
			}
		}
	}
	_ = stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("TypeScript client: %v\nevents: %+v\nstderr:\n%s", err, run.Events, stderr.String())
	}
	return run
}

// clientCase is one client signing in one way on one protocol era.
type clientCase struct {
	name     string
	sdk      string // "v1", "v2" (TypeScript) or "go"
	cimd     bool   // through a Client ID Metadata Document; else DCR
	protocol string // the era it must negotiate
}

// checkTSSignIn checks a run of the TypeScript client that signed in
// want times (each with a consent page, naming app: the first sign-in,
// and the step-up's), got its client id the way tc says, negotiated
// tc.protocol and called PingME.
func checkTSSignIn(t *testing.T, srv *server, tc clientCase, run tsClientRun, b *signInBrowser, docURL string, want int) {
	t.Helper()
	t.Logf("%s: client_id %q, protocol %s, %d authorization(s), tools %v", run.SDK, run.ClientID, run.Protocol, run.Authorizations, run.Tools)
	if run.Authorizations != want || b.ConsentPages != want {
		t.Errorf("%d authorization(s), %d consent page(s); want %d of each", run.Authorizations, b.ConsentPages, want)
	}
	switch {
	case tc.cimd && run.ClientID != docURL:
		t.Errorf("client_id %q, want the document's URL %s", run.ClientID, docURL)
	case !tc.cimd && (run.Registered == "" || run.ClientID != run.Registered || strings.HasPrefix(run.ClientID, "https://") || run.ClientID == asAppClient):
		t.Errorf("client_id %q (registered %q): want the id the registration gave", run.ClientID, run.Registered)
	}
	if run.Protocol != tc.protocol {
		t.Errorf("negotiated %q, want %s", run.Protocol, tc.protocol)
	}
	if !slices.Contains(run.Tools, "PingME") || slices.Contains(run.Tools, "echo") {
		t.Errorf("tools/list %v: want PingME, no echo (group admins)", run.Tools)
	}
	if ev := run.Results["PingME"]; ev.Event != "result" || ev.IsError || !strings.Contains(ev.Text, "BISMILLAH") {
		t.Errorf("PingME: %+v", ev)
	}
	// Portcullis issued the token to that client id.
	if n := waitLogCount(srv, `"event":"token_issued","grant":"authorization_code","client_id":"`+run.ClientID+`"`, want); n != want {
		t.Errorf("%d token_issued audit lines for client_id %s, want %d", n, run.ClientID, want)
	}
}

// TestAuthServerClients: real clients get their client_id by themselves
// and sign in through Portcullis, then call a tool:
//   - the TypeScript SDK v1 (its one era, 2025-11-25) and v2 (2025-11-25,
//     its default, and 2026-07-28, pinned), each once by dynamic client
//     registration (no client_id configured anywhere) and once through a
//     Client ID Metadata Document served over https by a local TLS server
//     whose certificate the portcullis process trusts (SSL_CERT_FILE);
//   - the go-sdk the same two ways on both eras.
//
// Each signs in once (one consent page, naming the client as its
// registration or document does), its client_id is the registered id or
// the document's URL (which Portcullis fetched), and the token Portcullis
// issued to that client id calls PingME. The v2 client then calls
// calculator, which needs mcp:admin: it meets the step-up 403 and signs
// in again for mcp:tools and mcp:admin, and the call runs.
func TestAuthServerClients(t *testing.T) {
	start := time.Now()
	docs := startCIMDHost(t)
	srv, idp := startASServerWithCIMD(t, "", docs, nil)
	runClientCases(t, srv, idp, docs, "", allClientCases)
	t.Logf("TestAuthServerClients took %v", time.Since(start).Round(time.Millisecond))
}

// allClientCases are the real clients on each era they speak, each by
// dynamic registration and through a Client ID Metadata Document.
var allClientCases = []clientCase{
	{name: "ts-v1 DCR", sdk: "v1", protocol: asProtocol},
	{name: "ts-v1 CIMD", sdk: "v1", cimd: true, protocol: asProtocol},
	{name: "ts-v2 DCR", sdk: "v2", protocol: asProtocol},
	{name: "ts-v2 CIMD", sdk: "v2", cimd: true, protocol: asProtocol},
	{name: "ts-v2 DCR 2026-07-28", sdk: "v2", protocol: modernProtocol},
	{name: "ts-v2 CIMD 2026-07-28", sdk: "v2", cimd: true, protocol: modernProtocol},
	{name: "go-sdk DCR", sdk: "go", protocol: asProtocol},
	{name: "go-sdk CIMD", sdk: "go", cimd: true, protocol: asProtocol},
	{name: "go-sdk DCR 2026-07-28", sdk: "go", protocol: modernProtocol},
	{name: "go-sdk CIMD 2026-07-28", sdk: "go", cimd: true, protocol: modernProtocol},
}

// TestAuthServerClientsIdPProfiles: the point of the mode. With the IdP
// acting as each enterprise provider (Entra ID: no registration
// endpoint, the resource parameter refused; Okta and Keycloak:
// registration only with an initial access token; Google: no
// registration; none takes Client ID Metadata Documents) behind
// Portcullis with the preset of the same name, every client of
// allClientCases, registering itself or bringing a document, still signs
// in, through Portcullis, and calls a tool on each era it speaks (the v2
// client stepping up as in TestAuthServerClients).
func TestAuthServerClientsIdPProfiles(t *testing.T) {
	for _, profile := range idpEnterpriseProfiles {
		t.Run(profile, func(t *testing.T) {
			start := time.Now()
			docs := startCIMDHost(t)
			var extraAS map[string]any
			domain := ""
			if profile == idpProfileGoogle {
				extraAS = map[string]any{"idp": map[string]any{"hosted_domains": []string{"corp.example"}}}
				domain = "@corp.example"
			}
			srv, idp := startASServerWithCIMD(t, profile, docs, extraAS)
			if meta := idp.Discovery(t); profile != idpProfileOkta && profile != idpProfileKeycloak && meta["registration_endpoint"] != nil {
				t.Fatalf("the %s-like IdP advertises registration: %v", profile, meta["registration_endpoint"])
			}
			runClientCases(t, srv, idp, docs, domain, allClientCases)
			t.Logf("%s took %v", profile, time.Since(start).Round(time.Millisecond))
		})
	}
}

// runClientCases runs each case as a subtest against srv, a user of its
// own (userN, with domain appended) signing in at idp; documents are
// published on docs.
func runClientCases(t *testing.T, srv *server, idp *IdP, docs *cimdHost, domain string, cases []clientCase) {
	t.Helper()
	resource := srv.MCPURL()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			caseStart := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			user := fmt.Sprintf("user%d%s", i, domain)
			redirect := "http://" + freeLoopbackAddr(t) + "/callback"
			b := newSignInBrowser(idp, user)
			var docURL, docPath string
			if tc.cimd {
				b.App = "E2E " + tc.name
				docPath = fmt.Sprintf("/clients/%d/client.json", i)
				docURL = docs.Publish(t, docPath, b.App, redirect)
			}
			if tc.sdk == "go" {
				testGoSDKSelfRegistered(t, ctx, srv, b, tc, redirect, docURL)
			} else {
				env := []string{}
				if tc.cimd {
					env = append(env, "MCP_CLIENT_METADATA_URL="+docURL)
				} else {
					b.App = "portcullis-e2e-ts-" + tc.sdk
				}
				if tc.protocol == modernProtocol {
					env = append(env, "MCP_PROTOCOL="+modernProtocol)
				}
				calls := []map[string]any{{"name": "PingME", "arguments": map[string]any{}}}
				signIns := 1
				if tc.sdk == "v2" {
					signIns = 2
					// calculator needs mcp:admin: the step-up 403, which v2
					// answers by authorizing again for the union of scopes.
					calls = append(calls, map[string]any{"name": "calculator", "arguments": map[string]any{"operation": "add", "a": 2, "b": 3}})
				}
				run := runTSClients(t, ctx, b.Run, tc.sdk, resource, redirect, env, calls)
				checkTSSignIn(t, srv, tc, run, b, docURL, signIns)
				if tc.sdk == "v2" {
					ev := run.Results["calculator"]
					if ev.Event != "result" || ev.IsError || !strings.Contains(ev.Text, "5") {
						t.Errorf("calculator after the step-up: %+v", ev)
					}
					if n := len(run.AuthorizationScopes); n != 2 || !slices.Contains(strings.Fields(run.AuthorizationScopes[1]), "mcp:admin") || !slices.Contains(strings.Fields(run.AuthorizationScopes[1]), "mcp:tools") {
						t.Errorf("authorizations for scopes %q: want a second one (the step-up) for mcp:tools and mcp:admin", run.AuthorizationScopes)
					}
				}
			}
			if tc.cimd && docs.Fetches(docPath) == 0 {
				t.Errorf("Portcullis never fetched the document at %s", docURL)
			}
			t.Logf("%s took %v", tc.name, time.Since(caseStart).Round(time.Millisecond))
		})
	}
}

// testGoSDKSelfRegistered connects the go-sdk's client by DCR or through
// the document at docURL, on tc.protocol, and calls PingME.
func testGoSDKSelfRegistered(t *testing.T, ctx context.Context, srv *server, b *signInBrowser, tc clientCase, redirect, docURL string) {
	t.Helper()
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              redirect,
		AuthorizationCodeFetcher: b.CodeFetcher(nil),
	}
	if tc.cimd {
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: docURL}
	} else {
		b.App = "portcullis-e2e-go-dcr"
		cfg.DynamicClientRegistrationConfig = &auth.DynamicClientRegistrationConfig{
			Metadata: &oauthex.ClientRegistrationMetadata{ClientName: b.App, RedirectURIs: []string{redirect}},
		}
	}
	version := tc.protocol
	if version == modernProtocol {
		version = "" // the latest, which sdkASConnectWith checks
	}
	cs, h := sdkASConnectWith(t, ctx, srv.MCPURL(), version, cfg)
	token := sdkAccessToken(t, ctx, h)
	_, c := decodeJWT(t, token)
	clientID, _ := c["client_id"].(string)
	switch {
	case tc.cimd && clientID != docURL:
		t.Errorf("token client_id %q, want the document's URL %s", clientID, docURL)
	case !tc.cimd && (clientID == "" || clientID == asAppClient || strings.HasPrefix(clientID, "https://")):
		t.Errorf("token client_id %q: want the id the registration gave", clientID)
	}
	checkASTokenOf(t, token, srv.BaseURL, srv.MCPURL(), b.user, clientID)
	if b.ConsentPages != 1 {
		t.Errorf("%d consent page(s), want 1 (naming %q)", b.ConsentPages, b.App)
	}
	sdkCallText(t, ctx, cs, "PingME", nil, "BISMILLAH")
}
