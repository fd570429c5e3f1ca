package httptools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/httptools/spec"
	"github.com/portcullis-mcp/portcullis/upstream"
)

func TestValidate(t *testing.T) {
	valid := func() Options {
		return Options{Name: "pets", BaseURL: "https://api.example/v1", Tools: []spec.Tool{
			{Name: "get_pet", Method: "get", Path: "/pets/{petId}", Params: []spec.Param{{Name: "petId", In: spec.InPath}}},
		}}
	}
	tests := []struct {
		name   string
		change func(o *Options)
		want   string // empty: valid
	}{
		{name: "valid", change: func(*Options) {}},
		{name: "bad name", change: func(o *Options) { o.Name = "a b" }, want: "[0].name:"},
		{name: "base_url not absolute", change: func(o *Options) { o.BaseURL = "/v1" }, want: "[0].base_url:"},
		{name: "base_url with credentials", change: func(o *Options) { o.BaseURL = "https://u:p@api.example" }, want: "must not contain credentials"},
		{name: "bad allow_hosts", change: func(o *Options) { o.AllowHosts = []string{"http://x/"} }, want: "[0].allow_hosts[0]:"},
		{name: "allow_hosts without base_url's host", change: func(o *Options) { o.AllowHosts = []string{"other.example"} }, want: "[0].allow_hosts: must include base_url's host api.example"},
		{name: "allow_hosts with base_url's host", change: func(o *Options) { o.AllowHosts = []string{"other.example", "API.example:443"} }},
		{name: "bad method", change: func(o *Options) { o.Tools[0].Method = "TRACE" }, want: "[0].tools[0].method:"},
		{name: "path without slash", change: func(o *Options) { o.Tools[0].Path = "pets" }, want: "[0].tools[0].path:"},
		{name: "path with query", change: func(o *Options) { o.Tools[0].Path = "/pets?x=1" }, want: "[0].tools[0].path:"},
		{name: "template without param", change: func(o *Options) { o.Tools[0].Params = nil }, want: "{petId} has no path param"},
		{name: "path param not in template", change: func(o *Options) { o.Tools[0].Params[0].As = "id" }, want: "has no {id}"},
		{name: "bad in", change: func(o *Options) { o.Tools[0].Params = append(o.Tools[0].Params, spec.Param{Name: "x", In: "cookie"}) }, want: ".in:"},
		{name: "body param without a body", change: func(o *Options) {
			o.Tools[0].Params = append(o.Tools[0].Params, spec.Param{Name: "x", In: spec.InBody})
		}, want: "body params need body json or form"},
		{name: "argument mapped twice", change: func(o *Options) {
			o.Tools[0].Params = append(o.Tools[0].Params, spec.Param{Name: "petId", In: spec.InQuery})
		}, want: "mapped twice"},
		{name: "bad header name", change: func(o *Options) {
			o.Tools[0].Params = append(o.Tools[0].Params, spec.Param{Name: "x", In: spec.InHeader, As: "X Y"})
		}, want: "not a valid header name"},
		{name: "duplicate tool", change: func(o *Options) { o.Tools = append(o.Tools, o.Tools[0]) }, want: "[0].tools[1].name:"},
		{name: "input schema not an object", change: func(o *Options) { o.Tools[0].InputSchema = json.RawMessage(`{"type":"string"}`) }, want: "input_schema: must be an object schema"},
		{name: "bad body", change: func(o *Options) { o.Tools[0].Body = "xml" }, want: ".body:"},
		{name: "oauth connected accounts", change: func(o *Options) {
			o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode, ClientID: "c"}
		}},
		{name: "oauth connected accounts at sign-in", change: func(o *Options) {
			o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode, ClientID: "c", ConnectAtSignIn: true}
		}, want: "[0].oauth.connect_at_sign_in: applies only to upstreams"},
		{name: "oauth connected accounts without client", change: func(o *Options) {
			o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantAuthorizationCode}
		}, want: "[0].oauth.client_id: required"},
		{name: "oauth jwt_bearer without scopes", change: func(o *Options) {
			o.OAuth = upstream.OAuthOptions{Grant: upstream.GrantJWTBearer, TokenURL: "https://idp.example/token", ClientID: "c", ClientSecretFile: "/nonexistent"}
		}, want: "[0].oauth.scopes: required"},
		{name: "header value and file", change: func(o *Options) {
			o.Headers = []upstream.NamedValue{{Name: "X-Key", Value: "a", ValueFile: "/f"}}
		}, want: "[0].headers[0]:"},
		{name: "negative max_response_bytes", change: func(o *Options) { o.MaxResponseBytes = -1 }, want: "[0].max_response_bytes:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.change(&o)
			err := Validate([]Options{o}, nil, nil)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestValidateClashes(t *testing.T) {
	list := []Options{{Name: "gh", BaseURL: "https://a.example"}, {Name: "gh", BaseURL: "https://b.example"}, {Name: "api", BaseURL: "https://c.example"}}
	err := Validate(list, map[string]string{"api": "an upstream"}, map[string]string{"api": "an upstream"})
	for _, want := range []string{"[1].name: \"gh\" is also the name of http_apis[0]", "[1].prefix:", "[2].name: \"api\" is also the name of an upstream", "[2].prefix:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	allowed := []string{"api.example", "other.example:8443", "[::1]"}
	tests := []struct {
		scheme, host string
		want         bool
	}{
		{"https", "api.example", true},
		{"https", "API.example", true},
		{"https", "api.example:443", true},
		{"http", "api.example:80", true},
		{"https", "api.example:8443", false},
		{"https", "other.example:8443", true},
		{"https", "other.example", false},
		{"https", "evil.example", false},
		{"ftp", "api.example", false},
		{"https", "api.example.evil.example", false},
		{"https", "[::1]", true},
		{"https", "[::1]:443", true},
		{"https", "[::1]:8443", false},
	}
	for _, tt := range tests {
		if got := hostAllowed(allowed, tt.scheme, tt.host); got != tt.want {
			t.Errorf("hostAllowed(%s://%s) = %v, want %v", tt.scheme, tt.host, got, tt.want)
		}
	}
}
