package portcullis

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
)

// tokenTransport adds a token to every request.
type tokenTransport string

func (b tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// connectWithToken connects an SDK client of protocol version to the MCP
// endpoint, sending token with every request; the session is closed when
// the test ends.
func connectWithToken(t *testing.T, endpoint, token, version string) *sdk.ClientSession {
	t.Helper()
	tr := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tokenTransport(token)}, MaxRetries: -1, DisableStandaloneSSE: true}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to %s (%s): %v", endpoint, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// TestVirtualServersServed runs serve --dev with two virtual servers next
// to /mcp: each lists exactly its own tools, as curated, in both eras; a
// fixed argument is set on every call and a caller's attempt to set it is
// refused; a token for one server is refused at the others; each server's
// metadata names its own resource.
func TestVirtualServersServed(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "portcullis.yaml")
	if err := os.WriteFile(cfg, []byte(`
servers:
  - name: math
    path: /mcp/math
    title: Math tools
    tools:
      - source: core
        name: calculator
        expose_as: add_numbers
        description: Adds two numbers.
        fixed_arguments: {operation: add}
  - name: talk
    path: /mcp/talk
    tools:
      - source: core
        name: echo
`), 0o600); err != nil {
		t.Fatal(err)
	}
	base, issuer, _ := startDevMetrics(t, "--config", cfg)
	tokens := map[string]string{}
	for _, p := range []string{"/mcp", "/mcp/math", "/mcp/talk"} {
		tokens[p] = devToken(t, issuer, "virtual-test", base+p, "mcp:tools")
	}
	connect := func(t *testing.T, path, version string) *sdk.ClientSession {
		t.Helper()
		return connectWithToken(t, base+path, tokens[path], version)
	}
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			ctx := t.Context()
			math, talk := connect(t, "/mcp/math", version), connect(t, "/mcp/talk", version)
			tests := []struct {
				name string
				cs   *sdk.ClientSession
				want []string
			}{
				{name: "math", cs: math, want: []string{"add_numbers"}},
				{name: "talk", cs: talk, want: []string{"echo"}},
			}
			for _, tt := range tests {
				res, err := tt.cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatalf("%s: tools/list: %v", tt.name, err)
				}
				var names []string
				for _, tl := range res.Tools {
					names = append(names, tl.Name)
				}
				if !slices.Equal(names, tt.want) {
					t.Errorf("%s lists %q, want %q", tt.name, names, tt.want)
				}
				if tt.name == "math" && len(res.Tools) == 1 {
					tl := res.Tools[0]
					schema, _ := json.Marshal(tl.InputSchema)
					if tl.Description != "Adds two numbers." || strings.Contains(string(schema), "operation") {
						t.Errorf("add_numbers: description %q, schema %s; want the curated description and no operation", tl.Description, schema)
					}
				}
			}
			res, err := math.CallTool(ctx, &sdk.CallToolParams{Name: "add_numbers", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil || res.IsError {
				t.Fatalf("add_numbers: %v %+v", err, res)
			}
			if got, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(got), `"result":5`) {
				t.Errorf("add_numbers(2, 3) = %s, want result 5: the fixed operation did not reach the tool", got)
			}
			for _, args := range []map[string]any{
				{"a": 2, "b": 3, "operation": "multiply"},
				{"a": 2, "b": 3, "Operation": "multiply"},
			} {
				res, err := math.CallTool(ctx, &sdk.CallToolParams{Name: "add_numbers", Arguments: args})
				if err == nil && !res.IsError {
					t.Errorf("add_numbers with %v: answered %+v, want a refusal", args, res.StructuredContent)
				}
			}
			for _, name := range []string{"calculator", "echo"} {
				if res, err := math.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: map[string]any{"text": "x"}}); err == nil && !res.IsError {
					t.Errorf("math server answered %s, which it does not expose", name)
				}
			}
		})
	}

	t.Run("audience", func(t *testing.T) {
		for _, tc := range []struct{ token, at string }{
			{"/mcp/math", "/mcp/talk"}, {"/mcp/math", "/mcp"}, {"/mcp", "/mcp/math"}, {"/mcp/talk", "/mcp/math"},
		} {
			resp := mcpPost(t, base+tc.at, tokens[tc.token], "", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a token for %s at %s: status %d, want 401", tc.token, tc.at, resp.StatusCode)
			}
		}
	})
	t.Run("metadata", func(t *testing.T) {
		for _, p := range []string{"/mcp/math", "/mcp/talk"} {
			resp, err := http.Get(base + "/.well-known/oauth-protected-resource" + p)
			if err != nil {
				t.Fatal(err)
			}
			var meta struct {
				Resource string `json:"resource"`
			}
			err = json.NewDecoder(resp.Body).Decode(&meta)
			resp.Body.Close()
			if err != nil || meta.Resource != base+p {
				t.Errorf("metadata of %s: resource %q (%v), want %q", p, meta.Resource, err, base+p)
			}
		}
	})
}

