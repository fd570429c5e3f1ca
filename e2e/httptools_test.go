//go:build e2e

package e2e

// Declared HTTP tools (config http_apis:) served by the real binary in
// front of a small REST API in the test: a go-sdk client of each
// protocol era lists and calls them with path, query, header and JSON
// body arguments; the API sees the configured key, never the caller's
// token; a 4xx and a 5xx become tool errors.

import (
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

// startOrdersAPI starts the test's REST API: GET /api/orders/{id}
// (missing answers 404, crash 500) and POST /api/orders. last returns its
// last request and how many it got.
func startOrdersAPI(t *testing.T) (url string, last func() (restCall, int)) {
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
	last = func() (restCall, int) {
		mu.Lock()
		defer mu.Unlock()
		if len(calls) == 0 {
			return restCall{}, 0
		}
		return calls[len(calls)-1], len(calls)
	}
	return api.URL, last
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
        path: /orders/{id}
        params:
          - {name: id, in: path}
          - {name: expand, in: query}
          - {name: trace, in: header, as: X-Trace}
        input_schema:
          type: object
          properties:
            id: {type: string}
            expand: {type: string}
            trace: {type: string}
          required: [id]
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
	apiURL, last := startOrdersAPI(t)
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
				{name: "path, query and header", tool: "orders_get_order", args: map[string]any{"id": "o-1", "expand": "lines", "trace": "tr-9"},
					want: restCall{Method: "GET", Path: "/api/orders/o-1", Query: "expand=lines", Trace: "tr-9"}},
				{name: "a path argument stays one segment", tool: "orders_get_order", args: map[string]any{"id": "../admin"},
					want: restCall{Method: "GET", Path: "/api/orders/..%2Fadmin"}},
				{name: "JSON body", tool: "orders_create_order", args: map[string]any{"item": "book", "quantity": 2},
					want: restCall{Method: "POST", Path: "/api/orders", Body: `{"item":"book","quantity":2}`}},
				{name: "a 4xx is a tool error", tool: "orders_get_order", args: map[string]any{"id": "missing"}, wantErr: "404 Not Found",
					want: restCall{Method: "GET", Path: "/api/orders/missing"}},
				{name: "a 5xx is a tool error", tool: "orders_get_order", args: map[string]any{"id": "crash"}, wantErr: "500 Internal Server Error",
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
