package portcullis

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

func writeConfig(t testing.TB, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckConfig(t *testing.T) {
	tests := []struct {
		name     string
		config   string
		env      []string
		args     []string
		wantCode int
		want     []string // each must appear in the output
	}{
		{name: "defaults are valid", wantCode: 0, want: []string{"configuration OK"}},
		{
			name:     "valid file",
			config:   "server:\n  listen: 127.0.0.1:9999\ntools:\n  toolsets: [core, workshop]\n",
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name: "every problem at once with its key",
			config: "server:\n  listen: 0.0.0.0:8080\n  lisen: x\n  read_header_timeout: ten\n" +
				"tools:\n  toolsets: [core, nope]\nlog:\n  level: loud\n",
			wantCode: 1,
			want: []string{
				"server.lisen", "server.read_header_timeout", `"0.0.0.0:8080" is not a loopback address`,
			},
		},
		{
			name:     "validation problems listed together",
			config:   "server:\n  listen: 0.0.0.0:8080\n  shutdown_grace: -1s\ntools:\n  toolsets: [core, nope]\nlog:\n  level: loud\n",
			wantCode: 1,
			want:     []string{"4 problems", "server.listen", "server.shutdown_grace", "tools.toolsets[1]", "log.level"},
		},
		{
			name:     "env overrides the file",
			config:   "server:\n  listen: 0.0.0.0:8080\n",
			env:      []string{"PORTCULLIS_SERVER_LISTEN=127.0.0.1:8081"},
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name:     "unknown env variable",
			env:      []string{"PORTCULLIS_SERVER_LISTN=127.0.0.1:1"},
			wantCode: 1, want: []string{"PORTCULLIS_SERVER_LISTN", "PORTCULLIS_SERVER_LISTEN"},
		},
		{
			name:     "flag overrides env",
			env:      []string{"PORTCULLIS_SERVER_LISTEN=0.0.0.0:8080"},
			args:     []string{"--listen", "127.0.0.1:8082"},
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name:     "required scopes need an issuer",
			config:   "auth:\n  required_scopes: [mcp:tools]\n",
			wantCode: 1, want: []string{"auth.required_scopes", "no issuers"},
		},
		{
			// --dev adds its issuer once it listens.
			name:     "required scopes with --dev",
			config:   "auth:\n  required_scopes: [mcp:tools]\n",
			args:     []string{"--dev"},
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name:     "--dev still reports the other problems",
			config:   "auth:\n  required_scopes: [mcp:tools]\n  resource: https://mcp.example.com/other\nserver:\n  shutdown_grace: -1s\n",
			args:     []string{"--dev"},
			wantCode: 1, want: []string{"auth.resource", "must name the served MCP endpoint", "server.shutdown_grace"},
		},
		{
			name: "Kubernetes service links for Services named portcullis*",
			env: []string{
				"PORTCULLIS_SERVICE_HOST=10.96.0.10", "PORTCULLIS_SERVICE_PORT=8080", "PORTCULLIS_PORT=tcp://10.96.0.10:8080",
				"PORTCULLIS_GW_SERVICE_PORT_HTTP=80", "PORTCULLIS_GW_PORT_80_TCP_ADDR=10.96.0.11",
			},
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name:     "a misspelt key next to service links",
			env:      []string{"PORTCULLIS_SERVICE_HOST=10.96.0.10", "PORTCULLIS_SERVER_LISTN=127.0.0.1:1"},
			wantCode: 1, want: []string{"PORTCULLIS_SERVER_LISTN", "PORTCULLIS_SERVER_LISTEN"},
		},
		{
			name:     "--dev with a public resource",
			config:   "auth:\n  resource: https://mcp.example.com/mcp\n",
			args:     []string{"--dev"},
			wantCode: 1, want: []string{`auth.resource: "https://mcp.example.com/mcp" is not on a loopback host`},
		},
		{
			name:     "--dev with a resource whose name resolves to loopback",
			config:   "auth:\n  resource: http://127.0.0.1.nip.io:8080/mcp\n",
			args:     []string{"--dev"},
			wantCode: 1, want: []string{"auth.resource", "not on a loopback host"},
		},
		{
			name:     "--dev with a public resource from the environment",
			env:      []string{"PORTCULLIS_AUTH_RESOURCE=http://10.0.0.1:8080/mcp"},
			args:     []string{"--dev"},
			wantCode: 1, want: []string{"auth.resource", "not on a loopback host"},
		},
		{
			name:     "--dev with a loopback resource",
			config:   "auth:\n  resource: http://localhost:8080/mcp\n",
			args:     []string{"--dev"},
			wantCode: 0, want: []string{"configuration OK"},
		},
		{
			name:     "virtual servers' problems, all at once",
			config:   "servers:\n  - {name: a, path: /oauth/a}\n  - {name: b, path: /mcp/b, tools: [{source: nowhere}]}\n",
			wantCode: 1, want: []string{"servers[0].path: \"/oauth/a\" collides with /oauth", `servers[1].tools[0].source: unknown source "nowhere"`},
		},
		{name: "missing file", args: []string{"--config", "/nonexistent/portcullis.yaml"}, wantCode: 1, want: []string{"/nonexistent/portcullis.yaml"}},
		{name: "stray argument", args: []string{"extra"}, wantCode: 2, want: []string{"unexpected arguments"}},
		{name: "keys", args: []string{"--keys"}, wantCode: 0, want: []string{"server.read_header_timeout", "PORTCULLIS_SERVER_READ_HEADER_TIMEOUT", "PORTCULLIS_TOOLS_WEATHER_BASE_URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"check-config"}
			if tt.config != "" {
				args = append(args, "--config", writeConfig(t, tt.config))
			}
			args = append(args, tt.args...)
			var out bytes.Buffer
			code := run(t.Context(), args, tt.env, strings.NewReader(""), &out, &out)
			if code != tt.wantCode {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestServiceLinksLoggedByName(t *testing.T) {
	env := []string{
		"PORTCULLIS_LOG_LEVEL=debug",
		"PORTCULLIS_SERVICE_HOST=10.96.0.10",
		"PORTCULLIS_MCP_GW_PORT_8080_TCP=tcp://10.96.0.11:8080",
	}
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"stdio"}, env, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("stdio exited with %d:\n%s", code, stderr.String())
	}
	var logged []string
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		var line struct{ Level, Msg, Variable string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "ignoring a Kubernetes service-link variable" {
			if line.Level != "DEBUG" {
				t.Errorf("logged at %s, want DEBUG: %s", line.Level, sc.Bytes())
			}
			logged = append(logged, line.Variable)
		}
		if strings.Contains(sc.Text(), "10.96.0.1") {
			t.Errorf("a variable's value is logged: %s", sc.Bytes())
		}
	}
	if want := []string{"PORTCULLIS_MCP_GW_PORT_8080_TCP", "PORTCULLIS_SERVICE_HOST"}; !slices.Equal(logged, want) {
		t.Errorf("logged %q, want one line for each of %q:\n%s", logged, want, stderr.String())
	}
}

func TestVersionAndUsage(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{name: "version", args: []string{"version"}, want: "portcullis dev"},
		{name: "help", args: []string{"help"}, want: "check-config"},
		{name: "unknown command", args: []string{"serf"}, wantCode: 2, want: `unknown command "serf"`},
		{name: "unknown flag", args: []string{"serve", "--nope"}, wantCode: 2, want: "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := run(t.Context(), tt.args, nil, strings.NewReader(""), &out, &out); code != tt.wantCode {
				t.Fatalf("exit code %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			if !strings.Contains(out.String(), tt.want) {
				t.Errorf("output lacks %q:\n%s", tt.want, out.String())
			}
		})
	}
}

// listenAddr waits for the "listening" log line and returns its address.
func listenAddr(t testing.TB, stderr fmt.Stringer, exited <-chan int) string {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		sc := bufio.NewScanner(strings.NewReader(stderr.String()))
		for sc.Scan() {
			var line struct{ Msg, Addr, Listener string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener != "metrics" {
				return line.Addr
			}
		}
		select {
		case code := <-exited:
			t.Fatalf("server exited with %d before listening:\n%s", code, stderr.String())
		case <-deadline:
			t.Fatalf("server did not log a listening line:\n%s", stderr.String())
		case <-tick.C:
		}
	}
}

func TestServeLifecycle(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, nil, strings.NewReader(""), &stdout, &stderr)
	}()
	base := "http://" + listenAddr(t, &stderr, exited)

	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, resp.StatusCode)
		}
	}
	if !strings.Contains(stdout.String(), base+"/mcp") {
		t.Errorf("dev mode does not print the MCP URL:\n%s", stdout.String())
	}
	// The printed token works; without it /mcp asks for one.
	_, token, _ := strings.Cut(stdout.String(), "MCP_TOKEN=")
	token, _, _ = strings.Cut(token, "\n")
	for _, tt := range []struct {
		name, auth string
		want       int
	}{
		{name: "no token", want: http.StatusUnauthorized},
		{name: "printed token", auth: "Bearer " + token, want: http.StatusOK},
		{name: "altered token", auth: "Bearer " + oidctest.AlterSignature(token), want: http.StatusUnauthorized},
	} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"PingME","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want || (tt.want == http.StatusOK && !strings.Contains(string(body), "BISMILLAH")) {
			t.Errorf("%s: status %d, want %d\n%s", tt.name, resp.StatusCode, tt.want, body)
		}
	}

	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit code %d after shutdown:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if !strings.Contains(stderr.String(), `"msg":"draining"`) {
		t.Errorf("no draining log line:\n%s", stderr.String())
	}
}

