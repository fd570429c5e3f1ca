package portcullis

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/curation"
	"github.com/portcullis-mcp/portcullis/upstream"
)

func TestConnectionsNeeded(t *testing.T) {
	acct := func(name string) upstream.Options {
		return upstream.Options{Name: name, Transport: upstream.TransportHTTP, OAuth: upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode, ConnectAtSignIn: true}}
	}
	onDemand := acct("wiki")
	onDemand.OAuth.ConnectAtSignIn = false
	cfg := &configFile{
		Upstreams: []upstream.Options{acct("github"), acct("jira"), onDemand, {Name: "static", Transport: upstream.TransportHTTP}},
		Servers: []virtualServer{
			{Name: "dev", Resource: "https://p.example/dev/mcp", Exposure: curation.Exposure{Tools: []curation.ToolSelection{{Source: "github"}, {Source: "static"}, {Source: "wiki"}}}},
			{Name: "pm", Resource: "https://p.example/pm/mcp", Exposure: curation.Exposure{Prompts: []curation.PromptSelection{{Source: "jira"}}}},
			{Name: "core", Resource: "https://p.example/core/mcp", Exposure: curation.Exposure{Tools: []curation.ToolSelection{{Source: "core"}}}},
		},
	}
	cfg.Auth.Resource = "https://p.example/mcp"
	for resource, want := range map[string][]string{
		"https://p.example/mcp":      {"github", "jira"},
		"https://p.example/dev/mcp":  {"github"},
		"https://p.example/pm/mcp":   {"jira"},
		"https://p.example/core/mcp": nil,
		"https://p.example/unknown":  nil,
	} {
		if got := connectionsNeeded(cfg, resource); !slices.Equal(got, want) {
			t.Errorf("connectionsNeeded(%s) = %v, want %v", resource, got, want)
		}
	}
}

func TestConnectionsOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	os.WriteFile(keys, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))+"\n"), 0o600)
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s\n"), 0o600)
	acct := []upstream.Options{{Name: "github", Transport: upstream.TransportHTTP, OAuth: upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode}}}
	signIn := connectionsSignIn{Issuer: "https://idp.example", ClientID: "pages", ClientSecretFile: secret}
	for _, c := range []struct {
		name     string
		o        connectionsOptions
		ups      []upstream.Options
		as       bool
		wantErrs []string
	}{
		{name: "no account upstream needs nothing", o: connectionsOptions{}, ups: nil},
		{name: "negative ttl", o: connectionsOptions{TTL: -1}, wantErrs: []string{"connections.ttl: must not be negative"}},
		{name: "authorization server", o: connectionsOptions{KeysFile: keys}, ups: acct, as: true},
		{name: "direct, signing in at the IdP", o: connectionsOptions{KeysFile: keys, SignIn: signIn}, ups: acct},
		{name: "everything missing", o: connectionsOptions{}, ups: acct, wantErrs: []string{
			`connections.keys_file: required: upstream "github"`, "connections.sign_in.issuer: required", "connections.sign_in.client_id: required", "connections.sign_in.client_secret_file: required"}},
		{name: "bad keys, unknown issuer", o: connectionsOptions{KeysFile: secret, SignIn: connectionsSignIn{Issuer: "https://other.example", ClientID: "p", ClientSecretFile: secret}}, ups: acct, wantErrs: []string{
			"connections.keys_file: ", `connections.sign_in.issuer: "https://other.example" is not one of auth.issuers`}},
		{name: "connected at sign-in without the authorization server", o: connectionsOptions{KeysFile: keys, SignIn: signIn},
			ups:      []upstream.Options{{Name: "github", Transport: upstream.TransportHTTP, OAuth: upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode, ConnectAtSignIn: true}}},
			wantErrs: []string{`upstreams: "github": oauth.connect_at_sign_in chains the connection into the sign-in at Portcullis's authorization server, which is not enabled`}},
		{name: "sign_in beside the authorization server", o: connectionsOptions{KeysFile: keys, SignIn: signIn}, ups: acct, as: true, wantErrs: []string{"connections.sign_in: the connect pages sign users in through the authorization server"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.o.validate(c.ups, c.as, []string{"https://idp.example"})
			if len(c.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			for _, w := range c.wantErrs {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("validate = %v, want %q", err, w)
				}
			}
		})
	}
}
