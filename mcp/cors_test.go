package mcp

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
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

// TestOriginRule checks which browser origins may call /mcp: a loopback
// page on a loopback listener only while mcp.allowed_origins is empty,
// and once the list names origins, those alone, loopback pages included.
// A listener that is not loopback allows the listed origins only, empty
// list or not.
func TestOriginRule(t *testing.T) {
	var (
		loopbackLn = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
		publicLn   = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 8080}
	)
	const (
		app         = "https://app.example.com"
		inspector   = "http://localhost:6274"
		otherPort   = "http://127.0.0.1:5173"
		ipv6        = "http://[::1]:3000"
		rebinding   = "http://evil.example.com"
		nullOrigin  = "null"
		fileOrigin  = "file://localhost"
		wantAllowed = http.StatusOK
		wantRefused = http.StatusForbidden
	)
	tests := []struct {
		name     string
		listener net.Addr
		list     []string
		origin   string
		want     int
	}{
		{name: "empty list, loopback listener, loopback origin", listener: loopbackLn, origin: inspector, want: wantAllowed},
		{name: "empty list, loopback listener, loopback IP origin", listener: loopbackLn, origin: otherPort, want: wantAllowed},
		{name: "empty list, loopback listener, IPv6 loopback origin", listener: loopbackLn, origin: ipv6, want: wantAllowed},
		{name: "empty list, loopback listener, other origin", listener: loopbackLn, origin: rebinding, want: wantRefused},
		{name: "empty list, loopback listener, null origin", listener: loopbackLn, origin: nullOrigin, want: wantRefused},
		{name: "empty list, loopback listener, file origin", listener: loopbackLn, origin: fileOrigin, want: wantRefused},
		{name: "list, loopback listener, unlisted loopback origin", listener: loopbackLn, list: []string{app}, origin: otherPort, want: wantRefused},
		{name: "list, loopback listener, unlisted localhost origin", listener: loopbackLn, list: []string{app}, origin: inspector, want: wantRefused},
		{name: "list, loopback listener, listed loopback origin", listener: loopbackLn, list: []string{app, inspector}, origin: inspector, want: wantAllowed},
		{name: "list, loopback listener, other port of a listed loopback origin", listener: loopbackLn, list: []string{inspector}, origin: "http://localhost:6275", want: wantRefused},
		{name: "list, loopback listener, listed origin", listener: loopbackLn, list: []string{app}, origin: app, want: wantAllowed},
		{name: "list, loopback listener, other origin", listener: loopbackLn, list: []string{app}, origin: rebinding, want: wantRefused},
		{name: "list, loopback listener, no origin", listener: loopbackLn, list: []string{app}, want: wantAllowed},
		{name: "empty list, public listener, loopback origin", listener: publicLn, origin: inspector, want: wantRefused},
		{name: "empty list, public listener, no origin", listener: publicLn, want: wantAllowed},
		{name: "list, public listener, listed origin", listener: publicLn, list: []string{app}, origin: app, want: wantAllowed},
		{name: "list, public listener, unlisted loopback origin", listener: publicLn, list: []string{app}, origin: otherPort, want: wantRefused},
		{name: "list, public listener, listed loopback origin", listener: publicLn, list: []string{inspector}, origin: inspector, want: wantAllowed},
		{name: "list, public listener, other origin", listener: publicLn, list: []string{app}, origin: rebinding, want: wantRefused},
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := handlerFor(server, Options{AllowedOrigins: tt.list})
			ok := h.OriginGuard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			ctx := context.WithValue(t.Context(), http.LocalAddrContextKey, tt.listener)
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader("{}"))
			if tt.origin != "" {
				r.Header.Set("Origin", tt.origin)
			}
			w := httptest.NewRecorder()
			ok.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("Origin %q, allowed_origins %q: status %d, want %d", tt.origin, tt.list, w.Code, tt.want)
			}
			acao := w.Header().Get("Access-Control-Allow-Origin")
			if tt.want == wantAllowed && tt.origin != "" && acao != tt.origin {
				t.Errorf("Access-Control-Allow-Origin %q, want %q", acao, tt.origin)
			}
			if tt.want == wantRefused && acao != "" {
				t.Errorf("refused, yet Access-Control-Allow-Origin %q", acao)
			}
			// A refusal does not wait for the body it never reads (as
			// auth's refusals do not).
			if got, want := w.Header().Get("Connection"), map[bool]string{true: "close"}[tt.want == wantRefused]; got != want {
				t.Errorf("Connection %q, want %q", got, want)
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
