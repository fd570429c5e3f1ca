//go:build e2e

package e2e

// Fault tests: the real binary while what it depends on fails —
// the IdP's key set, the introspection endpoint, a tool's upstream, a tool
// itself — and while callers push past its limits. Each fault is injected
// from outside the process, as it would happen in production: a proxy that
// stops answering, a process that is stopped, a port nobody listens on.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
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
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Modes of a faultProxy.
const (
	proxyUp   int32 = iota // forward to the target
	proxyDown              // drop the connection without an answer
	proxyHang              // hold the request until the client gives up
)

// faultProxy is an HTTP reverse proxy on 127.0.0.1 in front of a
// dependency (the IdP), whose behaviour a test switches at any time.
type faultProxy struct {
	URL  string
	mode atomic.Int32

	mu       sync.Mutex
	requests map[string]int // by path
}

func startFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{requests: map[string]int{}}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u); r.Out.Host = u.Host }}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests[r.URL.Path]++
		p.mu.Unlock()
		switch p.mode.Load() {
		case proxyDown:
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		case proxyHang:
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		default:
			rp.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() { close(stop); srv.Close() })
	p.URL = srv.URL
	return p
}

func (p *faultProxy) Set(mode int32) { p.mode.Store(mode) }

// Requests returns how many requests for path the proxy has seen.
func (p *faultProxy) Requests(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[path]
}

// withKid returns token with its header's kid replaced: a token the
// server has no key for (its signature is never checked).
func withKid(t *testing.T, token, kid string) string {
	t.Helper()
	header, _ := decodeJWT(t, token)
	header["kid"] = kid
	raw, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(raw) + token[strings.IndexByte(token, '.'):]
}

// timedPost posts body and returns the status, the response and how long
// it took; it fails the test if the server does not answer within max.
func timedPost(t *testing.T, endpoint, body string, h http.Header, max time.Duration) (*http.Response, []byte, time.Duration) {
	t.Helper()
	start := time.Now()
	client := &http.Client{Timeout: max}
	resp, b, err := doPost(t.Context(), client, endpoint, body, h)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("no answer within %v: %v", max, err)
	}
	return resp, b, took
}

// readyz returns the status and body of GET /readyz.
func readyz(t *testing.T, s *server) (int, string) {
	t.Helper()
	resp, b := doRequest(t, &http.Client{Timeout: 10 * time.Second}, mustRequest(t, http.MethodGet, s.BaseURL+"/readyz"))
	return resp.StatusCode, string(b)
}

// awaitReady waits up to timeout for s's /readyz to answer 200 (its
// upstreams connected, for one), failing with the last answer otherwise.
func awaitReady(t *testing.T, s *server, timeout time.Duration) {
	t.Helper()
	pollUntil(t, timeout, func() string {
		if code, body := readyz(t, s); code != http.StatusOK {
			return fmt.Sprintf("/readyz %d: %s", code, body)
		}
		return ""
	})
}

