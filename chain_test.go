package portcullis

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/syncbuf"
	"github.com/portcullis-mcp/portcullis/mcp"
	"github.com/portcullis-mcp/portcullis/observability"
)

// TestBuildHandlerOrder checks the request path's order through what each
// step can observe: the origin check refuses before auth runs, the limits
// run after auth and see its principal, the access log records auth's
// refusals, refusals are seen between auth and the limits, the body
// deadline wraps every route, and probes skip auth and
// the access log.
func TestBuildHandlerOrder(t *testing.T) {
	cfg := &configFile{}
	cfg.defaults()
	var logs syncbuf.Buffer
	a, err := newApp(t.Context(), cfg, mcp.HTTP, extensions{}, process{stderr: &logs})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		seen []string
	)
	step := func(name string) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, name)
	}
	parts := chainParts{
		bodyDeadline: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { step("deadline"); next.ServeHTTP(w, r) })
		},
		mcp: a.server.Handler(),
		auth: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				step("auth")
				if r.Header.Get("Authorization") == "" {
					http.Error(w, "no token", http.StatusUnauthorized)
					return
				}
				next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), &auth.Principal{Subject: "alice"})))
			})
		},
		refusals: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { step("refusals"); next.ServeHTTP(w, r) })
		},
		limits: func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if p, ok := auth.PrincipalFrom(r.Context()); ok {
					step("limits:" + p.Subject)
				} else {
					step("limits:anonymous")
				}
				next.ServeHTTP(w, r)
			})
		},
		health: &observability.Health{},
	}
	// served receives once the handler has returned, so that the access
	// log line, written after the response, is there to count.
	served := make(chan struct{}, 1)
	h := a.buildHandler(parts)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		served <- struct{}{}
	}))
	t.Cleanup(ts.Close)

	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	tests := []struct {
		name       string
		method     string
		path       string
		header     map[string]string
		wantStatus int
		wantSteps  []string
		wantLogged bool
	}{
		{name: "foreign origin refused before auth", method: http.MethodPost, path: "/mcp",
			header: map[string]string{"Origin": "https://evil.example"}, wantStatus: http.StatusForbidden,
			wantSteps: []string{"deadline"}, wantLogged: true},
		{name: "no token refused by auth, logged", method: http.MethodPost, path: "/mcp",
			wantStatus: http.StatusUnauthorized, wantSteps: []string{"deadline", "auth"}, wantLogged: true},
		{name: "limits see the principal", method: http.MethodPost, path: "/mcp",
			header: map[string]string{"Authorization": "Bearer t"}, wantStatus: http.StatusOK,
			wantSteps: []string{"deadline", "auth", "refusals", "limits:alice"}, wantLogged: true},
		{name: "probe skips auth and the log", method: http.MethodGet, path: "/healthz",
			wantStatus: http.StatusOK, wantSteps: []string{"deadline"}},
		{name: "unknown path", method: http.MethodGet, path: "/nope",
			wantStatus: http.StatusNotFound, wantSteps: []string{"deadline"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			before := strings.Count(logs.String(), `"msg":"http request"`)
			var body *strings.Reader
			if tt.method == http.MethodPost {
				body = strings.NewReader(initialize)
			} else {
				body = strings.NewReader("")
			}
			req, _ := http.NewRequest(tt.method, ts.URL+tt.path, body)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			<-served
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			mu.Lock()
			got := slices.Clone(seen)
			mu.Unlock()
			if !slices.Equal(got, tt.wantSteps) {
				t.Errorf("steps %v, want %v", got, tt.wantSteps)
			}
			logged := strings.Count(logs.String(), `"msg":"http request"`) > before
			if logged != tt.wantLogged {
				t.Errorf("access-logged %v, want %v", logged, tt.wantLogged)
			}
		})
	}
}
