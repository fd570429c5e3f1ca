package portcullis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/oidctest"
)

// TestAuthServerIssuesForVirtualServers: with the authorization server
// on, one client gets a token for each of two virtual servers (through
// the ID-JAG grant of an enterprise IdP, which needs no browser; the
// browser sign-in per server is in internal/authserver's and the e2e
// tests): each carries its server's resource as its only audience, works
// at its server, and is refused (401) at the other and at /mcp; an
// assertion for one server granting the other's scope is refused. Each
// server's metadata names the authorization server, whose metadata
// offers the scopes the servers require.
func TestAuthServerIssuesForVirtualServers(t *testing.T) {
	ent := oidctest.NewECKey("ent-1")
	idp := oidctest.Start(t, oidctest.Options{Keys: []*oidctest.Key{ent}})
	secret := filepath.Join(t.TempDir(), "idp-secret")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const origin = "https://mcp.example.com"
	cfg := writeConfig(t, `
auth:
  resource: `+origin+`/mcp
authorization_server:
  enabled: true
  idp:
    issuer: https://idp.example.com
    client_id: portcullis
    client_secret_file: `+secret+`
  clients:
    - client_id: app
      redirect_uris: [http://127.0.0.1/callback]
  enterprise_idps:
    - issuer: `+idp.URL()+`
      allow_http: true
servers:
  - name: team-a
    path: /mcp/team-a
    title: Team A
    auth: {required_scopes: [team:a]}
    tools: [{source: core, name: echo}]
  - name: team-b
    path: /mcp/team-b
    auth: {required_scopes: [team:b]}
    tools: [{source: core, name: echo}]
`)
	base, _ := startServe(t, "--config", cfg)

	// present presents an ID-JAG of the enterprise IdP for resource and
	// scope, and returns the token endpoint's status and answer.
	present := func(t *testing.T, resource, scope string) (int, map[string]any) {
		t.Helper()
		now := time.Now()
		assertion := ent.Sign(map[string]any{
			"iss": idp.URL(), "sub": "alice", "aud": origin, "client_id": "app", "jti": rand.Text(),
			"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "resource": resource, "scope": scope,
		}, oidctest.Type("oauth-id-jag+jwt"))
		resp, err := http.PostForm(base+"/oauth/token", url.Values{
			"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion},
			"client_id": {"app"}, "resource": {resource},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var tok map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
			t.Fatalf("token for %s: status %d, %v", resource, resp.StatusCode, err)
		}
		return resp.StatusCode, tok
	}
	// token is present for a token response that must be a token.
	token := func(t *testing.T, resource, scope string) map[string]any {
		t.Helper()
		status, tok := present(t, resource, scope)
		if status != http.StatusOK {
			t.Fatalf("token for %s: status %d, %v", resource, status, tok)
		}
		return tok
	}
	tokens := map[string]string{}
	for _, s := range []struct{ path, scope string }{{"/mcp/team-a", "team:a"}, {"/mcp/team-b", "team:b"}} {
		tok := token(t, origin+s.path, s.scope)
		at, _ := tok["access_token"].(string)
		if aud := jwtAudience(t, at); !slices.Equal(aud, []string{origin + s.path}) {
			t.Errorf("token for %s: aud %v, want [%s]", s.path, aud, origin+s.path)
		}
		tokens[s.path] = at
	}
	if status, tok := present(t, origin+"/mcp/team-a", "team:a team:b"); status != http.StatusBadRequest || tok["error"] != "invalid_grant" {
		t.Errorf("an assertion for team-a granting team-b's scope: status %d, %v; want 400 invalid_grant", status, tok)
	}

	for _, p := range []string{"/mcp/team-a", "/mcp/team-b"} {
		t.Run("accepted at "+p, func(t *testing.T) {
			tr := &sdk.StreamableClientTransport{Endpoint: base + p, HTTPClient: &http.Client{Transport: tokenTransport(tokens[p])}, MaxRetries: -1, DisableStandaloneSSE: true}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil).Connect(t.Context(), tr, nil)
			if err != nil {
				t.Fatalf("connect with its token: %v", err)
			}
			defer cs.Close()
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil || len(res.Tools) != 1 || res.Tools[0].Name != "echo" {
				t.Errorf("tools/list: %v %+v, want echo", err, res)
			}
		})
	}
	const list = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`
	for _, tt := range []struct{ token, at string }{
		{token: "/mcp/team-a", at: "/mcp/team-b"},
		{token: "/mcp/team-b", at: "/mcp/team-a"},
		{token: "/mcp/team-a", at: "/mcp"},
		{token: "/mcp/team-b", at: "/mcp"},
	} {
		if resp := mcpPost(t, base+tt.at, tokens[tt.token], "", list); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("the token for %s at %s: status %d, want 401", tt.token, tt.at, resp.StatusCode)
		}
	}

	t.Run("metadata", func(t *testing.T) {
		for _, p := range []string{"/mcp", "/mcp/team-a", "/mcp/team-b"} {
			var prm struct {
				Resource             string   `json:"resource"`
				AuthorizationServers []string `json:"authorization_servers"`
			}
			getJSONInto(t, base+"/.well-known/oauth-protected-resource"+p, &prm)
			if prm.Resource != origin+p || !slices.Equal(prm.AuthorizationServers, []string{origin}) {
				t.Errorf("metadata of %s: resource %q, authorization_servers %v; want %s and [%s]", p, prm.Resource, prm.AuthorizationServers, origin+p, origin)
			}
		}
		var as struct {
			Scopes []string `json:"scopes_supported"`
		}
		getJSONInto(t, base+"/.well-known/oauth-authorization-server", &as)
		for _, sc := range []string{"team:a", "team:b"} {
			if !slices.Contains(as.Scopes, sc) {
				t.Errorf("authorization server scopes_supported %v lacks %s, which a server requires", as.Scopes, sc)
			}
		}
	})
}

// jwtAudience is the aud claim of a JWT, unverified, as a list.
func jwtAudience(t *testing.T, token string) []string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %q", token)
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Aud json.RawMessage `json:"aud"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var one string
	if json.Unmarshal(c.Aud, &one) == nil {
		return []string{one}
	}
	var list []string
	json.Unmarshal(c.Aud, &list)
	return list
}

// getJSONInto decodes the JSON document at u into v.
func getJSONInto(t *testing.T, u string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v", u, resp.StatusCode, err)
	}
}