func mustRequest(t *testing.T, method, u string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestFaultJWKSOutageAndKeyRotation: the IdP's key set goes away after
// start, comes back, and the IdP rotates its keys.
//
//   - While the JWKS endpoint drops connections or hangs, tokens signed with
//     a key the server already has keep working; a token naming an unknown
//     kid is a 401 invalid_token, in bounded time (one fetch, at most 5s),
//     never a 5xx or a hang.
//   - Readiness stays ready: the server holds keys and verifies every token
//     their owner can still sign. (Readiness fails only while an issuer has
//     never had keys; failing it on every replica during an IdP blip would
//     turn the blip into an outage.)
//   - When the IdP comes back with new keys, a token with the new kid works
//     after exactly one key-set fetch.
func TestFaultJWKSOutageAndKeyRotation(t *testing.T) {
	port := strings.TrimPrefix(freeLoopbackAddr(t), "127.0.0.1:")
	idp := startIdP(t, "IDP_PORT="+port, "IDP_KEYS_FILE="+filepath.Join(t.TempDir(), "keys-before.json"))
	jwks := startFaultProxy(t, idp.Issuer())
	addr := freeLoopbackAddr(t)
	resource := "http://" + addr + "/mcp"
	authSection := authConfig(idp, resource)
	authSection["issuers"] = []map[string]any{{"issuer": idp.Issuer(), "jwks_url": jwks.URL + "/jwks"}}
	authSection["jwks_refresh_interval"] = "200ms"
	srv := startServer(t, nil, "--config", writeConfigFile(t, map[string]any{"auth": authSection}), "--listen", addr)
	endpoint := srv.MCPURL()
	list := modernToolsList(2)

	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)
	callOK(t, endpoint, list, modernHeaders(token, "tools/list", ""))
	if code, body := readyz(t, srv); code != http.StatusOK {
		t.Fatalf("/readyz with the IdP up: %d %s", code, body)
	}

	unknownKid := func(t *testing.T, kid string, max time.Duration) {
		t.Helper()
		time.Sleep(250 * time.Millisecond) // past jwks_refresh_interval, so the server does fetch
		before := jwks.Requests("/jwks")
		resp, body, took := timedPost(t, endpoint, list, modernHeaders(withKid(t, token, kid), "tools/list", ""), max+5*time.Second)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
			t.Errorf("unknown kid: status %d, WWW-Authenticate %q, want 401 invalid_token: %s", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		if took > max {
			t.Errorf("unknown kid answered after %v, want within %v", took, max)
		}
		if jwks.Requests("/jwks") == before {
			t.Errorf("the server did not try to fetch the key set for the unknown kid")
		}
	}

	for _, tc := range []struct {
		name string
		mode int32
		max  time.Duration
	}{
		{name: "JWKS drops connections", mode: proxyDown, max: 2 * time.Second},
		{name: "JWKS hangs", mode: proxyHang, max: 7 * time.Second}, // one fetch is bounded by 5s
	} {
		t.Run(tc.name, func(t *testing.T) {
			jwks.Set(tc.mode)
			// A token the server has not seen (not in its cache), signed with
			// a key it has.
			fresh := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)
			callOK(t, endpoint, list, modernHeaders(fresh, "tools/list", ""))
			unknownKid(t, "no-such-key-"+strings.ReplaceAll(tc.name, " ", "-"), tc.max)
			if code, body := readyz(t, srv); code != http.StatusOK {
				t.Errorf("/readyz during the JWKS outage: %d %s, want 200 (keys are loaded)", code, body)
			}
		})
	}

	// The IdP restarts with new keys, then its key set is reachable again.
	_, oldClaims := decodeJWT(t, token)
	oldHeader, _ := decodeJWT(t, token)
	idp.stop(t)
	idp = startIdP(t, "IDP_PORT="+port, "IDP_KEYS_FILE="+filepath.Join(t.TempDir(), "keys-after.json"))
	jwks.Set(proxyUp)
	rotated := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource)
	newHeader, newClaims := decodeJWT(t, rotated)
	if newHeader["kid"] == oldHeader["kid"] || newClaims["iss"] != oldClaims["iss"] {
		t.Fatalf("restarted IdP: kid %v (was %v), iss %v (was %v); want a new kid, the same issuer", newHeader["kid"], oldHeader["kid"], newClaims["iss"], oldClaims["iss"])
	}
	time.Sleep(250 * time.Millisecond) // past jwks_refresh_interval, so the server may fetch again
	before := jwks.Requests("/jwks")
	callOK(t, endpoint, list, modernHeaders(rotated, "tools/list", ""))
	if n := jwks.Requests("/jwks") - before; n != 1 {
		t.Errorf("key-set fetches to accept the rotated key: %d, want 1", n)
	}
	unknownKid(t, "still-unknown", 2*time.Second)
	select {
	case <-srv.Done():
		t.Fatalf("portcullis exited: %v", srv.ExitErr())
	default:
	}
}