func TestServeRefusesNonLoopbackWithoutAuth(t *testing.T) {
	var out bytes.Buffer
	code := run(t.Context(), []string{"serve", "--listen", "0.0.0.0:0"}, nil, strings.NewReader(""), &out, &out)
	if code != 1 || !strings.Contains(out.String(), "not a loopback address") {
		t.Fatalf("exit code %d, output:\n%s", code, out.String())
	}
	out.Reset()
	code = run(t.Context(), []string{"serve", "--dev", "--listen", "0.0.0.0:0"},
		[]string{"PORTCULLIS_AUTH_INSECURE_ALLOW_UNAUTHENTICATED=true"}, strings.NewReader(""), &out, &out)
	if code != 1 || !strings.Contains(out.String(), "--dev serves only on a loopback address") {
		t.Fatalf("--dev on 0.0.0.0: exit code %d, output:\n%s", code, out.String())
	}
	out.Reset()
	// Bounded: a server that wrongly starts stops when ctx ends, and exits 0.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	code = run(ctx, []string{"serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"},
		[]string{"PORTCULLIS_AUTH_RESOURCE=https://mcp.example.com/mcp"}, strings.NewReader(""), &out, &out)
	if code != 1 || !strings.Contains(out.String(), `auth.resource: "https://mcp.example.com/mcp" is not on a loopback host`) {
		t.Fatalf("--dev with a public auth.resource: exit code %d, output:\n%s", code, out.String())
	}
}

