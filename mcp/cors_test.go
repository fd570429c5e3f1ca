package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCORS sends preflights and actual requests to /mcp as the server
// chains it (the origin guard, then a stand-in for the auth middleware that
// wants a token, then the handler) from an allowed origin, another origin
// and no origin.
func TestCORS(t *testing.T) {
	const allowed, other = "https://app.example.com", "https://evil.example.com"
	_, h := newTestEndpoint(t, func(o *Options) { o.AllowedOrigins = []string{allowed} })
	needToken := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="x"`)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	ts := httptest.NewServer(h.OriginGuard(needToken(h)))
	t.Cleanup(ts.Close)

	preflight := func(origin string) *http.Request {
		r, _ := http.NewRequest(http.MethodOptions, ts.URL, nil)
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		r.Header.Set("Access-Control-Request-Method", "POST")
		r.Header.Set("Access-Control-Request-Headers", "authorization, content-type, mcp-protocol-version, mcp-method, mcp-name, mcp-param-region")
		return r
	}
	actual := func(origin, token string) *http.Request {
		r, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(legacyInit))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return r
	}
	wantHeaders := map[string][]string{
		"Access-Control-Allow-Methods":  {"GET", "POST", "DELETE", "OPTIONS"},
		"Access-Control-Allow-Headers":  {"Authorization", "Content-Type", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-ID", "Mcp-Method", "Mcp-Name", "mcp-param-region"},
		"Access-Control-Expose-Headers": {"Mcp-Session-Id", "WWW-Authenticate", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"},
	}
	tests := []struct {
		name       string
		req        *http.Request
		wantStatus int
		wantCORS   bool     // Access-Control-Allow-Origin names the origin, Vary: Origin
		want       []string // headers of wantHeaders that must list their values
	}{
		{name: "preflight, allowed origin", req: preflight(allowed), wantStatus: http.StatusNoContent, wantCORS: true, want: []string{"Access-Control-Allow-Methods", "Access-Control-Allow-Headers"}},
		{name: "preflight, other origin", req: preflight(other), wantStatus: http.StatusForbidden},
		// Not a preflight: auth answers, as for any request without a token.
		{name: "preflight, no origin", req: preflight(""), wantStatus: http.StatusUnauthorized},
		{name: "actual, allowed origin, no token", req: actual(allowed, ""), wantStatus: http.StatusUnauthorized, wantCORS: true, want: []string{"Access-Control-Expose-Headers"}},
		{name: "actual, allowed origin", req: actual(allowed, "t"), wantStatus: http.StatusOK, wantCORS: true, want: []string{"Access-Control-Expose-Headers"}},
		{name: "actual, other origin", req: actual(other, "t"), wantStatus: http.StatusForbidden},
		{name: "actual, no origin", req: actual("", "t"), wantStatus: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			acao := resp.Header.Get("Access-Control-Allow-Origin")
			if tt.wantCORS {
				if acao != allowed || !strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin") {
					t.Errorf("Access-Control-Allow-Origin %q, Vary %q; want %s and Origin", acao, resp.Header.Values("Vary"), allowed)
				}
			} else {
				for k := range resp.Header {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Errorf("%s: %q, want no CORS headers", k, resp.Header.Get(k))
					}
				}
			}
			for _, k := range tt.want {
				got := strings.ToLower(resp.Header.Get(k))
				for _, v := range wantHeaders[k] {
					if !strings.Contains(", "+got+",", ", "+strings.ToLower(v)+",") {
						t.Errorf("%s = %q, want it to list %s", k, resp.Header.Get(k), v)
					}
				}
			}
			if tt.wantStatus == http.StatusNoContent && resp.Header.Get("Access-Control-Max-Age") == "" {
				t.Error("no Access-Control-Max-Age")
			}
		})
	}
}

func TestAllowHeaders(t *testing.T) {
	got := allowHeaders("Mcp-Param-Region, x-other, mcp-param-, Mcp-Param-Bad Name, MCP-PARAM-Id")
	if !strings.HasSuffix(got, ", Mcp-Param-Region, MCP-PARAM-Id") {
		t.Errorf("allowHeaders = %q, want the transport's list plus Mcp-Param-Region and MCP-PARAM-Id only", got)
	}
}
