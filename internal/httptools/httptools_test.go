package httptools

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// seen is a request as the test API received it.
type seen struct {
	method, rawPath, rawQuery, body string
	header                          http.Header
}

// fakeCatalog keeps the sets given to it.
type fakeCatalog struct{ sets map[string]catalog.Set }

func (c *fakeCatalog) SetSource(name string, set catalog.Set) ([]string, error) {
	if c.sets == nil {
		c.sets = map[string]catalog.Set{}
	}
	c.sets[name] = set
	return nil, nil
}

// testAPI serves h and records each request; register serves o's tools
// against it.
type testAPI struct {
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newTestAPI(t testing.TB, h http.HandlerFunc) *testAPI {
	t.Helper()
	a := &testAPI{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, seen{method: r.Method, rawPath: r.URL.EscapedPath(), rawQuery: r.URL.RawQuery, body: string(b), header: r.Header.Clone()})
		a.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAPI) last(t *testing.T) seen {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.reqs) == 0 {
		t.Fatal("the API got no request")
	}
	return a.reqs[len(a.reqs)-1]
}

func (a *testAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.reqs)
}

// register validates o and serves its tools; it returns the handler of
// each tool by its name in the API.
func register(t *testing.T, o Options) map[string]func(args string) *sdk.CallToolResult {
	t.Helper()
	list := []Options{o}
	list[0].Defaults()
	if err := Validate(list, nil, nil); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	cat := &fakeCatalog{}
	if err := Register(context.Background(), list, cat, Deps{}); err != nil {
		t.Fatalf("Register: %v", err)
	}
	out := map[string]func(string) *sdk.CallToolResult{}
	for _, st := range cat.sets["http_api "+o.Name].Tools {
		h := st.Handler
		name := strings.TrimPrefix(st.Tool.Name, list[0].namespace()+"_")
		out[name] = func(args string) *sdk.CallToolResult {
			res, err := h(context.Background(), &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: st.Tool.Name, Arguments: json.RawMessage(args)}})
			if err != nil {
				t.Fatalf("handler error: %v", err)
			}
			return res
		}
	}
	return out
}

func text(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func petsAPI(base string) Options {
	return Options{
		Name: "pets", BaseURL: base + "/v1", AllowPrivateAddresses: true,
		Headers: []upstream.NamedValue{{Name: "X-Api-Key", Value: "s3cret-key"}},
		Tools: []spec.Tool{
			{Name: "get_pet", Method: "GET", Path: "/pets/{petId}", Params: []spec.Param{{Name: "petId", In: spec.InPath}, {Name: "verbose", In: spec.InQuery}, {Name: "tags", In: spec.InQuery, As: "tag"}, {Name: "trace", In: spec.InHeader, As: "X-Trace"}}},
			{Name: "add_pet", Method: "POST", Path: "/pets", Params: []spec.Param{{Name: "store", In: spec.InQuery}, {Name: "petName", In: spec.InBody, As: "name"}},
				OutputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "form_pet", Method: "POST", Path: "/pets", Body: spec.BodyForm},
			{Name: "list", Method: "GET", Path: "/pets", Result: spec.ResultJSON, InputSchema: json.RawMessage(`{"type":"object","properties":{"limit":{"type":"integer","maximum":100}},"additionalProperties":false}`),
				Params: []spec.Param{{Name: "limit", In: spec.InQuery}}},
		},
	}
}

func TestCallMapping(t *testing.T) {
	tests := []struct {
		name, tool, args string
		method, path     string
		query, body      string
		header           map[string]string
	}{
		{name: "path and query", tool: "get_pet", args: `{"petId":"42","verbose":true}`, method: "GET", path: "/v1/pets/42", query: "verbose=true"},
		{name: "number in path", tool: "get_pet", args: `{"petId":7}`, method: "GET", path: "/v1/pets/7"},
		{name: "array in query repeats the key", tool: "get_pet", args: `{"petId":"1","tags":["a b","c&d"]}`, method: "GET", path: "/v1/pets/1", query: "tag=a+b&tag=c%26d"},
		{name: "header param", tool: "get_pet", args: `{"petId":"1","trace":"abc"}`, method: "GET", path: "/v1/pets/1", header: map[string]string{"X-Trace": "abc"}},
		{name: "JSON body with the rest", tool: "add_pet", args: `{"petName":"Rex","age":3,"store":"s1"}`, method: "POST", path: "/v1/pets", query: "store=s1", body: `{"age":3,"name":"Rex"}`, header: map[string]string{"Content-Type": "application/json"}},
		{name: "form body", tool: "form_pet", args: `{"name":"Rex","age":3}`, method: "POST", path: "/v1/pets", body: "age=3&name=Rex", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
		{name: "configured credential", tool: "get_pet", args: `{"petId":"1"}`, method: "GET", path: "/v1/pets/1", header: map[string]string{"X-Api-Key": "s3cret-key", "Authorization": ""}},
	}
	api := newTestAPI(t, nil)
	tools := register(t, petsAPI(api.srv.URL))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tools[tt.tool](tt.args)
			if res.IsError {
				t.Fatalf("tool error: %s", text(res))
			}
			got := api.last(t)
			if got.method != tt.method || got.rawPath != tt.path || got.rawQuery != tt.query || got.body != tt.body {
				t.Errorf("request = %s %s ?%s body %q; want %s %s ?%s body %q", got.method, got.rawPath, got.rawQuery, got.body, tt.method, tt.path, tt.query, tt.body)
			}
			for k, v := range tt.header {
				if g := got.header.Get(k); g != v {
					t.Errorf("header %s = %q, want %q", k, g, v)
				}
			}
		})
	}
}