// TestServerTools: a program's tools added with ServerTools are served on
// the virtual server it names, as well as on /mcp; a server the
// configuration lacks stops the start.
func TestServerTools(t *testing.T) {
	type in struct {
		Customer string `json:"customer"`
	}
	invoice := ServerTools("billing", Tool(&sdk.Tool{Name: "invoice", Description: "Returns a customer's last invoice."},
		func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "invoice of " + a.Customer}}}, nil, nil
		}))
	start := func(t *testing.T, servers string) (base string, exited chan int, stderr *syncbuf.Buffer) {
		cfg := filepath.Join(t.TempDir(), "portcullis.yaml")
		if err := os.WriteFile(cfg, []byte(servers), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		stderr = &syncbuf.Buffer{}
		exited = make(chan int, 1)
		done := make(chan struct{})
		go func() {
			defer close(done)
			args := []string{"serve", "--config", cfg, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}
			err := execute(ctx, process{args: args, environ: noDrainDelay, stdin: strings.NewReader(""), stdout: &syncbuf.Buffer{}, stderr: stderr}, newSettings([]Option{invoice, Environ(nil)}).ext)
			if err != nil {
				stderr.Write([]byte(err.Error() + "\n"))
			}
			exited <- exitCode(err)
		}()
		t.Cleanup(func() { cancel(); <-done })
		return "", exited, stderr
	}
	t.Run("served on its server", func(t *testing.T) {
		_, exited, stderr := start(t, "servers:\n  - name: billing\n    path: /mcp/billing\n")
		base := "http://" + listenAddr(t, stderr, exited)
		for _, path := range []string{"/mcp/billing", "/mcp"} {
			tr := &sdk.StreamableClientTransport{Endpoint: base + path, MaxRetries: -1, DisableStandaloneSSE: true}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			res, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "invoice", Arguments: map[string]any{"customer": "acme"}})
			cs.Close()
			if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "invoice of acme" {
				t.Errorf("invoice on %s: %v %+v", path, err, res)
			}
		}
	})
	t.Run("no such server", func(t *testing.T) {
		_, exited, stderr := start(t, "servers:\n  - name: support\n    path: /mcp/support\n")
		if code := <-exited; code == 0 || !strings.Contains(stderr.String(), `no virtual server named "billing"`) {
			t.Errorf("exit %d, stderr:\n%s\nwant a failed start naming the server", code, stderr.String())
		}
	})
}

// TestVirtualServerMetrics runs serve --dev with a virtual server that
// exposes the calculator renamed: a call there is counted under the
// server's name, the exposed name and the original one, and a call on /mcp
// under the root server; the HTTP route of each is "mcp", told apart by
// portcullis_server; a call of a tool the server does not expose is
// denied on that server.
func TestVirtualServerMetrics(t *testing.T) {
	cfg := writeConfig(t, `
servers:
  - name: math
    path: /mcp/math
    tools:
      - source: core
        name: calculator
        expose_as: add_numbers
        fixed_arguments: {operation: add}
`)
	base, issuer, metricsURL := startDevMetrics(t, "--config", cfg)
	call := func(path, tool, args string) {
		t.Helper()
		token := devToken(t, issuer, "metrics-test", base+path, "mcp:tools")
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `}}`
		resp := mcpPost(t, base+path, token, "", body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s on %s: status %d", tool, path, resp.StatusCode)
		}
	}
	call("/mcp/math", "add_numbers", `{"a":1,"b":2}`)
	call("/mcp", "calculator", `{"operation":"add","a":1,"b":2}`)
	call("/mcp/math", "calculator", `{"operation":"add","a":1,"b":2}`)

	// scrape reads the metrics. A call's HTTP metrics are recorded when
	// its handler returns, which may be just after the client has read
	// the streamed response: the checks below scrape until they hold.
	var fams map[string]*dto.MetricFamily
	scrape := func() {
		t.Helper()
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.LegacyValidation)
		if fams, err = parser.TextToMetricFamilies(resp.Body); err != nil {
			t.Fatal(err)
		}
	}
	// value sums the samples of family name whose labels include want.
	value := func(name string, want map[string]string) float64 {
		sum := 0.0
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			match := true
			for k, v := range want {
				match = match && labels[k] == v
			}
			if !match {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				sum += float64(m.GetHistogram().GetSampleCount())
			}
		}
		return sum
	}
	tests := []struct {
		name   string
		family string
		labels map[string]string
		want   float64
	}{
		{
			name: "a call on the virtual server", family: "mcp_server_operation_duration_seconds",
			labels: map[string]string{"mcp_method_name": "tools/call", "portcullis_server": "math", "gen_ai_tool_name": "add_numbers", "portcullis_tool_original": "calculator", "error_type": ""},
			want:   1,
		},
		{
			name: "a call on /mcp", family: "mcp_server_operation_duration_seconds",
			labels: map[string]string{"mcp_method_name": "tools/call", "portcullis_server": "root", "gen_ai_tool_name": "calculator", "portcullis_tool_original": "", "error_type": ""},
			want:   1,
		},
		{
			// Refused before the SDK, by the handler's tool gate: without
			// the Mcp-Method header of 2026-07-28, the method is _OTHER.
			name: "the original name on the virtual server is an unknown tool", family: "mcp_server_operation_duration_seconds",
			labels: map[string]string{"portcullis_server": "math", "error_type": "-32602"},
			want:   1,
		},
		{
			name: "and denied there", family: "portcullis_tool_calls_denied_total",
			labels: map[string]string{"portcullis_server": "math", "reason": "unknown_tool", "tool": "_OTHER"},
			want:   1,
		},
		{
			name: "nothing denied on /mcp", family: "portcullis_tool_calls_denied_total",
			labels: map[string]string{"portcullis_server": "root"},
			want:   0,
		},
		{
			name: "the virtual server's HTTP requests", family: "portcullis_http_requests_total",
			labels: map[string]string{"route": "mcp", "portcullis_server": "math", "code": "200"},
			want:   2,
		},
		{
			name: "/mcp's HTTP requests", family: "portcullis_http_requests_total",
			labels: map[string]string{"route": "mcp", "portcullis_server": "root", "code": "200"},
			want:   1,
		},
	}
	var wrong []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		scrape()
		wrong = wrong[:0]
		for _, tt := range tests {
			if got := value(tt.family, tt.labels); got != tt.want {
				wrong = append(wrong, fmt.Sprintf("%s: %s%v = %v, want %v", tt.name, tt.family, tt.labels, got, tt.want))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range wrong {
		t.Error(w)
	}
}
