package doctor_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/doctor"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
	"github.com/portcullis-mcp/portcullis/mcp"
)

// deployment describes a Portcullis endpoint built from the real handler
// chain (auth middleware, metadata handler, MCP handler, core toolset), with
// knobs to misconfigure it.
type deployment struct {
	authOff         bool
	resource        string // auth.resource; empty means the endpoint's own URL
	scopesSupported []string
	requiredScopes  []string
	allowedOrigins  []string
	// wrap, when set, wraps /mcp outside the auth middleware (a proxy).
	wrap func(http.Handler) http.Handler
	// asMeta overrides members of the authorization server's RFC 8414
	// document (a nil value deletes one); the default is a good one (PKCE
	// S256).
	asMeta map[string]any
	// noASMeta serves no authorization server metadata.
	noASMeta bool
}

// start serves d and returns the MCP URL and a token its issuer minted.
func (d deployment) start(t *testing.T) (mcpURL, token string) {
	t.Helper()
	discovery := oidctest.RFC8414
	if d.noASMeta {
		discovery = oidctest.NoDiscovery
	}
	key := oidctest.NewECKey("doctor")
	as := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{key}, Discovery: discovery, Metadata: d.asMeta})

	srv := httptest.NewUnstartedServer(nil)
	mcpURL = "http://" + srv.Listener.Addr().String() + "/mcp"
	o := auth.Options{Resource: d.resource, ScopesSupported: d.scopesSupported, RequiredScopes: d.requiredScopes}
	if o.Resource == "" {
		o.Resource = mcpURL
	}
	if !d.authOff {
		o.Issuers = []auth.IssuerOptions{{Issuer: as.URL(), JWKSURL: as.JWKSURL()}}
	}
	o.Defaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := map[string]any{"sub": "doctor-test", "client_id": "doctor-test", "aud": o.Resource,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	if scopes := append(d.scopesSupported, d.requiredScopes...); len(scopes) > 0 {
		claims["scope"] = strings.Join(scopes, " ")
	}
	token = key.Sign(as.Claims(claims))

	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := mcp.NewSealer([][]byte{mcp.NewRandomKey()}, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = mcp.New(cat, mcp.Options{AllowedOrigins: d.allowedOrigins}, mcp.Deps{Version: "test", Sealer: sealer}).Handler()
	mux := http.NewServeMux()
	if !d.authOff {
		v, err := auth.NewVerifier(t.Context(), o, auth.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		h = auth.Middleware(v, o, auth.MetadataURL(o.Resource), auth.Deps{})(h)
		meta := auth.MetadataHandler(o)
		mux.Handle("GET "+auth.MetadataWellKnown, meta)
		mux.Handle("GET "+auth.MetadataPath(o.Resource), meta)
	}
	if d.wrap != nil {
		h = d.wrap(h)
	}
	mux.Handle("/mcp", h)
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return mcpURL, token
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		deploy     deployment
		url        func(mcpURL string) string // default: the MCP URL
		noToken    bool
		token      string // overrides the minted token
		allowOpen  bool
		wantFailed bool
		want       map[string]doctor.Status
		wantDetail map[string]string // substring of a check's detail
	}{
		{
			name: "healthy, with a token",
			deploy: deployment{
				scopesSupported: []string{"mcp:tools", "mcp:admin"},
				requiredScopes:  []string{"mcp:tools"},
			},
			want: map[string]doctor.Status{
				doctor.CheckReachable: doctor.Pass, doctor.CheckMetadata: doctor.Pass, doctor.CheckMetadataPath: doctor.Pass,
				doctor.CheckChallenge: doctor.Pass, doctor.CheckAuthServer: doctor.Pass, doctor.CheckToken: doctor.Pass,
				doctor.CheckOrigin: doctor.Pass, doctor.CheckMcpMethod: doctor.Pass,
				doctor.CheckInitialize: doctor.Pass, doctor.CheckToolsList: doctor.Pass,
			},
			wantDetail: map[string]string{
				doctor.CheckChallenge:  `scope="mcp:tools"`,
				doctor.CheckMcpMethod:  "-32020",
				doctor.CheckInitialize: "protocol 2025-11-25, a session",
				doctor.CheckToolsList:  "5 tools",
			},
		},
		{
			name:    "healthy, without a token",
			deploy:  deployment{},
			noToken: true,
			want: map[string]doctor.Status{
				doctor.CheckChallenge: doctor.Pass, doctor.CheckToken: doctor.Skip, doctor.CheckOrigin: doctor.Skip,
				doctor.CheckMcpMethod: doctor.Skip, doctor.CheckInitialize: doctor.Skip, doctor.CheckToolsList: doctor.Skip,
			},
			wantDetail: map[string]string{doctor.CheckOrigin: "needs --token", doctor.CheckToolsList: "needs --token"},
		},
		{
			name: "server down",
			url: func(string) string {
				s := httptest.NewServer(http.NotFoundHandler())
				s.Close()
				return s.URL + "/mcp"
			},
			wantFailed: true,
			want: map[string]doctor.Status{
				doctor.CheckReachable: doctor.Fail, doctor.CheckMetadata: doctor.Skip, doctor.CheckChallenge: doctor.Skip,
				doctor.CheckAuthServer: doctor.Skip, doctor.CheckInitialize: doctor.Skip, doctor.CheckToolsList: doctor.Skip,
			},
			wantDetail: map[string]string{doctor.CheckReachable: "connection refused", doctor.CheckToolsList: "server unreachable"},
		},
		{
			name: "a plain web server",
			url: func(string) string {
				s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Type", "text/html")
					w.Write([]byte("<html><body>Welcome</body></html>"))
				}))
				t.Cleanup(s.Close)
				return s.URL + "/mcp"
			},
			wantFailed: true,
			want: map[string]doctor.Status{
				doctor.CheckReachable: doctor.Fail, doctor.CheckMetadata: doctor.Fail, doctor.CheckChallenge: doctor.Skip,
				doctor.CheckOrigin: doctor.Skip, doctor.CheckInitialize: doctor.Skip,
			},
			wantDetail: map[string]string{doctor.CheckReachable: "not an MCP endpoint", doctor.CheckMetadata: "text/html", doctor.CheckOrigin: "not an MCP endpoint"},
		},
		{
			name:       "wrong path",
			url:        func(u string) string { return strings.TrimSuffix(u, "/mcp") + "/api" },
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckReachable: doctor.Fail, doctor.CheckMetadataPath: doctor.Fail},
			wantDetail: map[string]string{doctor.CheckReachable: "404 Not Found"},
		},
		{
			name:       "resource is not the URL",
			deploy:     deployment{resource: "https://mcp.example.com/mcp"},
			wantFailed: true,
			want: map[string]doctor.Status{
				doctor.CheckMetadata: doctor.Fail, doctor.CheckMetadataPath: doctor.Fail, doctor.CheckChallenge: doctor.Fail,
				doctor.CheckAuthServer: doctor.Skip,
			},
			wantDetail: map[string]string{
				doctor.CheckMetadata:  `resource is "https://mcp.example.com/mcp"`,
				doctor.CheckChallenge: "resource_metadata is",
			},
		},
		{
			name: "challenge without resource_metadata",
			deploy: deployment{wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if r.Header.Get("Authorization") == "" {
						w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
						http.Error(w, "Unauthorized", http.StatusUnauthorized)
						return
					}
					h.ServeHTTP(w, r)
				})
			}},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckChallenge: doctor.Fail, doctor.CheckInitialize: doctor.Pass},
			wantDetail: map[string]string{doctor.CheckChallenge: "no resource_metadata"},
		},
		{
			name:       "challenge without scope while the metadata lists scopes",
			deploy:     deployment{scopesSupported: []string{"mcp:tools"}},
			want:       map[string]doctor.Status{doctor.CheckChallenge: doctor.Warn},
			wantDetail: map[string]string{doctor.CheckChallenge: "no scope"},
		},
		{
			name:       "challenge scope the metadata does not list",
			deploy:     deployment{scopesSupported: []string{"mcp:read"}, requiredScopes: []string{"mcp:tools"}},
			want:       map[string]doctor.Status{doctor.CheckChallenge: doctor.Warn},
			wantDetail: map[string]string{doctor.CheckChallenge: `names ["mcp:tools"]`},
		},
		{
			// Entra ID: clients ask for api://APP/scope, tokens carry scope.
			name:       "challenge spells the scope as the metadata lists it",
			deploy:     deployment{scopesSupported: []string{"api://portcullis/mcp.tools"}, requiredScopes: []string{"mcp.tools"}},
			want:       map[string]doctor.Status{doctor.CheckChallenge: doctor.Pass},
			wantDetail: map[string]string{doctor.CheckChallenge: `scope="api://portcullis/mcp.tools"`},
		},
		{
			name:       "authorization server names another issuer",
			deploy:     deployment{asMeta: map[string]any{"issuer": "https://other.example"}},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckAuthServer: doctor.Fail, doctor.CheckToolsList: doctor.Pass},
			wantDetail: map[string]string{doctor.CheckAuthServer: `names issuer "https://other.example"`},
		},
		{
			name:       "authorization server without metadata",
			deploy:     deployment{noASMeta: true},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckAuthServer: doctor.Fail},
			wantDetail: map[string]string{doctor.CheckAuthServer: "no metadata at any of"},
		},
		{
			name:       "authorization server without PKCE",
			deploy:     deployment{asMeta: map[string]any{"authorization_endpoint": nil, "code_challenge_methods_supported": nil}},
			want:       map[string]doctor.Status{doctor.CheckAuthServer: doctor.Warn},
			wantDetail: map[string]string{doctor.CheckAuthServer: "PKCE S256"},
		},
		{
			name:       "unlisted origin is allowed",
			deploy:     deployment{allowedOrigins: []string{doctor.DefaultOrigin}},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckOrigin: doctor.Fail},
			wantDetail: map[string]string{doctor.CheckOrigin: "200 OK"},
		},
		{
			// What a server that does not check the header looks like.
			name: "a proxy rewrites Mcp-Method to match the body",
			deploy: deployment{wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					var m struct{ Method string }
					if json.Unmarshal(body, &m) == nil && r.Header.Get("Mcp-Method") != "" {
						r.Header.Set("Mcp-Method", m.Method)
					}
					r.Body = io.NopCloser(bytes.NewReader(body))
					h.ServeHTTP(w, r)
				})
			}},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckMcpMethod: doctor.Fail},
			wantDetail: map[string]string{doctor.CheckMcpMethod: "want 400"},
		},
		{
			name: "a proxy drops Mcp-Method",
			deploy: deployment{wrap: func(h http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					r.Header.Del("Mcp-Method")
					h.ServeHTTP(w, r)
				})
			}},
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckMcpMethod: doctor.Fail},
			wantDetail: map[string]string{doctor.CheckMcpMethod: "missing required Mcp-Method header"},
		},
		{
			name:       "a token for another audience",
			deploy:     deployment{},
			token:      "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwczovL2V2aWwuZXhhbXBsZSJ9.c2ln",
			wantFailed: true,
			want: map[string]doctor.Status{
				doctor.CheckToken: doctor.Fail, doctor.CheckOrigin: doctor.Skip, doctor.CheckInitialize: doctor.Skip, doctor.CheckToolsList: doctor.Skip,
			},
			wantDetail: map[string]string{doctor.CheckToken: "invalid_token", doctor.CheckInitialize: "the token is refused"},
		},
		{
			name:       "auth off",
			deploy:     deployment{authOff: true},
			noToken:    true,
			wantFailed: true,
			want: map[string]doctor.Status{
				doctor.CheckReachable: doctor.Pass, doctor.CheckAuth: doctor.Fail, doctor.CheckMetadata: doctor.Skip,
				doctor.CheckChallenge: doctor.Skip, doctor.CheckAuthServer: doctor.Skip, doctor.CheckToken: doctor.Skip,
				doctor.CheckOrigin: doctor.Pass, doctor.CheckMcpMethod: doctor.Pass, doctor.CheckToolsList: doctor.Pass,
			},
			wantDetail: map[string]string{doctor.CheckAuth: "auth is OFF", doctor.CheckMetadata: "auth is off"},
		},
		{
			name:      "auth off, allowed",
			deploy:    deployment{authOff: true},
			noToken:   true,
			allowOpen: true,
			want:      map[string]doctor.Status{doctor.CheckAuth: doctor.Warn, doctor.CheckToolsList: doctor.Pass},
		},
		{
			name:       "not a URL",
			url:        func(string) string { return "mcp.example.com/mcp" },
			wantFailed: true,
			want:       map[string]doctor.Status{doctor.CheckURL: doctor.Fail},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mcpURL, token := tt.deploy.start(t)
			if tt.url != nil {
				mcpURL = tt.url(mcpURL)
			}
			if tt.token != "" {
				token = tt.token
			}
			if tt.noToken {
				token = ""
			}
			rep := doctor.Run(t.Context(), doctor.Options{URL: mcpURL, Token: token, Timeout: 5 * time.Second, AllowUnauthenticated: tt.allowOpen})
			var out bytes.Buffer
			rep.WriteText(&out)
			if rep.Failed() != tt.wantFailed {
				t.Errorf("Failed() = %v, want %v", rep.Failed(), tt.wantFailed)
			}
			for name, want := range tt.want {
				c, ok := rep.Check(name)
				if !ok || c.Status != want {
					t.Errorf("check %q: %s %q, want %s", name, c.Status, c.Detail, want)
				}
			}
			for name, want := range tt.wantDetail {
				if c, _ := rep.Check(name); !strings.Contains(c.Detail, want) {
					t.Errorf("check %q detail %q lacks %q", name, c.Detail, want)
				}
			}
			if token != "" && strings.Contains(out.String(), token) {
				t.Error("the report prints the token")
			}
			if t.Failed() {
				t.Logf("report:\n%s", out.String())
			}
		})
	}
}

func TestWriteTextAligns(t *testing.T) {
	rep := &doctor.Report{URL: "https://mcp.example.com/mcp", Checks: []doctor.Check{
		{Name: "reachable", Status: doctor.Pass, Detail: "ok"},
		{Name: "resource metadata (path)", Status: doctor.Fail, Detail: "404"},
		{Name: "tools/list", Status: doctor.Skip, Detail: "blocked"},
	}}
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `portcullis doctor https://mcp.example.com/mcp
  PASS  reachable                 ok
  FAIL  resource metadata (path)  404
  SKIP  tools/list                blocked
1 passed, 0 warnings, 1 failed, 1 skipped
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}