func TestResults(t *testing.T) {
	tests := []struct {
		name, tool, args string
		status           int
		ctype, body      string
		wantErr          bool
		wantText         []string
		wantStructured   bool
	}{
		{name: "2xx JSON with output schema is structured", tool: "add_pet", args: `{"petName":"x"}`, status: 201, ctype: "application/json", body: `{"id":1}`, wantText: []string{`{"id":1}`}, wantStructured: true},
		{name: "2xx JSON that is no object, with an output schema, is a tool error", tool: "add_pet", args: `{"petName":"x"}`, status: 201, ctype: "application/json", body: `[{"id":1}]`, wantErr: true, wantText: []string{"not a JSON object", "output schema", `[{"id":1}]`}},
		{name: "2xx without a body, with an output schema, is a tool error", tool: "add_pet", args: `{"petName":"x"}`, status: 204, wantErr: true, wantText: []string{"204 No Content", "output schema"}},
		{name: "2xx JSON without output schema is text", tool: "get_pet", args: `{"petId":"1"}`, status: 200, ctype: "application/json", body: `{"id":1}`, wantText: []string{`{"id":1}`}},
		{name: "result json", tool: "list", args: `{}`, status: 200, ctype: "text/plain", body: `{"items":[]}`, wantStructured: true},
		{name: "result json refuses what is not JSON", tool: "list", args: `{}`, status: 200, ctype: "text/plain", body: `nope`, wantErr: true, wantText: []string{"not JSON"}},
		{name: "404 is a tool error with the status and an excerpt", tool: "get_pet", args: `{"petId":"9"}`, status: 404, body: `no pet 9`, wantErr: true, wantText: []string{"404 Not Found", "no pet 9"}},
		{name: "500 is a tool error", tool: "get_pet", args: `{"petId":"9"}`, status: 500, body: `boom`, wantErr: true, wantText: []string{"500 Internal Server Error", "boom"}},
		{name: "an error body's excerpt is bounded", tool: "get_pet", args: `{"petId":"9"}`, status: 400, body: strings.Repeat("x", 5000), wantErr: true, wantText: []string{"400 Bad Request", strings.Repeat("x", excerptBytes) + "…"}},
		{name: "input schema refuses before any request", tool: "list", args: `{"limit":1000}`, wantErr: true, wantText: []string{"input schema"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newTestAPI(t, func(w http.ResponseWriter, r *http.Request) {
				if tt.ctype != "" {
					w.Header().Set("Content-Type", tt.ctype)
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			res := register(t, petsAPI(api.srv.URL))[tt.tool](tt.args)
			if res.IsError != tt.wantErr {
				t.Fatalf("IsError = %v, want %v: %s", res.IsError, tt.wantErr, text(res))
			}
			for _, w := range tt.wantText {
				if !strings.Contains(text(res), w) {
					t.Errorf("text %q lacks %q", text(res), w)
				}
			}
			if got := res.StructuredContent != nil; got != tt.wantStructured {
				t.Errorf("structured = %v, want %v", got, tt.wantStructured)
			}
			if tt.status == 0 && api.count() != 0 {
				t.Errorf("the API got %d requests, want none", api.count())
			}
		})
	}
}
