//go:build e2e

package e2e

// Declared HTTP tools (config http_apis:) served by the real binary in
// front of a small REST API in the test: go-sdk clients of each protocol
// era and the TypeScript SDKs' clients list and call them with path,
// query, header and JSON body arguments; the API sees the configured key,
// never the caller's token; a 4xx and a 5xx become tool errors; the
// conformance requirements pass with HTTP tools served.

import (
	"bytes"
	"cmp"
	"context"
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
)

// restCall is a request as the test REST API received it.
type restCall struct {
	Method, Path, Query, Body, APIKey, Authorization, Trace string
}

// startOrdersAPI starts the test's REST API: GET /api/orders/{order_id}
// (missing answers 404, crash 500) and POST /api/orders. all returns the
// requests it got.
func startOrdersAPI(t *testing.T) (url string, all func() []restCall) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []restCall
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, restCall{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("X-Trace")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/api/orders/missing":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":"no such order"}`)
		case r.URL.Path == "/api/orders/crash":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"error":"database down"}`)
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"created":true,"order":%s}`, b)
		default:
			fmt.Fprintf(w, `{"id":%q,"status":"shipped"}`, strings.TrimPrefix(r.URL.Path, "/api/orders/"))
		}
	}))
	t.Cleanup(api.Close)
	return api.URL, func() []restCall {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}

// ordersConfig is a configuration with the orders API's tools, prefixed
// by extra (other sections).
func ordersConfig(t *testing.T, apiURL, extra string) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "orders-key")
	if err := os.WriteFile(key, []byte("orders-api-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return writeUpstreamConfig(t, extra+`
http_apis:
  - name: orders
    base_url: `+apiURL+`/api
    allow_private_addresses: true
    headers:
      - name: X-Api-Key
        value_file: `+key+`
    tools:
      - name: get_order
        description: Get an order by its id.
        annotations: {read_only: true}
        method: GET
        path: /orders/{order_id}
        params:
          - {name: order_id, in: path}
          - {name: expand, in: query}
          - {name: trace, in: header, as: X-Trace}
        input_schema:
          type: object
          properties:
            order_id: {type: string}
            expand: {type: string}
            trace: {type: string}
          required: [order_id]
      - name: create_order
        method: POST
        path: /orders
        input_schema:
          type: object
          properties:
            item: {type: string}
            quantity: {type: integer}
          required: [item]
        output_schema: {type: object}
`)
}

func TestHTTPToolsRealBinary(t *testing.T) {
	apiURL, all := startOrdersAPI(t)
	last := func() (restCall, int) {
		c := all()
		if len(c) == 0 {
			return restCall{}, 0
		}
		return c[len(c)-1], len(c)
	}
	cfg := ordersConfig(t, apiURL, "")
	s := startServer(t, nil, "--dev", "--config", cfg)
	token := devToken(t, s, "alice")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, version := range []string{"2025-11-25", modernProtocol} {
		t.Run("era "+version, func(t *testing.T) {
			cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}}}, version)
			names := sdkToolNames(t, ctx, cs)
			for _, want := range []string{"orders_get_order", "orders_create_order"} {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			tests := []struct {
				name, tool string
				args       map[string]any
				wantErr    string
				want       restCall
			}{
				{name: "path, query and header", tool: "orders_get_order", args: map[string]any{"order_id": "o-1", "expand": "lines", "trace": "tr-9"},
					want: restCall{Method: "GET", Path: "/api/orders/o-1", Query: "expand=lines", Trace: "tr-9"}},
				{name: "a path argument stays one segment", tool: "orders_get_order", args: map[string]any{"order_id": "../admin"},
					want: restCall{Method: "GET", Path: "/api/orders/..%2Fadmin"}},
				{name: "JSON body", tool: "orders_create_order", args: map[string]any{"item": "book", "quantity": 2},
					want: restCall{Method: "POST", Path: "/api/orders", Body: `{"item":"book","quantity":2}`}},
				{name: "a 4xx is a tool error", tool: "orders_get_order", args: map[string]any{"order_id": "missing"}, wantErr: "404 Not Found",
					want: restCall{Method: "GET", Path: "/api/orders/missing"}},
				{name: "a 5xx is a tool error", tool: "orders_get_order", args: map[string]any{"order_id": "crash"}, wantErr: "500 Internal Server Error",
					want: restCall{Method: "GET", Path: "/api/orders/crash"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					_, before := last()
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
					if err != nil {
						t.Fatalf("%s: %v", tt.tool, err)
					}
					var text strings.Builder
					for _, c := range res.Content {
						if tc, ok := c.(*sdk.TextContent); ok {
							text.WriteString(tc.Text)
						}
					}
					if res.IsError != (tt.wantErr != "") || !strings.Contains(text.String(), tt.wantErr) {
						t.Fatalf("IsError = %v, %q; want error %q", res.IsError, text.String(), tt.wantErr)
					}
					got, n := last()
					if n != before+1 {
						t.Fatalf("the API got %d requests, want 1", n-before)
					}
					tt.want.APIKey = "orders-api-key" // the configured credential, never the caller's token
					if got != tt.want {
						t.Errorf("the API got %+v, want %+v", got, tt.want)
					}
					if tt.tool == "orders_create_order" && res.StructuredContent == nil {
						t.Errorf("no structured content")
					}
				})
			}
		})
	}

	// The TypeScript SDKs' clients, of both eras.
	for _, ts := range []struct{ sdk, protocol string }{{"v1", ""}, {"v2", ""}, {"v2", modernProtocol}} {
		label := "TypeScript " + ts.sdk + " " + cmp.Or(ts.protocol, "default")
		t.Run(label, func(t *testing.T) {
			id := "TS-" + ts.sdk + "-" + cmp.Or(ts.protocol, "default")
			run := runBearerClient(t, ctx, ts.sdk, ts.protocol, s.MCPURL(), token, []map[string]any{
				{"name": "orders_get_order", "arguments": map[string]any{"order_id": id, "expand": "lines", "trace": id}},
				{"name": "orders_get_order", "arguments": map[string]any{"order_id": "missing"}},
			})
			if !bytes.Contains(run.tools, []byte(`"orders_get_order"`)) || !bytes.Contains(run.tools, []byte(`"orders_create_order"`)) {
				t.Errorf("%s lists %s", run.sdk, run.tools)
			}
			if r := run.results[id]; r.Event != "result" || r.IsError || !strings.Contains(r.Text, `"status":"shipped"`) {
				t.Errorf("%s: the call: %+v", run.sdk, r)
			}
			if r := run.results["missing"]; r.Event != "result" || !r.IsError || !strings.Contains(r.Text, "404 Not Found") {
				t.Errorf("%s: the call answered 404: %+v, want a tool error", run.sdk, r)
			}
			want := restCall{Method: "GET", Path: "/api/orders/" + id, Query: "expand=lines", APIKey: "orders-api-key", Trace: id}
			if !slices.Contains(all(), want) {
				t.Errorf("%s: the API got no %+v: %+v", run.sdk, want, all())
			}
		})
	}
}

// TestConformanceWithHTTPTools runs the conformance requirements of both
// revisions on a server that serves HTTP tools next to the conformance
// toolset: the HTTP tools change nothing of what the suite checks.
func TestConformanceWithHTTPTools(t *testing.T) {
	apiURL, _ := startOrdersAPI(t)
	srv := startServer(t, nil, "--config", ordersConfig(t, apiURL, "tools:\n  toolsets: [conformance]\n"))
	conformanceRequirements(t, srv.MCPURL(), func(format string, args ...any) {
		t.Helper()
		t.Logf(format, args...)
	})
}