// startDev runs serve --dev on a free port and returns its base URL and the
// URL of its embedded issuer.
func startDev(t *testing.T) (base, issuer string) {
	t.Helper()
	base, issuer, _ = startDevMetrics(t)
	return base, issuer
}

// startDevMetrics is startDev that also returns the /metrics URL; extra
// are more arguments of serve.
func startDevMetrics(t *testing.T, extra ...string) (base, issuer, metrics string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	exited := make(chan int, 1)
	done := make(chan struct{}) // closed on exit, whoever reads the code
	go func() {
		defer close(done)
		args := append([]string{"serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, extra...)
		exited <- run(ctx, args, nil, strings.NewReader(""), &stdout, &stderr)
	}()
	t.Cleanup(func() { cancel(); <-done })
	base = "http://" + listenAddr(t, &stderr, exited)
	// The metrics listener logs its line before the MCP listener's.
	sc := bufio.NewScanner(strings.NewReader(stderr.String()))
	for sc.Scan() {
		var line struct{ Msg, Listener, URL string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "listening" && line.Listener == "metrics" {
			metrics = line.URL
		}
	}
	if metrics == "" {
		t.Fatalf("no metrics listening line:\n%s", stderr.String())
	}
	return base, base + devIssuerPath, metrics
}

// devToken asks the dev issuer's token endpoint for a token for clientID,
// with scopes.
func devToken(t *testing.T, issuer, clientID, resource string, scopes ...string) string {
	t.Helper()
	resp, err := http.PostForm(issuer+"/token", url.Values{
		"grant_type": {"client_credentials"}, "client_id": {clientID}, "resource": {resource},
		"scope": {strings.Join(scopes, " ")},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		t.Fatalf("token endpoint: status %d, %v", resp.StatusCode, err)
	}
	return tok.AccessToken
}

func mcpPost(t *testing.T, url, token, sessionID, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestDevWithRequiredScopes: a configuration that requires scopes runs
// under --dev, whose embedded issuer is added after the file is read: the
// challenge names the scope, and the dev issuer's token carries it.
func TestDevWithRequiredScopes(t *testing.T) {
	base, issuer, _ := startDevMetrics(t, "--config", writeConfig(t, "auth:\n  required_scopes: [mcp:tools]\n"))
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	resp := mcpPost(t, base+"/mcp", "", "", ping)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), `scope="mcp:tools"`) {
		t.Fatalf("no token: status %d, WWW-Authenticate %q; want 401 naming mcp:tools", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	resp = mcpPost(t, base+"/mcp", devToken(t, issuer, "alice", base+"/mcp"), "", ping)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("token without the scope: status %d, want 403", resp.StatusCode)
	}
	resp = mcpPost(t, base+"/mcp", devToken(t, issuer, "alice", base+"/mcp", "mcp:tools"), "", ping)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("dev token: status %d: %s", resp.StatusCode, body)
	}
}

// A legacy session belongs to the caller that created it.
func TestSessionBoundToCaller(t *testing.T) {
	base, issuer := startDev(t)
	alice := devToken(t, issuer, "alice", base+"/mcp")
	mallory := devToken(t, issuer, "mallory", base+"/mcp")

	init := mcpPost(t, base+"/mcp", alice, "",
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sid := init.Header.Get("Mcp-Session-Id")
	if init.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: status %d, session %q", init.StatusCode, sid)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	if r := mcpPost(t, base+"/mcp", mallory, sid, call); r.StatusCode != http.StatusForbidden {
		t.Fatalf("another caller's token on alice's session: status %d, want 403", r.StatusCode)
	}
	r := mcpPost(t, base+"/mcp", alice, sid, call)
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK || !strings.Contains(string(body), `\"subject\":\"alice\"`) {
		t.Fatalf("alice on her session: status %d\n%s", r.StatusCode, body)
	}
}

// TestMetricsEndpoint scrapes the separate metrics listener after a denied
// call, a tool call, a probe and a stray path, and checks the series the
// dashboard and alerts rely on.
func TestMetricsEndpoint(t *testing.T) {
	base, issuer, metricsURL := startDevMetrics(t)
	token := devToken(t, issuer, "alice", base+"/mcp")
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
	if r := mcpPost(t, base+"/mcp", "", "", call); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no token: status %d", r.StatusCode)
	}
	if r := mcpPost(t, base+"/mcp", token, "", call); r.StatusCode != http.StatusOK {
		t.Fatalf("echo: status %d", r.StatusCode)
	}
	for _, path := range []string{"/healthz", "/no/such/path"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	// /metrics is not on the MCP port.
	if resp, err := http.Get(base + "/metrics"); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET /metrics on the MCP port: %v %v, want 404", resp.StatusCode, err)
	}

	resp, err := http.Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d", resp.StatusCode)
	}
	for _, want := range []string{
		`portcullis_auth_requests_total{outcome="denied",reason="missing"} 1`,
		`portcullis_auth_requests_total{outcome="allowed",reason=""} 1`,
		`mcp_server_operation_duration_seconds_count{error_type="",gen_ai_operation_name="execute_tool",gen_ai_prompt_name="",gen_ai_tool_name="echo",mcp_method_name="tools/call",mcp_protocol_version="2025-03-26",network_transport="tcp",portcullis_server="root",portcullis_tool_original="",rpc_response_status_code=""} 1`,
		`portcullis_http_requests_total{code="401",method="post",portcullis_server="root",route="mcp"} 1`,
		`portcullis_http_requests_total{code="200",method="get",portcullis_server="",route="healthz"} 1`,
		`portcullis_http_requests_total{code="404",method="get",portcullis_server="",route="other"}`,
		`portcullis_build_info{fosite_patches="",go_version="`,
		`portcullis_http_requests_in_flight `,
		`portcullis_mcp_sessions_active{portcullis_server="root"} 0`,
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if strings.Contains(string(body), "/no/such/path") {
		t.Error("a raw request path became a label value")
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
}

// Invalid OTEL_* settings stop the server at start-up, every one named.
func TestServeRejectsBadTraceSettings(t *testing.T) {
	var out bytes.Buffer
	env := []string{"OTEL_TRACES_EXPORTER=zipkin", "OTEL_EXPORTER_OTLP_ENDPOINT=collector:4318"}
	code := run(t.Context(), []string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, env, strings.NewReader(""), &out, &out)
	if code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", code, out.String())
	}
	for _, want := range []string{"2 problems", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestPprofOnlyWhenAllowed checks that Go's runtime profiles are served on
// the metrics listener only with server.allow_pprof, and never on the MCP
// listener.
func TestPprofOnlyWhenAllowed(t *testing.T) {
	get := func(t *testing.T, url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_pprof %v", allow), func(t *testing.T) {
			path := writeConfig(t, fmt.Sprintf("server:\n  allow_pprof: %v\n", allow))
			base, _, metricsURL := startDevMetrics(t, "--config", path)
			metricsBase := strings.TrimSuffix(metricsURL, "/metrics")
			for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/cmdline"} {
				status, body := get(t, metricsBase+p)
				if allow && (status != http.StatusOK || body == "") {
					t.Errorf("GET %s on the metrics listener: status %d, want 200 with a body", p, status)
				}
				if !allow && status != http.StatusNotFound {
					t.Errorf("GET %s on the metrics listener: status %d, want 404", p, status)
				}
				if status, _ := get(t, base+p); status == http.StatusOK {
					t.Errorf("GET %s on the MCP listener: status %d, want it not served", p, status)
				}
			}
			if allow {
				if status, body := get(t, metricsBase+"/debug/pprof/heap?debug=1"); status != http.StatusOK || !strings.Contains(body, "heap profile") {
					t.Errorf("heap profile: status %d\n%.200s", status, body)
				}
			}
		})
	}
}

// TestStdioToolPolicy checks that `portcullis stdio`, which has no token,
// hides the tools auth.policy guards unless auth.allow_stdio_all_tools is
// on, and warns when it is.
func TestStdioToolPolicy(t *testing.T) {
	const policy = "auth:\n  policy:\n    - tool: echo\n      scopes: [mcp:admin]\n"
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
	}, "\n") + "\n"
	tests := []struct {
		name   string
		config string
		allow  bool
	}{
		{name: "policy hides the guarded tool", config: policy},
		{name: "allow_stdio_all_tools", config: policy + "  allow_stdio_all_tools: true\n", allow: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr syncbuf.Buffer
			args := []string{"stdio", "--config", writeConfig(t, tt.config)}
			if code := run(t.Context(), args, nil, strings.NewReader(input), &stdout, &stderr); code != 0 {
				t.Fatalf("exit code %d, want 0\n%s", code, stderr.String())
			}
			replies := map[string]struct {
				Result struct {
					Tools []struct{ Name string }
				}
				Error *struct{ Code int }
			}{}
			for line := range strings.Lines(stdout.String()) {
				var m struct{ ID json.RawMessage }
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatalf("stdout line is not JSON-RPC (%v): %s", err, line)
				}
				r := replies[string(m.ID)]
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatal(err)
				}
				replies[string(m.ID)] = r
			}
			listed := false
			for _, tool := range replies["2"].Result.Tools {
				listed = listed || tool.Name == "echo"
			}
			call := replies["3"].Error
			if listed != tt.allow || (call == nil) != tt.allow {
				t.Errorf("echo listed %v, call error %+v; want listed and callable: %v\nstdout:\n%s", listed, call, tt.allow, stdout.String())
			}
			if !tt.allow && call != nil && call.Code != -32602 {
				t.Errorf("call error code %d, want -32602 as for an unknown tool", call.Code)
			}
			if warned := strings.Contains(stderr.String(), "allow_stdio_all_tools is on"); warned != tt.allow {
				t.Errorf("warning logged: %v, want %v\n%s", warned, tt.allow, stderr.String())
			}
		})
	}
}

