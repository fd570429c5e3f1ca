package auth

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
)

func TestPolicy(t *testing.T) {
	o := Options{
		RequiredScopes: []string{"mcp:tools"},
		Policy: []ToolPolicy{
			{Tool: "deploy", Scopes: []string{"deploy:write", "deploy:read"}},
			{Tool: "admin", Roles: []string{"admin", "sre"}},
			{Tool: "both", Scopes: []string{"x"}, Roles: []string{"boss"}},
			{Tool: "open"},
		},
	}
	p := NewPolicy(o)
	tests := []struct {
		name      string
		principal *Principal
		tool      string
		want      bool
	}{
		{name: "unlisted tool", principal: &Principal{}, tool: "echo", want: true},
		{name: "listed without requirements", principal: &Principal{}, tool: "open", want: true},
		{name: "all scopes", principal: &Principal{Scopes: []string{"deploy:read", "deploy:write"}}, tool: "deploy", want: true},
		{name: "one scope missing", principal: &Principal{Scopes: []string{"deploy:read"}}, tool: "deploy", want: false},
		{name: "any role", principal: &Principal{Roles: []string{"sre"}}, tool: "admin", want: true},
		{name: "no role", principal: &Principal{Roles: []string{"dev"}, Scopes: []string{"admin"}}, tool: "admin", want: false},
		{name: "scopes or role: scopes", principal: &Principal{Scopes: []string{"x"}}, tool: "both", want: true},
		{name: "scopes or role: role", principal: &Principal{Roles: []string{"boss"}}, tool: "both", want: true},
		{name: "scopes or role: neither", principal: &Principal{}, tool: "both", want: false},
		{name: "nil principal, open tool", tool: "echo", want: true},
		{name: "nil principal, guarded tool", tool: "deploy", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := p.Allowed(tt.principal, tt.tool); got != tt.want {
				t.Errorf("Allowed = %v, want %v", got, tt.want)
			}
		})
	}
	if got, want := p.Needed("deploy"), []string{"mcp:tools", "deploy:write", "deploy:read"}; !slices.Equal(got, want) {
		t.Errorf("Needed(deploy) = %q, want %q", got, want)
	}
	if got, want := p.Needed("echo"), []string{"mcp:tools"}; !slices.Equal(got, want) {
		t.Errorf("Needed(echo) = %q, want %q", got, want)
	}
}

func TestPolicyDecide(t *testing.T) {
	yes, no := true, false
	p := NewPolicy(Options{RequiredScopes: []string{"mcp:tools"}, Policy: []ToolPolicy{
		{Tool: "deploy", Scopes: []string{"deploy:write"}},
		{Tool: "admin", Roles: []string{"sre"}},
		{Tool: "secret", Scopes: []string{"secret:read"}, Hidden: &yes},
		{Tool: "ops", Roles: []string{"sre"}, Hidden: &no},
	}})
	withPrincipal := func(pr *Principal) *sdkauth.TokenInfo {
		return &sdkauth.TokenInfo{Extra: map[string]any{tokenInfoPrincipalKey: pr}}
	}
	tests := []struct {
		name       string
		info       *sdkauth.TokenInfo
		tool       string
		wantOK     bool
		wantNeeded []string
		wantHidden bool
	}{
		{name: "allowed", info: withPrincipal(&Principal{Scopes: []string{"mcp:tools", "deploy:write"}}), tool: "deploy", wantOK: true},
		{name: "denied names scopes", info: withPrincipal(&Principal{Scopes: []string{"mcp:tools"}}), tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
		{name: "nil info, guarded", tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
		{name: "nil info, open", tool: "echo", wantOK: true},
		{name: "foreign info", info: &sdkauth.TokenInfo{Scopes: []string{"deploy:write"}}, tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
		{name: "roles only: hidden by default", info: withPrincipal(&Principal{}), tool: "admin", wantNeeded: []string{"mcp:tools"}, wantHidden: true},
		{name: "scopes: hidden when the rule says so", info: withPrincipal(&Principal{}), tool: "secret", wantNeeded: []string{"mcp:tools", "secret:read"}, wantHidden: true},
		{name: "roles: shown when the rule says so", info: withPrincipal(&Principal{}), tool: "ops", wantNeeded: []string{"mcp:tools"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, needed, hidden := p.Decide(tt.info, tt.tool)
			if ok != tt.wantOK || !slices.Equal(needed, tt.wantNeeded) || hidden != tt.wantHidden {
				t.Errorf("Decide = %v %q hidden %v, want %v %q hidden %v", ok, needed, hidden, tt.wantOK, tt.wantNeeded, tt.wantHidden)
			}
		})
	}
}

// TestAdvertisedScopes: challenges spell a scope as scopes_supported lists
// it, so a client asks the IdP for what the IdP knows (Entra ID:
// api://APP/scope) while tokens are checked for what they carry.
func TestAdvertisedScopes(t *testing.T) {
	tests := []struct {
		name      string
		supported []string
		in, want  []string
	}{
		{name: "listed as is", supported: []string{"mcp:tools"}, in: []string{"mcp:tools"}, want: []string{"mcp:tools"}},
		{name: "not listed", in: []string{"mcp:tools"}, want: []string{"mcp:tools"}},
		{name: "Entra prefix", supported: []string{"api://portcullis/mcp.tools", "api://portcullis/mcp.admin"}, in: []string{"mcp.tools", "mcp.admin"}, want: []string{"api://portcullis/mcp.tools", "api://portcullis/mcp.admin"}},
		{name: "the listed short form wins", supported: []string{"api://a/read", "read"}, in: []string{"read"}, want: []string{"read"}},
		{name: "ambiguous prefix stays short", supported: []string{"api://a/read", "api://b/read"}, in: []string{"read"}, want: []string{"read"}},
		{name: "a suffix is not a match", supported: []string{"api://a/xread"}, in: []string{"read"}, want: []string{"read"}},
		{name: "none", supported: []string{"api://a/read"}, in: nil, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (Options{ScopesSupported: tt.supported}).AdvertisedScopes(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("AdvertisedScopes(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	entra := Options{
		ScopesSupported: []string{"api://portcullis/mcp.tools", "api://portcullis/deploy"},
		RequiredScopes:  []string{"mcp.tools"},
		Policy:          []ToolPolicy{{Tool: "deploy", Scopes: []string{"deploy"}}},
	}
	if got, want := NewPolicy(entra).Needed("deploy"), []string{"api://portcullis/mcp.tools", "api://portcullis/deploy"}; !slices.Equal(got, want) {
		t.Errorf("Needed(deploy) = %q, want %q", got, want)
	}
	// The token carries the short form, and that is what is checked.
	if !NewPolicy(entra).Allowed(&Principal{Scopes: []string{"mcp.tools", "deploy"}}, "deploy") {
		t.Error("a token with scp \"mcp.tools deploy\" is refused deploy")
	}
	rec := httptest.NewRecorder()
	Middleware(fakeVerifier(), entra, testMetadataURL, Deps{})(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("POST", "/mcp", nil))
	if got, want := rec.Header().Get("WWW-Authenticate"), `scope="api://portcullis/mcp.tools"`; !strings.Contains(got, want) {
		t.Errorf("401 challenge %q, want it to contain %s", got, want)
	}
}
