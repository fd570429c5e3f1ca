package auth

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestMetadataPath(t *testing.T) {
	tests := []struct {
		name, resource, wantPath, wantURL string
	}{
		{name: "path", resource: "https://mcp.example.com/mcp", wantPath: "/.well-known/oauth-protected-resource/mcp", wantURL: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"},
		{name: "trailing slash", resource: "https://mcp.example.com/mcp/", wantPath: "/.well-known/oauth-protected-resource/mcp", wantURL: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"},
		{name: "root", resource: "https://mcp.example.com", wantPath: "/.well-known/oauth-protected-resource", wantURL: "https://mcp.example.com/.well-known/oauth-protected-resource"},
		{name: "port and deep path", resource: "http://127.0.0.1:8080/a/mcp", wantPath: "/.well-known/oauth-protected-resource/a/mcp", wantURL: "http://127.0.0.1:8080/.well-known/oauth-protected-resource/a/mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MetadataPath(tt.resource); got != tt.wantPath {
				t.Errorf("MetadataPath = %q, want %q", got, tt.wantPath)
			}
			if got := MetadataURL(tt.resource); got != tt.wantURL {
				t.Errorf("MetadataURL = %q, want %q", got, tt.wantURL)
			}
		})
	}
}

func TestMetadataHandler(t *testing.T) {
	o := Options{
		Resource:        testResource,
		Issuers:         []IssuerOptions{{Issuer: "https://idp.example.com"}, {Issuer: "https://login.microsoftonline.com/t/v2.0"}},
		ScopesSupported: []string{"mcp:tools", "mcp:admin"},
	}
	o.Defaults()
	mux := http.NewServeMux()
	mux.Handle(MetadataWellKnown, MetadataHandler(o))
	mux.Handle(MetadataPath(o.Resource), MetadataHandler(o))
	want := map[string]any{
		"resource":                 testResource,
		"authorization_servers":    []any{"https://idp.example.com", "https://login.microsoftonline.com/t/v2.0"},
		"scopes_supported":         []any{"mcp:tools", "mcp:admin"},
		"bearer_methods_supported": []any{"header"},
		"resource_name":            "Portcullis",
	}
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		t.Run(path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			if rec.Code != 200 {
				t.Fatalf("status %d", rec.Code)
			}
			if cc := rec.Header().Get("Cache-Control"); cc != "public, max-age=300" {
				t.Errorf("Cache-Control = %q", cc)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("metadata = %v, want %v", got, want)
			}
		})
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("POST", MetadataWellKnown, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST status = %d, want 405", rec.Code)
	}
}

// TestMetadataCORS: the metadata is public, so a browser on any origin may
// read it and its preflight is answered, with the headers MCP clients send.
func TestMetadataCORS(t *testing.T) {
	h := MetadataHandler(Options{Resource: "https://mcp.example.com/mcp"})
	tests := []struct {
		name       string
		method     string
		origin     string
		wantStatus int
		want       map[string]string // header -> a value it must contain
	}{
		{name: "preflight", method: http.MethodOptions, origin: "https://any.example", wantStatus: http.StatusNoContent, want: map[string]string{
			"Access-Control-Allow-Origin":  "*",
			"Access-Control-Allow-Methods": "GET, OPTIONS",
			"Access-Control-Allow-Headers": "Mcp-Protocol-Version",
			"Access-Control-Max-Age":       "7200",
		}},
		{name: "GET from a browser", method: http.MethodGet, origin: "https://any.example", wantStatus: http.StatusOK, want: map[string]string{
			"Access-Control-Allow-Origin": "*",
			"Cache-Control":               "public",
		}},
		{name: "GET without Origin", method: http.MethodGet, wantStatus: http.StatusOK, want: map[string]string{"Content-Type": "application/json"}},
		{name: "POST", method: http.MethodPost, wantStatus: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, MetadataWellKnown+"/mcp", nil)
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
				if tt.method == http.MethodOptions {
					r.Header.Set("Access-Control-Request-Method", "GET")
					r.Header.Set("Access-Control-Request-Headers", "mcp-protocol-version")
				}
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.wantStatus {
				t.Fatalf("status %d, want %d", w.Code, tt.wantStatus)
			}
			for k, v := range tt.want {
				if got := w.Header().Get(k); !strings.Contains(got, v) {
					t.Errorf("%s = %q, want it to contain %q", k, got, v)
				}
			}
		})
	}
}