// TestReadyzHidesIssuerErrors shows that /readyz, which anyone may call,
// says which check is not ready but nothing of the IdP's error: neither
// its URL nor its answer. The log has them, once however often it is
// probed.
func TestReadyzHidesIssuerErrors(t *testing.T) {
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upstream connect error: tenant-secret-detail", http.StatusBadGateway)
	}))
	defer idp.Close()
	cfg := writeConfig(t, "auth:\n  resource: http://127.0.0.1:1/mcp\n  issuers:\n    - issuer: "+idp.URL+"/realms/corp\n")
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, noDrainDelay, strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() { cancel(); <-exited }()
	base := "http://" + listenAddr(t, &stderr, exited)

	for range 3 {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || string(body) != "not ready: issuer keys not loaded\n" {
			t.Errorf("/readyz = %d %q, want 503 %q", resp.StatusCode, body, "not ready: issuer keys not loaded\n")
		}
		for _, leak := range []string{strings.TrimPrefix(idp.URL, "http://"), "realms", "502", "Bad Gateway", "tenant-secret-detail", "upstream"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("/readyz body %q shows %q from the IdP", body, leak)
			}
		}
	}
	// A probe that fetched returns after the fetch's log line is written.
	var lines []string
	for l := range strings.Lines(stderr.String()) {
		if strings.Contains(l, `"msg":"auth: issuer unreachable`) {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"issuer":"`+idp.URL+`/realms/corp"`) || !strings.Contains(lines[0], "502 Bad Gateway") {
		t.Errorf("want one log line naming the issuer and its error, got %d:\n%s", len(lines), stderr.String())
	}
}

// TestWeakeningKnobsWarn shows that the auth knobs that weaken a check are
// each named in a warning at start.
func TestWeakeningKnobsWarn(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, `auth:
  resource: http://127.0.0.1:1/mcp
  issuers:
    - issuer: http://127.0.0.1:1/realms/corp
      allow_untyped_access_tokens: true
  introspection:
    url: https://as.example.com/introspect
    client_id: portcullis
    client_secret_file: `+secret+`
    allow_missing_audience: true
`)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, noDrainDelay, strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() { cancel(); <-exited }()
	listenAddr(t, &stderr, exited) // the warnings come before this line
	for _, key := range []string{"auth.issuers[0].allow_untyped_access_tokens", "auth.introspection.allow_missing_audience"} {
		found := false
		for l := range strings.Lines(stderr.String()) {
			if strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, `"key":"`+key+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no warning naming %s:\n%s", key, stderr.String())
		}
	}
}

