//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// TestAuthServerVirtualServers: the real binary as the authorization
// server in front of the real IdP, with two virtual servers. One client
// (the Go SDK's OAuth client, pre-registered) signs in to each through
// the server's Protected Resource Metadata: each consent page names its
// server by title and resource URL, a consent given for one server does
// not count for the other, and the client holds two tokens whose aud is
// each server's resource. Each token lists its server's tools and is
// refused (401) at the other server and at /mcp. team-a requires a scope
// of its own, which the authorization server must offer.
func TestAuthServerVirtualServers(t *testing.T) {
	addr := freeLoopbackAddr(t)
	origin := "http://" + addr
	idp := startASIdP(t, "", origin)
	servers := []map[string]any{
		{"name": "team-a", "path": "/mcp/team-a", "title": "Team A tools",
			"auth":  map[string]any{"required_scopes": []string{"team:a"}},
			"tools": []map[string]any{{"source": "core", "name": "echo"}, {"source": "core", "name": "PingME"}}},
		{"name": "team-b", "path": "/mcp/team-b", "title": "Team B tools",
			"tools": []map[string]any{{"source": "core", "name": "calculator"}, {"source": "core", "name": "PingME"}}},
	}
	cfg := asConfig(t, idp, origin, asKeysFile(t), map[string]any{"servers": servers}, nil)
	srv := startServer(t, nil, "--config", writeConfigFile(t, cfg), "--listen", addr)
	issuer := srv.BaseURL
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// connect signs alice in to the server at path with the SDK's OAuth
	// client and a new browser, and returns the session, the token and the
	// consent pages answered.
	connect := func(t *testing.T, path, title string) (*sdk.ClientSession, string, int) {
		t.Helper()
		resource := origin + path
		b := newSignInBrowser(idp, "alice")
		b.Server = `<span class="server">` + title + `</span> (` + resource + `)`
		cs, h := sdkASConnectWith(t, ctx, resource, "", &auth.AuthorizationCodeHandlerConfig{
			PreregisteredClient:      &oauthex.ClientCredentials{ClientID: asAppClient},
			RedirectURL:              "http://" + freeLoopbackAddr(t) + "/callback",
			AuthorizationCodeFetcher: b.CodeFetcher(nil),
		})
		return cs, sdkAccessToken(t, ctx, h), b.ConsentPages
	}

	tokens := map[string]string{}
	for _, tt := range []struct {
		name, path, title string
		tools             []string // sorted
	}{
		{name: "team-a", path: "/mcp/team-a", title: "Team A tools", tools: []string{"PingME", "echo"}},
		{name: "team-b", path: "/mcp/team-b", title: "Team B tools", tools: []string{"PingME", "calculator"}},
	} {
		t.Run("sign in to "+tt.name, func(t *testing.T) {
			cs, token, pages := connect(t, tt.path, tt.title)
			// team-b's page is shown although alice approved team-a: a
			// consent is per server.
			if pages != 1 {
				t.Errorf("%d consent pages answered, want 1", pages)
			}
			c := checkASToken(t, token, issuer, origin+tt.path, "alice")
			if tt.name == "team-a" && !slices.Contains(tokenScopes(c), "team:a") {
				t.Errorf("scope %v, want team:a, the scope team-a requires", tokenScopes(c))
			}
			names := sdkToolNames(t, ctx, cs)
			slices.Sort(names)
			if !slices.Equal(names, tt.tools) {
				t.Errorf("tools/list %v, want %v", names, tt.tools)
			}
			tokens[tt.path] = token
		})
	}
	if len(tokens) != 2 {
		t.Fatal("no token for each server: the sign-ins failed")
	}

	t.Run("each token at its server only", func(t *testing.T) {
		for _, tt := range []struct {
			token, at string
			want      int
		}{
			{token: "/mcp/team-a", at: "/mcp/team-a", want: http.StatusOK},
			{token: "/mcp/team-b", at: "/mcp/team-b", want: http.StatusOK},
			{token: "/mcp/team-a", at: "/mcp/team-b", want: http.StatusUnauthorized},
			{token: "/mcp/team-b", at: "/mcp/team-a", want: http.StatusUnauthorized},
			{token: "/mcp/team-a", at: "/mcp", want: http.StatusUnauthorized},
			{token: "/mcp/team-b", at: "/mcp", want: http.StatusUnauthorized},
		} {
			if got := pingWith(t, srv.BaseURL+tt.at, tokens[tt.token]); got != tt.want {
				t.Errorf("the token for %s at %s: status %d, want %d", tt.token, tt.at, got, tt.want)
			}
		}
	})

	t.Run("consent remembered per server", func(t *testing.T) {
		_, token, pages := connect(t, "/mcp/team-a", "Team A tools")
		if pages != 0 {
			t.Errorf("signing in to team-a again: %d consent pages, want 0 (remembered)", pages)
		}
		checkASToken(t, token, issuer, origin+"/mcp/team-a", "alice")
	})
}
