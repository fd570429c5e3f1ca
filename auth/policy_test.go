package auth

import (
	"slices"
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
	p := NewPolicy(Options{RequiredScopes: []string{"mcp:tools"}, Policy: []ToolPolicy{{Tool: "deploy", Scopes: []string{"deploy:write"}}}})
	withPrincipal := func(pr *Principal) *sdkauth.TokenInfo {
		return &sdkauth.TokenInfo{Extra: map[string]any{tokenInfoPrincipalKey: pr}}
	}
	tests := []struct {
		name       string
		info       *sdkauth.TokenInfo
		tool       string
		wantOK     bool
		wantNeeded []string
	}{
		{name: "allowed", info: withPrincipal(&Principal{Scopes: []string{"mcp:tools", "deploy:write"}}), tool: "deploy", wantOK: true},
		{name: "denied names scopes", info: withPrincipal(&Principal{Scopes: []string{"mcp:tools"}}), tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
		{name: "nil info, guarded", tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
		{name: "nil info, open", tool: "echo", wantOK: true},
		{name: "foreign info", info: &sdkauth.TokenInfo{Scopes: []string{"deploy:write"}}, tool: "deploy", wantNeeded: []string{"mcp:tools", "deploy:write"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, needed := p.Decide(tt.info, tt.tool)
			if ok != tt.wantOK || !slices.Equal(needed, tt.wantNeeded) {
				t.Errorf("Decide = %v %q, want %v %q", ok, needed, tt.wantOK, tt.wantNeeded)
			}
		})
	}
}
