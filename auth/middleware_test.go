package auth

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

const testMetadataURL = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"

// fakeVerifier maps tokens to outcomes.
func fakeVerifier() Verifier {
	return VerifierFunc(func(ctx context.Context, tok string) (*Principal, error) {
		exp := time.Now().Add(time.Hour)
		switch tok {
		case "good-token-AAAA":
			return &Principal{Subject: "alice", Issuer: "https://idp", ClientID: "claude", Scopes: []string{"mcp:tools", "read"}, Expiry: exp}, nil
		case "weak-token-BBBB":
			return &Principal{Subject: "bob", Issuer: "https://idp", Scopes: []string{"read"}, Expiry: exp}, nil
		case "expired-token-CCCC":
			return nil, fail(ReasonExpired, "expired at some time")
		case "wrongaud-token-DDDD":
			return nil, fail(ReasonWrongAudience, "aud mismatch")
		case "down-token-EEEE":
			return nil, fail(ReasonIntrospectionFailed, "connection refused")
		case "unknownkey-token-FFFF":
			return nil, fail(ReasonUnknownKey, "kid not found")
		}
		return nil, fail(ReasonMalformed, "garbage")
	})
}

func TestMiddleware(t *testing.T) {
	tests := []struct {
		name       string
		target     string
		headers    []string // Authorization values
		wantStatus int
		wantAuth   string // substrings of WWW-Authenticate, "|" separated; "-" = absent
		wantReason Reason // reported to the hook; "" = allowed
	}{
		{name: "valid", headers: []string{"Bearer good-token-AAAA"}, wantStatus: 200, wantAuth: "-"},
		{name: "scheme is case-insensitive", headers: []string{"bearer good-token-AAAA"}, wantStatus: 200, wantAuth: "-"},
		{
			name: "missing", wantStatus: 401, wantReason: ReasonMissing,
			wantAuth: `Bearer resource_metadata="` + testMetadataURL + `", scope="mcp:tools"`,
		},
		{name: "Basic scheme", headers: []string{"Basic eDp5"}, wantStatus: 401, wantReason: ReasonMissing, wantAuth: `resource_metadata=|scope="mcp:tools"`},
		{name: "Bearer with no token", headers: []string{"Bearer"}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "Bearer with spaces only", headers: []string{"Bearer    "}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "token with bad characters", headers: []string{`Bearer a"b`}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "two tokens", headers: []string{"Bearer good-token-AAAA other"}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "two Authorization headers", headers: []string{"Bearer good-token-AAAA", "Bearer good-token-AAAA"}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "query token", target: "/mcp?access_token=good-token-AAAA", wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "query token with header too", target: "/mcp?access_token=x", headers: []string{"Bearer good-token-AAAA"}, wantStatus: 400, wantReason: ReasonMalformed},
		{name: "oversized", headers: []string{"Bearer " + strings.Repeat("A", MaxTokenSize+1)}, wantStatus: 400, wantReason: ReasonMalformed, wantAuth: `error="invalid_request"`},
		{name: "garbage token", headers: []string{"Bearer garbage-token-GGGG"}, wantStatus: 401, wantReason: ReasonMalformed, wantAuth: `error="invalid_token"|error_description="token malformed"`},
		{name: "expired", headers: []string{"Bearer expired-token-CCCC"}, wantStatus: 401, wantReason: ReasonExpired, wantAuth: `resource_metadata=|error="invalid_token"|error_description="token expired"`},
		{name: "wrong audience", headers: []string{"Bearer wrongaud-token-DDDD"}, wantStatus: 401, wantReason: ReasonWrongAudience, wantAuth: `error="invalid_token"`},
		{name: "unknown key", headers: []string{"Bearer unknownkey-token-FFFF"}, wantStatus: 401, wantReason: ReasonUnknownKey, wantAuth: `error="invalid_token"`},
		{name: "introspection down", headers: []string{"Bearer down-token-EEEE"}, wantStatus: 503, wantReason: ReasonIntrospectionFailed, wantAuth: "-"},
		{name: "insufficient scope", headers: []string{"Bearer weak-token-BBBB"}, wantStatus: 403, wantReason: ReasonInsufficientScope, wantAuth: `error="insufficient_scope"|scope="mcp:tools"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			var events []Event
			var mu sync.Mutex
			hook := func(_ context.Context, e Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
			o := Options{Resource: testResource, RequiredScopes: []string{"mcp:tools"}}
			var sawPrincipal *Principal
			var sawInfo *sdkauth.TokenInfo
			var sawAuthorization []string
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sawPrincipal, _ = PrincipalFrom(r.Context())
				sawInfo = sdkauth.TokenInfoFromContext(r.Context())
				sawAuthorization = r.Header.Values("Authorization")
				w.WriteHeader(200)
			})
			h := Middleware(fakeVerifier(), o, testMetadataURL, Deps{Hook: hook, Logger: logger})(next)
			target := tt.target
			if target == "" {
				target = "/mcp"
			}
			req := httptest.NewRequest("POST", target, nil)
			for _, v := range tt.headers {
				req.Header.Add("Authorization", v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d; body %q", rec.Code, tt.wantStatus, rec.Body)
			}
			got := rec.Header().Get("WWW-Authenticate")
			switch tt.wantAuth {
			case "":
			case "-":
				if got != "" {
					t.Errorf("WWW-Authenticate = %q, want none", got)
				}
			default:
				for _, want := range strings.Split(tt.wantAuth, "|") {
					if !strings.Contains(got, want) {
						t.Errorf("WWW-Authenticate = %q, want it to contain %q", got, want)
					}
				}
				if _, err := oauthex.ParseWWWAuthenticate([]string{got}); err != nil {
					t.Errorf("WWW-Authenticate does not parse: %v", err)
				}
			}
			if len(events) != 1 {
				t.Fatalf("events = %+v, want one", events)
			}
			if tt.wantReason == "" {
				if events[0].Outcome != OutcomeAllowed {
					t.Errorf("event = %+v, want allowed", events[0])
				}
				if sawPrincipal == nil || sawPrincipal.Subject != "alice" {
					t.Errorf("principal in context = %+v", sawPrincipal)
				}
				if sawInfo == nil || sawInfo.UserID != "https://idp|alice" {
					t.Errorf("SDK TokenInfo in context = %+v", sawInfo)
				}
				if p, ok := PrincipalFromTokenInfo(sawInfo); !ok || p != sawPrincipal {
					t.Errorf("PrincipalFromTokenInfo = %v, %v", p, ok)
				}
				if len(sawAuthorization) != 0 {
					t.Errorf("the next handler saw Authorization %q; the token must stop at auth", sawAuthorization)
				}
				if got := req.Header.Values("Authorization"); !slices.Equal(got, tt.headers) {
					t.Errorf("the caller's request now has Authorization %q, want it unchanged %q", got, tt.headers)
				}
			} else {
				if events[0].Outcome != OutcomeDenied || events[0].Reason != tt.wantReason {
					t.Errorf("event = %+v, want denied %s", events[0], tt.wantReason)
				}
				if sawPrincipal != nil {
					t.Error("next handler ran on a denied request")
				}
				if !strings.Contains(logs.String(), `"reason":"`+string(tt.wantReason)+`"`) {
					t.Errorf("log does not name the reason: %s", logs.String())
				}
			}
			for _, v := range tt.headers {
				_, tok, _ := strings.Cut(v, " ")
				if len(tok) > 4 && strings.Contains(logs.String(), tok) {
					t.Errorf("log contains the token: %s", logs.String())
				}
				if len(tok) > 4 && strings.Contains(rec.Body.String(), tok) {
					t.Errorf("body contains the token: %s", rec.Body.String())
				}
			}
			if strings.Contains(logs.String(), "good-token-AAAA") || strings.Contains(logs.String(), "AAAA") {
				t.Errorf("log contains token text: %s", logs.String())
			}
		})
	}
}

// TestMiddlewareRealTokensNotLogged runs real signed tokens through the real
// verifier and checks that no part of a token reaches the logs.
func TestMiddlewareRealTokensNotLogged(t *testing.T) {
	k := oidctest.NewRSAKey("k")
	f := newFakeIssuer(t, k)
	now := time.Now().Truncate(time.Second)
	o := testOptions(f)
	v, err := NewVerifier(context.Background(), o, Deps{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	base := map[string]any{"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()}
	with := func(over map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range over {
			m[k] = v
		}
		return f.Claims(m)
	}
	tests := []struct {
		name       string
		token      string
		wantStatus int
	}{
		{name: "valid", token: k.Sign(with(nil)), wantStatus: 200},
		{name: "expired", token: k.Sign(with(map[string]any{"exp": now.Add(-time.Hour).Unix()})), wantStatus: 401},
		{name: "wrong audience", token: k.Sign(with(map[string]any{"aud": "x"})), wantStatus: 401},
		{name: "forged", token: oidctest.NewRSAKey("k").Sign(with(nil)), wantStatus: 401},
		{name: "alg none", token: oidctest.Forge(map[string]any{"alg": "none"}, with(nil), func([]byte) []byte { return nil }), wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := Middleware(v, o, MetadataURL(o.Resource), Deps{Logger: logger})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			req := httptest.NewRequest("POST", "/mcp", nil)
			req.Header.Set("Authorization", "Bearer "+tt.token)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", rec.Code, tt.wantStatus, logs.String())
			}
			for _, part := range strings.Split(tt.token, ".") {
				if len(part) >= 8 && (strings.Contains(logs.String(), part) || strings.Contains(rec.Body.String(), part)) {
					t.Errorf("token segment leaked: logs %s body %s", logs.String(), rec.Body.String())
				}
			}
		})
	}
}

func TestWriteInsufficientScope(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteInsufficientScope(rec, testMetadataURL, []string{"a", "b"})
	want := `Bearer resource_metadata="` + testMetadataURL + `", scope="a b", error="insufficient_scope", error_description="the token lacks the scopes needed"`
	if rec.Code != 403 || rec.Header().Get("WWW-Authenticate") != want {
		t.Errorf("got %d %q, want 403 %q", rec.Code, rec.Header().Get("WWW-Authenticate"), want)
	}
}

// TestMiddlewareClosesUnreadBody checks that a refusal of a request with a
// body, which auth answers without reading it, says Connection: close, so
// that net/http neither waits for the body nor reuses the connection; an
// allowed request, a request without a body and an HTTP/2 stream are left
// alone.
func TestMiddlewareClosesUnreadBody(t *testing.T) {
	tests := []struct {
		name      string
		auth      string
		body      string
		proto     int // major version; 0 means 1
		wantCode  int
		wantClose bool
	}{
		{name: "missing, body", body: "{}", wantCode: 401, wantClose: true},
		{name: "Basic scheme, body", auth: "Basic eDp5", body: "{}", wantCode: 401, wantClose: true},
		{name: "malformed, body", auth: "Bearer", body: "{}", wantCode: 400, wantClose: true},
		{name: "expired, body", auth: "Bearer expired-token-CCCC", body: "{}", wantCode: 401, wantClose: true},
		{name: "introspection down, body", auth: "Bearer down-token-EEEE", body: "{}", wantCode: 503, wantClose: true},
		{name: "insufficient scope, body", auth: "Bearer weak-token-BBBB", body: "{}", wantCode: 403, wantClose: true},
		{name: "missing, no body", wantCode: 401},
		{name: "missing, body, HTTP/2", body: "{}", proto: 2, wantCode: 401},
		{name: "allowed, body", auth: "Bearer good-token-AAAA", body: "{}", wantCode: 200},
	}
	o := Options{Resource: testResource, RequiredScopes: []string{"mcp:tools"}}
	h := Middleware(fakeVerifier(), o, testMetadataURL, Deps{})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			req := httptest.NewRequest("POST", "/mcp", body)
			if tt.proto == 2 {
				req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/2.0", 2, 0
			}
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.wantCode {
				t.Fatalf("status %d, want %d", rec.Code, tt.wantCode)
			}
			if got := rec.Header().Get("Connection") == "close"; got != tt.wantClose {
				t.Errorf("Connection: %q, want close %v", rec.Header().Get("Connection"), tt.wantClose)
			}
		})
	}
}
