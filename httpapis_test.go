package portcullis

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/mcp"
)

// restRequest is a request as the test REST API received it.
type restRequest struct {
	Method, Path, Query, Body, APIKey, Authorization, Trace string
}

// startRESTAPI serves a small REST API that records its requests: GET
// /v1/pets/{id}, POST /v1/stores/{store}/pets, and /v1/broken/{status},
// which answers that status.
func startRESTAPI(t *testing.T) (url string, requests func() []restRequest) {
	t.Helper()
	var mu sync.Mutex
	var got []restRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, restRequest{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("X-Trace")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/v1/broken/"):
			var code int
			fmt.Sscan(strings.TrimPrefix(r.URL.Path, "/v1/broken/"), &code)
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error":"status %d"}`, code)
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":1,"request":%s}`, b)
		default:
			fmt.Fprintf(w, `{"id":%q}`, strings.TrimPrefix(r.URL.Path, "/v1/pets/"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []restRequest {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

// httpAPIConfig is a configuration with the test REST API's tools on
// /mcp and, one renamed and one argument fixed, on the virtual server
// /mcp/team; audit events go to auditFile.
func httpAPIConfig(t *testing.T, api, auditFile string) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(key, []byte("the-api-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeConfig(t, `
http_apis:
  - name: pets
    base_url: `+api+`/v1
    allow_private_addresses: true
    headers:
      - name: X-Api-Key
        value_file: `+key+`
    tools:
      - name: get_pet
        description: Get a pet by its id.
        annotations: {read_only: true}
        method: GET
        path: /pets/{petId}
        params:
          - {name: petId, in: path}
          - {name: verbose, in: query}
          - {name: trace, in: header, as: X-Trace}
        input_schema:
          type: object
          properties:
            petId: {type: string}
            verbose: {type: boolean}
            trace: {type: string}
          required: [petId]
      - name: add_pet
        method: POST
        path: /stores/{store}/pets
        params: [{name: store, in: path}]
        input_schema:
          type: object
          properties:
            store: {type: string}
            name: {type: string}
          required: [store, name]
        output_schema: {type: object}
      - name: broken
        method: GET
        path: /broken/{status}
        params: [{name: status, in: path}]
audit:
  sinks:
    - type: file
      path: `+auditFile+`
servers:
  - name: team
    path: /mcp/team
    tools:
      - source: pets
        name: get_pet
        expose_as: pet
      - source: pets
        name: add_pet
        fixed_arguments: {store: main}
`)
}

// TestHTTPAPIsServed runs serve --dev in front of a REST API: its
// declared tools are listed and called on /mcp and, curated, on a
// virtual server; the API sees the configured credential and never the
// caller's token; 4xx and 5xx become tool errors; the calls are counted
// in the metrics and audited as any tool's.
func TestHTTPAPIsServed(t *testing.T) {
	api, requests := startRESTAPI(t)
	auditFile := filepath.Join(t.TempDir(), "audit.jsonl")
	base, issuer, metricsURL := startDevMetrics(t, "--config", httpAPIConfig(t, api, auditFile))
	root := connectWithToken(t, base+"/mcp", devToken(t, issuer, "rest-test", base+"/mcp", "mcp:tools"), "2025-11-25")
	team := connectWithToken(t, base+"/mcp/team", devToken(t, issuer, "rest-test", base+"/mcp/team", "mcp:tools"), "2025-11-25")

	names := func(cs *sdk.ClientSession) []string {
		var out []string
		for tool, err := range cs.Tools(t.Context(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tool.Name, "pets_") || tool.Name == "pet" {
				out = append(out, tool.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	if got, want := names(root), []string{"pets_add_pet", "pets_broken", "pets_get_pet"}; !slices.Equal(got, want) {
		t.Errorf("/mcp lists %v, want %v", got, want)
	}
	if got, want := names(team), []string{"pet", "pets_add_pet"}; !slices.Equal(got, want) {
		t.Errorf("/mcp/team lists %v, want %v", got, want)
	}

	call := func(cs *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	resultText := func(r *sdk.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*sdk.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	tests := []struct {
		name    string
		cs      *sdk.ClientSession
		tool    string
		args    map[string]any
		wantErr string // empty: a success
		want    restRequest
	}{
		{name: "path, query and header", cs: root, tool: "pets_get_pet", args: map[string]any{"petId": "42", "verbose": true, "trace": "t-1"},
			want: restRequest{Method: "GET", Path: "/v1/pets/42", Query: "verbose=true", Trace: "t-1"}},
		{name: "renamed on the virtual server", cs: team, tool: "pet", args: map[string]any{"petId": "a/b"},
			want: restRequest{Method: "GET", Path: "/v1/pets/a%2Fb"}},
		{name: "JSON body, path argument fixed", cs: team, tool: "pets_add_pet", args: map[string]any{"name": "Rex"},
			want: restRequest{Method: "POST", Path: "/v1/stores/main/pets", Body: `{"name":"Rex"}`}},
		{name: "a 4xx is a tool error", cs: root, tool: "pets_broken", args: map[string]any{"status": "404"}, wantErr: "404 Not Found",
			want: restRequest{Method: "GET", Path: "/v1/broken/404"}},
		{name: "a 5xx is a tool error", cs: root, tool: "pets_broken", args: map[string]any{"status": "503"}, wantErr: "503 Service Unavailable",
			want: restRequest{Method: "GET", Path: "/v1/broken/503"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(requests())
			res := call(tt.cs, tt.tool, tt.args)
			if res.IsError != (tt.wantErr != "") || !strings.Contains(resultText(res), tt.wantErr) {
				t.Fatalf("IsError = %v, text %q; want error %q", res.IsError, resultText(res), tt.wantErr)
			}
			reqs := requests()
			if len(reqs) != before+1 {
				t.Fatalf("the API got %d requests, want 1", len(reqs)-before)
			}
			got := reqs[before]
			tt.want.APIKey = "the-api-key"
			if got != tt.want {
				t.Errorf("the API got %+v, want %+v", got, tt.want)
			}
		})
	}

	// The caller cannot set the fixed argument: refused before the API.
	before := len(requests())
	if res, err := team.CallTool(t.Context(), &sdk.CallToolParams{Name: "pets_add_pet", Arguments: map[string]any{"name": "x", "store": "other"}}); err == nil && !res.IsError {
		t.Errorf("a call setting the fixed argument succeeded: %s", resultText(res))
	}
	if len(requests()) != before {
		t.Errorf("a call setting the fixed argument reached the API")
	}
	// On the 2026-07-28 era, served without the SDK server's session, the
	// same curation applies.
	modern := connectWithToken(t, base+"/mcp/team", devToken(t, issuer, "rest-test", base+"/mcp/team", "mcp:tools"), "2026-07-28")
	if res := call(modern, "pets_add_pet", map[string]any{"name": "Max"}); res.IsError {
		t.Errorf("2026-07-28: %s", resultText(res))
	} else if got := requests()[len(requests())-1]; got.Path != "/v1/stores/main/pets" || got.Body != `{"name":"Max"}` || got.Authorization != "" {
		t.Errorf("2026-07-28: the API got %+v", got)
	}
	before = len(requests())
	if res, err := modern.CallTool(t.Context(), &sdk.CallToolParams{Name: "pets_add_pet", Arguments: map[string]any{"name": "x", "store": "other"}}); err == nil && !res.IsError {
		t.Errorf("2026-07-28: a call setting the fixed argument succeeded: %s", resultText(res))
	}
	if len(requests()) != before {
		t.Errorf("2026-07-28: a call setting the fixed argument reached the API")
	}
	// A JSON object answered with an output schema is structured content.
	if res := call(team, "pets_add_pet", map[string]any{"name": "Rex"}); res.StructuredContent == nil {
		t.Errorf("no structured content: %s", resultText(res))
	}

	// Counted and audited as any tool's calls.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), `gen_ai_tool_name="pets_get_pet"`) && strings.Contains(string(b), `gen_ai_tool_name="pet"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the metrics have no series of the HTTP tools' calls")
		}
		time.Sleep(20 * time.Millisecond)
	}
	events, raw := readAuditEvents(t, auditFile, func(es []auditEvent) bool {
		return slices.ContainsFunc(es, func(e auditEvent) bool { return e.Type == "tool.call" && e.Tool == "pets_get_pet" }) &&
			slices.ContainsFunc(es, func(e auditEvent) bool {
				return e.Type == "tool.call" && e.Server == "team" && e.Tool == "pets_add_pet"
			})
	})
	if !slices.ContainsFunc(events, func(e auditEvent) bool { return e.Type == "tool.call" && e.Tool == "pets_get_pet" }) {
		t.Errorf("no tool.call event of pets_get_pet:\n%s", raw)
	}
	if strings.Contains(raw, "the-api-key") {
		t.Errorf("the audit trail holds the API's key")
	}
}

// BenchmarkHTTPToolCall measures issue 43's goal: a declared HTTP tool's
// call costs at most 60 µs of Portcullis CPU more than the API's own
// response. Each sub-benchmark reports the process's CPU per call
// (cpu-ns/op), in process, through the app's whole HTTP handler as
// BenchmarkVirtualServerCall does: tool=calculator is a built-in tool's
// 2026-07-28 tools/call; tool=http is the same call of an HTTP tool whose
// API, on loopback in this process, answers a small JSON object; api=bare
// is the API's request alone, made with a plain keep-alive client. So
// http - bare is what the HTTP tool's call costs Portcullis (its client
// side of the API request included), and http - bare - calculator what it
// costs more than a built-in tool's.
//
//	go test -run '^$' -bench HTTPToolCall -count 6 -cpu 1 . | tee bench.txt
func BenchmarkHTTPToolCall(b *testing.B) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"42","name":"Rex","status":"available"}`)
	}))
	b.Cleanup(api.Close)
	cfg := "auth:\n  scopes_supported: [mcp:tools]\n" +
		"limits:\n  max_in_flight: 100000\n  max_in_flight_per_principal: 100000\n" +
		"  rate_per_principal: 1000000000\n  burst_per_principal: 1000000000\n" +
		"http_apis:\n  - name: pets\n    base_url: " + api.URL + "/v1\n    allow_private_addresses: true\n" +
		"    headers: [{name: X-Api-Key, value: k}]\n" +
		"    tools:\n      - name: get_pet\n        method: GET\n        path: /pets/{petId}\n" +
		"        params: [{name: petId, in: path}, {name: verbose, in: query}]\n" +
		"        input_schema: {type: object, properties: {petId: {type: string}, verbose: {type: boolean}}, required: [petId]}\n"
	h, tokens := virtualServerHandler(b, cfg)
	b.Run("api=bare", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		b.ReportAllocs()
		cpu := processCPU(b)
		for b.Loop() {
			req, _ := http.NewRequest(http.MethodGet, api.URL+"/v1/pets/42?verbose=true", nil)
			req.Header.Set("X-Api-Key", "k")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	for _, tt := range []struct {
		name, tool, args, want string
	}{
		{name: "tool=calculator", tool: "calculator", args: `{"operation":"add","a":1,"b":2}`, want: `"result":3`},
		{name: "tool=http", tool: "pets_get_pet", args: `{"petId":"42","verbose":true}`, want: `Rex`},
	} {
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tt.tool + `","arguments":` + tt.args + `,` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"bench","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`)
		header := http.Header{
			"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
			"Authorization": {"Bearer " + tokens[mcpPath]}, "Mcp-Protocol-Version": {"2026-07-28"},
			"Mcp-Method": {"tools/call"}, "Mcp-Name": {tt.tool},
		}
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080"+mcpPath, bytes.NewReader(body))
				req.Header = header.Clone()
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), tt.want) {
					b.Fatalf("%s: status %d: %s", tt.tool, w.Code, w.Body)
				}
			}
			b.ReportMetric(float64((processCPU(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// An HTTP API acting as each user's connected account needs the vault
// of connected accounts, as such an upstream does; its name may not be
// an upstream's.
func TestHTTPAPIsChecks(t *testing.T) {
	tests := []struct {
		name, cfg, want string
	}{
		{name: "connected accounts need the vault", cfg: `
http_apis:
  - name: crm
    base_url: https://crm.example/api
    oauth: {grant: authorization_code, issuer: "https://crm.example", client_id: portcullis}
`, want: "connections.keys_file: required"},
		{name: "a name an upstream has", cfg: `
upstreams:
  - {name: crm, transport: http, url: "https://mcp.example/mcp"}
http_apis:
  - {name: crm, prefix: crm2, base_url: "https://crm.example/api"}
`, want: `http_apis[0].name: "crm" is also the name of an upstream`},
		{name: "a selection of an API's tool", cfg: `
http_apis:
  - name: crm
    base_url: https://crm.example/api
    tools: [{name: get, method: GET, path: /x}]
servers:
  - {name: s, path: /mcp/s, tools: [{source: crm, name: nope}]}
`, want: "servers[0].tools[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(writeConfig(t, tt.cfg), nil, nil)
			if err == nil {
				_, err = newApp(t.Context(), cfg, mcp.HTTP, extensions{}, process{stderr: io.Discard})
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