// introspectionBehindProxy is what the introspection fault tests share:
// the IdP with a fault proxy in front of it, the introspection client's
// secret in a file, and the address (and so the resource URL) the server
// will listen on.
func introspectionBehindProxy(t *testing.T) (idp *IdP, proxy *faultProxy, secretFile, addr, resource string) {
	t.Helper()
	idp = startIdP(t)
	proxy = startFaultProxy(t, idp.Issuer())
	secretFile = filepath.Join(t.TempDir(), "introspection-secret")
	if err := os.WriteFile(secretFile, []byte(idpIntrospectorSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	addr = freeLoopbackAddr(t)
	return idp, proxy, secretFile, addr, "http://" + addr + "/mcp"
}

// TestFaultIntrospectionSlowOrDown: opaque tokens are verified by RFC 7662
// introspection. When the endpoint hangs, the wait is bounded by
// auth.introspection.timeout; when it hangs or is down the server fails
// closed with 503 and Retry-After (the token may be fine: the client should
// retry, not re-authenticate), logs the reason, and recovers when the
// endpoint does.
func TestFaultIntrospectionSlowOrDown(t *testing.T) {
	idp, proxy, secret, addr, resource := introspectionBehindProxy(t)
	const timeout = time.Second
	cfg := writeConfigFile(t, map[string]any{"auth": map[string]any{
		"resource":        resource,
		"required_scopes": []string{"mcp:tools"},
		"introspection": map[string]any{
			"url":                proxy.URL + "/token/introspection",
			"client_id":          idpIntrospector,
			"client_secret_file": secret,
			"timeout":            timeout.String(),
		},
	}})
	srv := startServer(t, nil, "--config", cfg, "--listen", addr)
	endpoint := srv.MCPURL()
	list := modernToolsList(2)
	// Each step uses a fresh token: a verified one is cached.
	callOK(t, endpoint, list, modernHeaders(idp.OpaqueToken(t, resource), "tools/list", ""))

	for _, tc := range []struct {
		name     string
		mode     int32
		min, max time.Duration
	}{
		{name: "endpoint hangs", mode: proxyHang, min: timeout, max: timeout + 2*time.Second},
		{name: "endpoint down", mode: proxyDown, max: 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy.Set(tc.mode)
			resp, body, took := timedPost(t, endpoint, list, modernHeaders(idp.OpaqueToken(t, resource), "tools/list", ""), tc.max+5*time.Second)
			if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Errorf("status %d, Retry-After %q, want 503 with Retry-After: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
			}
			if took < tc.min || took > tc.max {
				t.Errorf("answered after %v, want between %v and %v", took, tc.min, tc.max)
			}
		})
	}
	if n := waitLogCount(srv, `"reason":"introspection_failed"`, 2); n < 2 {
		t.Errorf("introspection failures logged: %d, want 2", n)
	}
	if n := scrapeSum(t, srv, "portcullis_auth_requests_total", `outcome="denied"`, `reason="introspection_failed"`); n != 2 {
		t.Errorf("portcullis_auth_requests_total{reason=\"introspection_failed\"} = %v, want 2", n)
	}
	proxy.Set(proxyUp)
	callOK(t, endpoint, list, modernHeaders(idp.OpaqueToken(t, resource), "tools/list", ""))
}

// weatherCall is a legacy, sessionless tools/call of the weather tool.
const weatherCall = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"weather","arguments":{"city":"Paris"}}}`

// toolCallResult posts a tools/call body and decodes its result (id 2).
func toolCallResult(t *testing.T, endpoint, body string, h http.Header, max time.Duration) (toolResult, time.Duration) {
	t.Helper()
	if h == nil {
		h = http.Header{}
	}
	if h.Get("MCP-Protocol-Version") == "" {
		h.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, b, took := timedPost(t, endpoint, body, h, max)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var res toolResult
	if err := json.Unmarshal(rpcResult(t, rpcMessages(t, resp.Header.Get("Content-Type"), b), "2"), &res); err != nil {
		t.Fatal(err)
	}
	return res, took
}

func (r toolResult) text() string {
	var parts []string
	for _, c := range r.Content {
		parts = append(parts, c.Text)
	}
	return strings.Join(parts, "\n")
}

// TestIntrospectionFloodRealBinary sends made-up opaque tokens to the
// binary in front of a real OpenID provider's introspection endpoint, with
// a proxy counting the calls that reach it: one made-up token sent again
// and again costs one call (the negative cache), distinct ones past the
// bound get 503 with Retry-After and are counted as
// reason="introspection_throttled" while the IdP sees no more than the
// bound's calls, and a token verified before the flood keeps working.
func TestIntrospectionFloodRealBinary(t *testing.T) {
	idp, proxy, secret, addr, resource := introspectionBehindProxy(t)
	const burst = 5
	cfg := writeConfigFile(t, map[string]any{"auth": map[string]any{
		"resource":        resource,
		"required_scopes": []string{"mcp:tools"},
		"introspection": map[string]any{
			"url":                  proxy.URL + "/token/introspection",
			"client_id":            idpIntrospector,
			"client_secret_file":   secret,
			"max_calls_per_second": 0.1, // one call every 10s past the burst
			"max_calls_burst":      burst,
		},
	}})
	srv := startServer(t, nil, "--config", cfg, "--listen", addr)
	endpoint := srv.MCPURL()
	const path = "/token/introspection"
	list := modernToolsList(2)
	valid := idp.OpaqueToken(t, resource)
	callOK(t, endpoint, list, modernHeaders(valid, "tools/list", ""))
	if n := proxy.Requests(path); n != 1 {
		t.Fatalf("introspection calls after one valid token: %d, want 1", n)
	}

	madeUp := func(i int) string { return fmt.Sprintf("made-up-opaque-token-%d-%d", time.Now().UnixNano(), i) }
	same := madeUp(0)
	for i := range 10 {
		resp, body, _ := timedPost(t, endpoint, list, modernHeaders(same, "tools/list", ""), 10*time.Second)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("made-up token, try %d: status %d, want 401: %s", i, resp.StatusCode, body)
		}
	}
	if n := proxy.Requests(path); n != 2 {
		t.Fatalf("one made-up token sent 10 times: %d introspection calls in all, want 2", n)
	}

	var unauthorized, throttled int
	for i := range 4 * burst {
		resp, body, _ := timedPost(t, endpoint, list, modernHeaders(madeUp(i+1), "tools/list", ""), 10*time.Second)
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			unauthorized++
		case resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
			throttled++
		default:
			t.Fatalf("made-up token: status %d, Retry-After %q; want 401, or 503 with Retry-After: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// The burst, less the two calls above, and maybe one more token the
	// bucket got back meanwhile.
	if n := proxy.Requests(path); n > burst+1 || unauthorized > burst-2+1 || throttled < 4*burst-(burst-2+1) {
		t.Fatalf("%d distinct made-up tokens: %d introspection calls in all, %d got 401, %d got 503; want at most %d calls, the rest 503",
			4*burst, n, unauthorized, throttled, burst+1)
	}
	callOK(t, endpoint, list, modernHeaders(valid, "tools/list", ""))
	if n := scrapeSum(t, srv, "portcullis_auth_requests_total", `outcome="denied"`, `reason="introspection_throttled"`); n != float64(throttled) {
		t.Errorf(`portcullis_auth_requests_total{reason="introspection_throttled"} = %v, want %d`, n, throttled)
	}
	if n := scrapeSum(t, srv, "portcullis_auth_requests_total", `outcome="denied"`, `reason="inactive"`); n != float64(10+unauthorized) {
		t.Errorf(`portcullis_auth_requests_total{reason="inactive"} = %v, want %d`, n, 10+unauthorized)
	}
}

// TestFaultUpstreamSlowOrDown: the weather tool's upstream hangs (longer
// than the tool's own client timeout allows: the tool timeout must cut it
// off) or refuses connections. Either way the call ends in bounded time
// with an error result a model can read, and the upstream request is
// cancelled.
func TestFaultUpstreamSlowOrDown(t *testing.T) {
	upstreamGone := make(chan struct{}, 1)
	up := newFakeOpenMeteo(t, func(r *http.Request) {
		if r.URL.Path == "/v1/search" {
			<-r.Context().Done()
			upstreamGone <- struct{}{}
		}
	})
	const toolTimeout = time.Second
	slow := startServer(t, []string{
		"PORTCULLIS_TOOLS_TOOLSETS=workshop",
		"PORTCULLIS_TOOLS_WEATHER_BASE_URL=" + up.URL,
		"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL=" + up.URL,
		"PORTCULLIS_TOOLS_WEATHER_TIMEOUT=1m",
		"PORTCULLIS_MCP_TOOL_TIMEOUT=" + toolTimeout.String(),
	})
	res, took := toolCallResult(t, slow.MCPURL(), weatherCall, nil, 10*time.Second)
	if !res.IsError || !strings.Contains(res.text(), `"weather" did not finish within 1s`) {
		t.Errorf("slow upstream: result %+v, want an error result saying the tool timed out after 1s", res)
	}
	if took < toolTimeout || took > toolTimeout+2*time.Second {
		t.Errorf("slow upstream: call took %v, want about the tool timeout %v", took, toolTimeout)
	}
	if n := scrapeSum(t, slow, "portcullis_limit_rejections_total", `limit="tool_timeout"`); n != 1 {
		t.Errorf("portcullis_limit_rejections_total{limit=\"tool_timeout\"} = %v, want 1", n)
	}
	select {
	case <-upstreamGone:
	case <-time.After(5 * time.Second):
		t.Error("the upstream request was not cancelled when the tool timed out")
	}

	down := startServer(t, []string{
		"PORTCULLIS_TOOLS_TOOLSETS=workshop",
		"PORTCULLIS_TOOLS_WEATHER_BASE_URL=http://" + freeLoopbackAddr(t),
		"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL=http://" + freeLoopbackAddr(t),
	})
	res, took = toolCallResult(t, down.MCPURL(), weatherCall, nil, 10*time.Second)
	if !res.IsError || !strings.Contains(res.text(), "could not reach the") || !strings.Contains(res.text(), "try again later") {
		t.Errorf("upstream down: result %+v, want an error result saying the service could not be reached", res)
	}
	if took > 2*time.Second {
		t.Errorf("upstream down: call took %v", took)
	}
}

// TestFaultToolPanics: a tool that panics gives an error result that does
// not leak the panic; the failure is logged with its stack; the process and
// other calls live on.
func TestFaultToolPanics(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=conformance"})
	for range 3 {
		res, _ := toolCallResult(t, srv.MCPURL(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_panic","arguments":{}}}`, nil, 10*time.Second)
		if !res.IsError || !strings.Contains(res.text(), `"test_panic" failed with an internal error`) || strings.Contains(res.text(), "intentional panic") {
			t.Fatalf("panicking tool: result %+v, want an error result that does not leak the panic", res)
		}
	}
	res, _ := toolCallResult(t, srv.MCPURL(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_simple_text","arguments":{}}}`, nil, 10*time.Second)
	if res.IsError {
		t.Errorf("a call after the panics: %+v", res)
	}
	if n := waitLogCount(srv, `"msg":"handler panicked"`, 3); n != 3 {
		t.Errorf("panics logged: %d, want 3", n)
	}
	if n := scrapeSum(t, srv, "mcp_server_operation_duration_seconds_count", `mcp_method_name="tools/call"`, `gen_ai_tool_name="test_panic"`, `error_type="tool_error"`); n != 3 {
		t.Errorf("panicking calls counted as tool errors: %v, want 3", n)
	}
	select {
	case <-srv.Done():
		t.Fatalf("portcullis exited: %v", srv.ExitErr())
	default:
	}
}

// devToken gets a token for clientID (which becomes its subject) from the
// embedded issuer of a `serve --dev` process.
func devToken(t *testing.T, s *server, clientID string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "resource": {s.MCPURL()}}
	resp, err := http.PostForm(s.BaseURL+"/dev-issuer/token", form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr tokenResponse
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || tr.AccessToken == "" {
		t.Fatalf("dev token: status %d, %v, %+v", resp.StatusCode, err, tr)
	}
	return tr.AccessToken
}

// checkRefused checks a limit's refusal: status, Retry-After, JSON-RPC body.
func checkRefused(t *testing.T, resp *http.Response, body []byte, status int, retryAfter string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Retry-After") != retryAfter {
		t.Errorf("status %d, Retry-After %q; want %d with Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), status, retryAfter, body)
		return
	}
	msgs := rpcMessages(t, resp.Header.Get("Content-Type"), body)
	if len(msgs) != 1 || msgs[0].Error == nil || msgs[0].Error.Message == "" {
		t.Errorf("body %s: want a JSON-RPC error", body)
	}
}

// TestLimitsRealBinary drives the request limits of the real binary with
// tokens for two principals from --dev's issuer.
func TestLimitsRealBinary(t *testing.T) {
	t.Run("rate per principal", func(t *testing.T) {
		srv := startServer(t, []string{
			"PORTCULLIS_LIMITS_RATE_PER_PRINCIPAL=0.5",
			"PORTCULLIS_LIMITS_BURST_PER_PRINCIPAL=3",
		}, "--dev")
		alice, bob := devToken(t, srv, "alice"), devToken(t, srv, "bob")
		list := modernToolsList(2)
		for range 3 {
			callOK(t, srv.MCPURL(), list, modernHeaders(alice, "tools/list", ""))
		}
		resp, body, _ := timedPost(t, srv.MCPURL(), list, modernHeaders(alice, "tools/list", ""), 5*time.Second)
		checkRefused(t, resp, body, http.StatusTooManyRequests, "2")
		callOK(t, srv.MCPURL(), list, modernHeaders(bob, "tools/list", ""))
		if n := scrapeSum(t, srv, "portcullis_rate_limited_total", `scope="principal"`); n != 1 {
			t.Errorf("portcullis_rate_limited_total = %v, want 1", n)
		}
	})
	t.Run("sessions per principal", func(t *testing.T) {
		srv := startServer(t, []string{
			"PORTCULLIS_MCP_MAX_SESSIONS=4",
			"PORTCULLIS_MCP_MAX_SESSIONS_PER_PRINCIPAL=1",
		}, "--dev")
		alice, bob := devToken(t, srv, "alice"), devToken(t, srv, "bob")
		// Sessions that send initialize and never initialized.
		initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`
		if resp, body, _ := timedPost(t, srv.MCPURL(), initialize, bearer(alice), 5*time.Second); resp.StatusCode != http.StatusOK {
			t.Fatalf("alice's initialize: status %d: %s", resp.StatusCode, body)
		}
		resp, body, _ := timedPost(t, srv.MCPURL(), initialize, bearer(alice), 5*time.Second)
		checkRefused(t, resp, body, http.StatusTooManyRequests, "5")
		if resp, body, _ := timedPost(t, srv.MCPURL(), initialize, bearer(bob), 5*time.Second); resp.StatusCode != http.StatusOK {
			t.Fatalf("bob's initialize beside alice's full share: status %d: %s", resp.StatusCode, body)
		}
		if n := scrapeSum(t, srv, "portcullis_limit_rejections_total", `limit="sessions_principal"`); n != 1 {
			t.Errorf(`portcullis_limit_rejections_total{limit="sessions_principal"} = %v, want 1`, n)
		}
		if n := scrapeSum(t, srv, "portcullis_mcp_sessions_active"); n != 2 {
			t.Errorf("portcullis_mcp_sessions_active = %v with two sessions never initialized, want 2", n)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		entered := make(chan struct{}, 4)
		release := make(chan struct{})
		up := newFakeOpenMeteo(t, func(r *http.Request) {
			if r.URL.Path == "/v1/search" {
				entered <- struct{}{}
				select {
				case <-release:
				case <-r.Context().Done():
				}
			}
		})
		srv := startServer(t, []string{
			"PORTCULLIS_TOOLS_TOOLSETS=workshop",
			"PORTCULLIS_TOOLS_WEATHER_BASE_URL=" + up.URL,
			"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL=" + up.URL,
			"PORTCULLIS_LIMITS_MAX_IN_FLIGHT=2",
			"PORTCULLIS_LIMITS_MAX_IN_FLIGHT_PER_PRINCIPAL=1",
		}, "--dev")
		t.Cleanup(func() {
			select {
			case <-release:
			default:
				close(release)
			}
		})
		tokens := map[string]string{}
		for _, who := range []string{"alice", "bob", "carol"} {
			tokens[who] = devToken(t, srv, who)
		}
		weather := modernToolCall(2, "weather", `{"city":"Paris"}`)
		held := make(chan error, 2)
		for _, who := range []string{"alice", "bob"} {
			go func() {
				resp, body, err := doPost(t.Context(), http.DefaultClient, srv.MCPURL(), weather, modernHeaders(tokens[who], "tools/call", "weather"))
				if err == nil && resp.StatusCode != http.StatusOK {
					err = &url.Error{Op: "status " + resp.Status, URL: string(body)}
				}
				held <- err
			}()
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatalf("%s's call did not reach the upstream", who)
			}
		}
		resp, body, _ := timedPost(t, srv.MCPURL(), weather, modernHeaders(tokens["alice"], "tools/call", "weather"), 5*time.Second)
		checkRefused(t, resp, body, http.StatusTooManyRequests, "1")
		resp, body, _ = timedPost(t, srv.MCPURL(), weather, modernHeaders(tokens["carol"], "tools/call", "weather"), 5*time.Second)
		checkRefused(t, resp, body, http.StatusServiceUnavailable, "1")
		close(release)
		for range 2 {
			if err := <-held; err != nil {
				t.Errorf("held call: %v", err)
			}
		}
		callOK(t, srv.MCPURL(), modernToolsList(2), modernHeaders(tokens["carol"], "tools/list", ""))
		for _, limit := range []string{"inflight_principal", "inflight_total"} {
			if n := scrapeSum(t, srv, "portcullis_limit_rejections_total", `limit="`+limit+`"`); n != 1 {
				t.Errorf("portcullis_limit_rejections_total{limit=%q} = %v, want 1", limit, n)
			}
		}
	})
}

// TestSessionAndBodyLimitsRealBinary: over mcp.max_sessions an initialize
// gets 503 with Retry-After and a JSON-RPC error, and deleting a session
// frees its slot; a body over mcp.max_body_bytes gets 413. Both counted.
func TestSessionAndBodyLimitsRealBinary(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_MCP_MAX_SESSIONS=2", "PORTCULLIS_MCP_MAX_BODY_BYTES=1024"})
	var sessions []http.Header
	for range 2 {
		sessions = append(sessions, initSession(t, http.DefaultClient, srv.MCPURL()))
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`
	resp, body, _ := timedPost(t, srv.MCPURL(), initialize, nil, 5*time.Second)
	checkRefused(t, resp, body, http.StatusServiceUnavailable, "5")

	req := mustRequest(t, http.MethodDelete, srv.MCPURL())
	req.Header = sessions[0].Clone()
	if resp, body := doRequest(t, http.DefaultClient, req); resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE session: status %d: %s", resp.StatusCode, body)
	}
	initSession(t, http.DefaultClient, srv.MCPURL()) // the freed slot

	big := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + strings.Repeat("x", 2048) + `"}}}`
	resp, body, _ = timedPost(t, srv.MCPURL(), big, sessions[1], 5*time.Second)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "1024 bytes") {
		t.Errorf("oversized body: status %d: %s; want 413 naming the limit", resp.StatusCode, body)
	}
	for limit, want := range map[string]float64{"sessions": 1, "body_size": 1} {
		if n := scrapeSum(t, srv, "portcullis_limit_rejections_total", `limit="`+limit+`"`); n != want {
			t.Errorf("portcullis_limit_rejections_total{limit=%q} = %v, want %v", limit, n, want)
		}
	}
}

// scrapeSum returns the sum of the samples of the series name whose labels
// include every label="value" pair in labels, from one scrape of s's
// /metrics (text format).
func scrapeSum(t *testing.T, s *server, name string, labels ...string) float64 {
	t.Helper()
	body := scrape(t, s.MetricsURL(t))
	var sum float64
	found := false
	for line := range strings.Lines(body) {
		line = strings.TrimSpace(line)
		series, value, ok := strings.Cut(line, " ")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(","+strings.TrimSuffix(rest, "}")+",", ","+l+",") {
				match = false
			}
		}
		if !match {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		t.Fatalf("no series %s{%s} in the scrape", name, strings.Join(labels, ","))
	}
	return sum
}

// TestFaultCollectorDown: traces go to an OTLP collector that is down (a
// closed port) or a black hole (accepts connections, never answers). Tool
// calls are unaffected: spans are exported in the background, failures are
// counted, and the process still exits promptly on SIGTERM.
func TestFaultCollectorDown(t *testing.T) {
	blackHole, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blackHole.Close() })
	var held []net.Conn
	var heldMu sync.Mutex
	go func() {
		for {
			c, err := blackHole.Accept()
			if err != nil {
				return
			}
			heldMu.Lock()
			held = append(held, c)
			heldMu.Unlock()
		}
	}()
	t.Cleanup(func() {
		heldMu.Lock()
		defer heldMu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})

	for _, tc := range []struct {
		name, endpoint string
		// counted: the failure shows in portcullis_otel_spans_total within
		// the test. A black hole is counted only once the exporter's retries
		// give up (a minute by default), which the test does not wait for.
		counted bool
	}{
		{name: "closed port", endpoint: "http://" + freeLoopbackAddr(t), counted: true},
		{name: "black hole", endpoint: "http://" + blackHole.Addr().String()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := startServer(t, []string{
				"OTEL_EXPORTER_OTLP_ENDPOINT=" + tc.endpoint,
				"OTEL_EXPORTER_OTLP_TIMEOUT=1000",
				"OTEL_BSP_SCHEDULE_DELAY=100",
				"OTEL_TRACES_SAMPLER=always_on",
			})
			const calls = 60
			var durations []time.Duration
			for i := range calls {
				res, took := toolCallResult(t, srv.MCPURL(), `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, nil, 5*time.Second)
				if res.IsError {
					t.Fatalf("call %d: %+v", i, res)
				}
				durations = append(durations, took)
			}
			slices.Sort(durations)
			if p99 := durations[len(durations)*99/100]; p99 > 500*time.Millisecond {
				t.Errorf("p99 of %d calls with the collector down: %v, want under 500ms (median %v)", calls, p99, durations[len(durations)/2])
			}
			// The exporter did try, and its failures are counted.
			failed := func() bool {
				return scrapeSum(t, srv, "portcullis_otel_spans_total", `outcome="failed"`)+scrapeSum(t, srv, "portcullis_otel_spans_total", `outcome="dropped"`) > 0
			}
			if tc.counted && !poll(15*time.Second, 100*time.Millisecond, failed) {
				t.Fatal("no span export failure counted after 15s")
			}
			start := time.Now()
			srv.Signal(t, syscall.SIGTERM)
			select {
			case <-srv.Done():
				if took := time.Since(start); took > 8*time.Second {
					t.Errorf("exit took %v after SIGTERM with the collector down", took)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("no exit 20s after SIGTERM with the collector down")
			}
		})
	}
}

// waitLogCount counts occurrences of substr in the server's stderr, waiting
// up to 5 s for at least want: log lines reach the test through a pipe,
// possibly after the response they belong to.
func waitLogCount(srv *server, substr string, want int) int {
	n := 0
	poll(5*time.Second, 10*time.Millisecond, func() bool {
		n = strings.Count(srv.Stderr(), substr)
		return n >= want
	})
	return n
}
