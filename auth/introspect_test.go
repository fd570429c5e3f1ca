package auth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeIntrospection is an RFC 7662 endpoint (and a token endpoint for the
// bearer auth method).
type fakeIntrospection struct {
	srv   *httptest.Server
	calls atomic.Int32
	hang  chan struct{}
}

func newFakeIntrospection(t *testing.T) *fakeIntrospection {
	f := &fakeIntrospection{hang: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		id, secret, _ := r.BasicAuth()
		if id != "portcullis" || secret != "s3cret" || r.FormValue("grant_type") != "client_credentials" {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return
		}
		writeJSON(w, 200, map[string]any{"access_token": "server-own-token", "token_type": "Bearer", "expires_in": 3600})
	})
	mux.HandleFunc("POST /introspect", func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		id, secret, basic := r.BasicAuth()
		authOK := (basic && id == "portcullis" && secret == "s3cret") || r.Header.Get("Authorization") == "Bearer server-own-token"
		if !authOK {
			writeJSON(w, 401, map[string]string{"error": "invalid_client"})
			return
		}
		if r.FormValue("token_type_hint") != "access_token" {
			writeJSON(w, 400, map[string]string{"error": "invalid_request"})
			return
		}
		switch r.FormValue("token") {
		case "opaque-good":
			writeJSON(w, 200, map[string]any{"active": true, "sub": "bob", "iss": "https://as.example.com", "client_id": "cli",
				"scope": "mcp:tools", "exp": t0.Add(time.Hour).Unix(), "aud": testResource, "groups": []string{"ops"}})
		case "opaque-short":
			writeJSON(w, 200, map[string]any{"active": true, "sub": "bob", "exp": t0.Add(20 * time.Second).Unix()})
		case "opaque-other-aud":
			writeJSON(w, 200, map[string]any{"active": true, "sub": "bob", "exp": t0.Add(time.Hour).Unix(), "aud": "https://other"})
		case "opaque-500":
			http.Error(w, "boom", 500)
		case "opaque-hang":
			select {
			case <-r.Context().Done():
			case <-f.hang:
			}
		default:
			writeJSON(w, 200, map[string]any{"active": false})
		}
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(func() { close(f.hang); f.srv.Close() })
	return f
}

func introspectionOptions(t *testing.T, f *fakeIntrospection, method string) Options {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Options{Resource: testResource, Introspection: IntrospectionOptions{
		URL: f.srv.URL + "/introspect", ClientID: "portcullis", ClientSecretFile: secret,
		AuthMethod: method, TokenURL: f.srv.URL + "/token", Timeout: 100 * time.Millisecond,
	}}
	o.Defaults()
	return o
}

func TestIntrospection(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		token      string
		wantReason Reason
	}{
		{name: "active, client_secret_basic", method: AuthMethodClientSecretBasic, token: "opaque-good"},
		{name: "active, bearer from client_credentials", method: AuthMethodBearer, token: "opaque-good"},
		{name: "inactive", token: "opaque-revoked", wantReason: ReasonInactive},
		{name: "wrong audience", token: "opaque-other-aud", wantReason: ReasonWrongAudience},
		{name: "endpoint error", token: "opaque-500", wantReason: ReasonIntrospectionFailed},
		{name: "endpoint timeout", token: "opaque-hang", wantReason: ReasonIntrospectionFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeIntrospection(t)
			v, err := NewVerifier(context.Background(), introspectionOptions(t, f, tt.method), nil, newClock().Now)
			if err != nil {
				t.Fatal(err)
			}
			p, err := v.Verify(context.Background(), tt.token)
			if tt.wantReason != "" {
				if ReasonOf(err) != tt.wantReason {
					t.Fatalf("err = %v, want %s", err, tt.wantReason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Subject != "bob" || p.ClientID != "cli" || !slices.Equal(p.Scopes, []string{"mcp:tools"}) || !slices.Equal(p.Roles, []string{"ops"}) {
				t.Errorf("principal = %+v", p)
			}
		})
	}
}

func TestIntrospectionDown(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	f.srv.Close()
	v, err := NewVerifier(context.Background(), o, nil, newClock().Now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), "opaque-good"); ReasonOf(err) != ReasonIntrospectionFailed {
		t.Fatalf("err = %v, want introspection_failed", err)
	}
}

func TestIntrospectionCache(t *testing.T) {
	f := newFakeIntrospection(t)
	clk := newClock()
	v, err := NewVerifier(context.Background(), introspectionOptions(t, f, ""), nil, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 3 {
		if _, err := v.Verify(ctx, "opaque-short"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.calls.Load(); got != 1 {
		t.Fatalf("introspection calls = %d, want 1 (cached)", got)
	}
	clk.Advance(21 * time.Second) // past exp: the cache entry is gone
	_, _ = v.Verify(ctx, "opaque-short")
	if got := f.calls.Load(); got != 2 {
		t.Errorf("introspection calls after exp = %d, want 2", got)
	}
	// Failures are not cached.
	_, _ = v.Verify(ctx, "opaque-revoked")
	_, _ = v.Verify(ctx, "opaque-revoked")
	if got := f.calls.Load(); got != 4 {
		t.Errorf("introspection calls = %d, want 4", got)
	}
}

func TestIntrospectionSecretFile(t *testing.T) {
	f := newFakeIntrospection(t)
	o := introspectionOptions(t, f, "")
	o.Introspection.ClientSecretFile = filepath.Join(t.TempDir(), "missing")
	if _, err := NewVerifier(context.Background(), o, nil, nil); err == nil {
		t.Error("missing secret file: want error")
	}
	o.Introspection.ClientSecretFile = "/dev/zero"
	if _, err := NewVerifier(context.Background(), o, nil, nil); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("endless secret file: error %v, want one saying it is too large", err)
	}
}