// TestDevModeWarns shows serve --dev saying at WARN, in the structured log,
// that its embedded issuer mints tokens for anyone and that dev mode is not
// for production: the printed banner alone goes to stdout, which a log
// pipeline does not see.
func TestDevModeWarns(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"serve", "--dev", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, nil, strings.NewReader(""), &stdout, &stderr)
	}()
	defer func() { cancel(); <-exited }()
	addr := listenAddr(t, &stderr, exited) // the warning comes before this line
	var found []map[string]any
	for l := range strings.Lines(stderr.String()) {
		var line map[string]any
		if json.Unmarshal([]byte(l), &line) == nil && line["level"] == "WARN" && line["flag"] == "--dev" {
			found = append(found, line)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one WARN line with flag --dev, got %d:\n%s", len(found), stderr.String())
	}
	msg, _ := found[0]["msg"].(string)
	for _, want := range []string{"mints tokens for anyone", "not for production"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q does not say %q", msg, want)
		}
	}
	if found[0]["issuer"] != "http://"+addr+devIssuerPath {
		t.Errorf("warning names issuer %v, want %q", found[0]["issuer"], "http://"+addr+devIssuerPath)
	}
}

// TestDevIssuerMountedLoopbackOnly shows the served dev issuer refusing a
// request whose Host or Origin is not loopback (DNS rebinding).
func TestDevIssuerMountedLoopbackOnly(t *testing.T) {
	_, issuer := startDev(t)
	for _, tt := range []struct {
		name, host, origin string
		want               int
	}{
		{name: "loopback", want: http.StatusOK},
		{name: "Host evil.example", host: "evil.example", want: http.StatusMisdirectedRequest},
		{name: "Host 127.0.0.1.nip.io", host: "127.0.0.1.nip.io", want: http.StatusMisdirectedRequest},
		{name: "Origin evil.example", origin: "http://evil.example", want: http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, issuer+"/jwks", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("GET /dev-issuer/jwks: status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// noDrainDelay is the environment of a test server that is stopped by
// cancelling its context: it stops at once rather than after the default
// server.drain_delay.
var noDrainDelay = []string{"PORTCULLIS_SERVER_DRAIN_DELAY=0s"}

// run runs args as the binary does, with environ as the environment and
// the given streams, printing a failure on stderr; it returns the exit code.
func run(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	err := execute(ctx, process{args: args, environ: environ, stdin: stdin, stdout: stdout, stderr: stderr}, extensions{})
	if err != nil {
		fmt.Fprintln(stderr, err)
	}
	return exitCode(err)
}
