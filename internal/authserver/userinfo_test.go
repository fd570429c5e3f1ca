package authserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// userInfoIdP is a provider whose ID tokens carry only what the test
// says (as a provider following OpenID Connect Core §5.4 does in the code
// flow: sub, no profile or email claims) and whose userinfo endpoint
// answers with the rest.
type userInfoIdP struct {
	srv      *httptest.Server
	idToken  map[string]any // claims besides iss, aud, exp, iat, nonce
	userInfo map[string]any // nil: the endpoint fails
	calls    atomic.Int32
}

func startUserInfoIdP(t *testing.T, idToken, userInfo map[string]any) *userInfoIdP {
	t.Helper()
	p := &userInfoIdP{idToken: idToken, userInfo: userInfo}
	key := oidctest.NewECKey("k")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		iss := p.srv.URL
		json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss, "authorization_endpoint": iss + "/authorize", "token_endpoint": iss + "/token",
			"jwks_uri": iss + "/jwks", "userinfo_endpoint": iss + "/userinfo", "response_types_supported": []string{"code"},
			"subject_types_supported": []string{"public"}, "id_token_signing_alg_values_supported": []string{"ES256"},
		})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{key.JWK()}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		claims := map[string]any{"iss": p.srv.URL, "aud": "portcullis", "exp": time.Now().Add(time.Hour).Unix(), "iat": time.Now().Unix(), "nonce": "n"}
		for k, v := range p.idToken {
			claims[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": "idp-at", "token_type": "Bearer", "expires_in": 3600, "id_token": key.Sign(claims, oidctest.Type("JWT"))})
	})
	mux.HandleFunc("GET /userinfo", func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer idp-at" || p.userInfo == nil {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(p.userInfo)
	})
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// TestSignInCompletesFromUserInfo: an ID token without an e-mail address
// is completed from the userinfo endpoint (e-mail, groups), the ID
// token's own claims winning; a userinfo answer for another sub refuses
// the sign-in; an ID token with an e-mail address costs no userinfo call;
// a failing endpoint leaves the ID token's claims as they are.
func TestSignInCompletesFromUserInfo(t *testing.T) {
	for _, tt := range []struct {
		name          string
		idToken       map[string]any
		userInfo      map[string]any
		want          User
		wantErr       bool
		wantCalls     int32
		allowedDomain string
	}{
		{
			name:      "email and groups from userinfo",
			idToken:   map[string]any{"sub": "alice", "name": "Alice A."},
			userInfo:  map[string]any{"sub": "alice", "name": "someone else", "email": "alice@example.com", "groups": []string{"admins"}},
			want:      User{Subject: "alice", Email: "alice@example.com", Name: "Alice A.", Groups: []string{"admins"}},
			wantCalls: 1, allowedDomain: "example.com",
		},
		{
			name:      "userinfo for another subject",
			idToken:   map[string]any{"sub": "alice"},
			userInfo:  map[string]any{"sub": "mallory", "email": "mallory@example.com"},
			wantErr:   true,
			wantCalls: 1,
		},
		{
			name:      "email in the ID token",
			idToken:   map[string]any{"sub": "alice", "email": "alice@example.com"},
			userInfo:  map[string]any{"sub": "alice", "groups": []string{"admins"}},
			want:      User{Subject: "alice", Email: "alice@example.com"},
			wantCalls: 0,
		},
		{
			name:      "userinfo fails",
			idToken:   map[string]any{"sub": "alice", "groups": []string{"staff"}},
			want:      User{Subject: "alice", Groups: []string{"staff"}},
			wantCalls: 1,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			prov := startUserInfoIdP(t, tt.idToken, tt.userInfo)
			secret := filepath.Join(t.TempDir(), "secret")
			if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
				t.Fatal(err)
			}
			o := IdPOptions{Preset: "generic", Issuer: prov.srv.URL, ClientID: "portcullis", ClientSecretFile: secret, AllowHTTP: true}
			if tt.allowedDomain != "" {
				o.AllowedEmailDomains = []string{tt.allowedDomain}
			}
			p, err := newIdP(o, "http://127.0.0.1/oauth/callback", prov.srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			in, err := p.exchange(t.Context(), "code", "verifier", "n")
			u := in.user
			if tt.wantErr {
				if !errors.Is(err, ErrSignIn) {
					t.Fatalf("exchange: %v, %+v; want ErrSignIn", err, u)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if u.Subject != tt.want.Subject || u.Email != tt.want.Email || u.Name != tt.want.Name || !slices.Equal(u.Groups, tt.want.Groups) {
				t.Errorf("user %+v, want %+v", u, tt.want)
			}
			if n := prov.calls.Load(); n != tt.wantCalls {
				t.Errorf("%d userinfo calls, want %d", n, tt.wantCalls)
			}
		})
	}
}
