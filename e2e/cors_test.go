//go:build e2e

package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestCORSPreflight sends browser preflights and actual requests to the
// binary (dev mode: auth on, metadata served) with one allowed origin:
// /mcp answers an allowed origin's preflight before auth and refuses
// another origin's, a loopback one included, with 403; the metadata URLs answer every origin's
// preflight, never with 404.
func TestCORSPreflight(t *testing.T) {
	const allowed, other = "https://app.example.com", "https://evil.example.com"
	srv := startDevServer(t, "PORTCULLIS_MCP_ALLOWED_ORIGINS="+allowed)
	send := func(method, path, origin string, preflight bool) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.BaseURL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if preflight {
			req.Header.Set("Access-Control-Request-Method", "POST")
			req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	tests := []struct {
		name       string
		method     string
		path       string
		origin     string
		preflight  bool
		wantStatus int
		wantACAO   string
	}{
		{name: "/mcp preflight, allowed origin", method: http.MethodOptions, path: "/mcp", origin: allowed, preflight: true, wantStatus: http.StatusNoContent, wantACAO: allowed},
		{name: "/mcp preflight, other origin", method: http.MethodOptions, path: "/mcp", origin: other, preflight: true, wantStatus: http.StatusForbidden},
		// A listed origin makes the list the rule: a page on another
		// loopback port is refused like any other.
		{name: "/mcp preflight, unlisted loopback origin", method: http.MethodOptions, path: "/mcp", origin: "http://127.0.0.1:5173", preflight: true, wantStatus: http.StatusForbidden},
		{name: "/mcp without a token, unlisted loopback origin", method: http.MethodPost, path: "/mcp", origin: "http://localhost:6274", wantStatus: http.StatusForbidden},
		{name: "/mcp without a token, allowed origin", method: http.MethodPost, path: "/mcp", origin: allowed, wantStatus: http.StatusUnauthorized, wantACAO: allowed},
		{name: "/mcp without a token, no origin", method: http.MethodPost, path: "/mcp", wantStatus: http.StatusUnauthorized},
		{name: "metadata preflight, allowed origin", method: http.MethodOptions, path: "/.well-known/oauth-protected-resource", origin: allowed, preflight: true, wantStatus: http.StatusNoContent, wantACAO: "*"},
		{name: "metadata /mcp preflight, other origin", method: http.MethodOptions, path: "/.well-known/oauth-protected-resource/mcp", origin: other, preflight: true, wantStatus: http.StatusNoContent, wantACAO: "*"},
		{name: "metadata OPTIONS without Origin", method: http.MethodOptions, path: "/.well-known/oauth-protected-resource/mcp", wantStatus: http.StatusNoContent, wantACAO: "*"},
		{name: "metadata GET, other origin", method: http.MethodGet, path: "/.well-known/oauth-protected-resource/mcp", origin: other, wantStatus: http.StatusOK, wantACAO: "*"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := send(tt.method, tt.path, tt.origin, tt.preflight)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if got := resp.Header.Get("Access-Control-Allow-Origin"); got != tt.wantACAO {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", got, tt.wantACAO)
			}
			if tt.wantACAO == allowed && tt.preflight && !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
				t.Errorf("Access-Control-Allow-Headers %q, want Authorization among them", resp.Header.Get("Access-Control-Allow-Headers"))
			}
			if tt.wantACAO == allowed && !tt.preflight && !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
				t.Errorf("Access-Control-Expose-Headers %q, want WWW-Authenticate among them", resp.Header.Get("Access-Control-Expose-Headers"))
			}
		})
	}
}
