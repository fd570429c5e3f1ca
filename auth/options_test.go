package auth

import (
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	valid := func() Options {
		o := Options{Resource: testResource, Issuers: []IssuerOptions{{Issuer: "https://idp.example.com"}}}
		o.Defaults()
		return o
	}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   []string // substrings, all expected; empty = valid
	}{
		{name: "valid", mutate: func(*Options) {}},
		{name: "auth off is valid", mutate: func(o *Options) { *o = Options{} }},
		{name: "loopback http issuer", mutate: func(o *Options) { o.Issuers[0].Issuer = "http://127.0.0.1:9000" }},
		{name: "allow_http issuer", mutate: func(o *Options) { o.Issuers[0].Issuer = "http://idp.lab"; o.Issuers[0].AllowHTTP = true }},
		{name: "no resource", mutate: func(o *Options) { o.Resource = "" }, want: []string{"resource: required when auth is on"}},
		{name: "http issuer", mutate: func(o *Options) { o.Issuers[0].Issuer = "http://idp.example.com" }, want: []string{"issuers[0].issuer: must be https"}},
		{name: "empty issuer", mutate: func(o *Options) { o.Issuers[0].Issuer = "" }, want: []string{"issuers[0].issuer: required"}},
		{name: "duplicate issuer", mutate: func(o *Options) { o.Issuers = append(o.Issuers, o.Issuers[0]) }, want: []string{"issuers[1].issuer: duplicate"}},
		{name: "alg none", mutate: func(o *Options) { o.Issuers[0].Algorithms = []string{"none"} }, want: []string{`issuers[0].algorithms[0]: "none" is never allowed`}},
		{name: "HS256", mutate: func(o *Options) { o.Issuers[0].Algorithms = []string{"RS256", "HS256"} }, want: []string{"issuers[0].algorithms[1]", "HMAC"}},
		{name: "unknown alg", mutate: func(o *Options) { o.Issuers[0].Algorithms = []string{"XX1"} }, want: []string{"unknown algorithm"}},
		{name: "empty audience", mutate: func(o *Options) { o.Issuers[0].Audiences = []string{""} }, want: []string{"issuers[0].audiences[0]: empty audience"}},
		{name: "skew too large", mutate: func(o *Options) { o.ClockSkew = 10 * time.Minute }, want: []string{"clock_skew:"}},
		{
			name: "introspection incomplete",
			mutate: func(o *Options) {
				o.Introspection = IntrospectionOptions{URL: "https://as.example.com/introspect", AuthMethod: "bearer"}
			},
			want: []string{"introspection.client_id: required", "introspection.client_secret_file: required", "introspection.token_url: required"},
		},
		{name: "bad auth method", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{URL: "https://as/i", ClientID: "c", ClientSecretFile: "/s", AuthMethod: "post"}
		}, want: []string{"introspection.auth_method"}},
		{name: "introspection issuer and audiences", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{URL: "https://as/i", ClientID: "c", ClientSecretFile: "/s",
				Issuer: "http://as.example.com", Audiences: []string{" "}}
		}, want: []string{"introspection.issuer: must be https", "introspection.audiences[0]: empty audience"}},
		{name: "introspection knob without introspection", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{AllowMissingAudience: true}
		}, want: []string{"introspection.url: required"}},
		{name: "introspection bounds", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{URL: "https://as/i", ClientID: "c", ClientSecretFile: "/s",
				NegativeCacheTTL: 11 * time.Minute, MaxCallsPerSecond: -1, MaxCallsBurst: -1}
		}, want: []string{"introspection.negative_cache_ttl: must be between 0 and 10m0s", "introspection.max_calls_per_second: must be a number, 0 or more", "introspection.max_calls_burst: must not be negative"}},
		{name: "introspection negative TTL", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{URL: "https://as/i", ClientID: "c", ClientSecretFile: "/s", NegativeCacheTTL: -time.Second}
		}, want: []string{"introspection.negative_cache_ttl:"}},
		{name: "introspection bounds without introspection", mutate: func(o *Options) {
			o.Introspection = IntrospectionOptions{MaxCallsPerSecond: 10}
		}, want: []string{"introspection.url: required"}},
		{name: "policy problems", mutate: func(o *Options) {
			o.Policy = []ToolPolicy{{Tool: "a", Scopes: []string{"bad scope"}}, {Tool: "a"}, {Scopes: []string{"x"}}}
		}, want: []string{"policy[0].scopes[0]: invalid scope", "policy[1].tool: duplicate", "policy[2].tool: required"}},
		{name: "every problem at once", mutate: func(o *Options) {
			o.Resource = ""
			o.Issuers = append(o.Issuers, IssuerOptions{Issuer: "http://evil.example.com", Algorithms: []string{"none"}})
			o.ClockSkew = -1
		}, want: []string{"resource:", "issuers[1].issuer:", "issuers[1].algorithms[0]:", "clock_skew:"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid()
			tt.mutate(&o)
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate: want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	o := Options{Issuers: []IssuerOptions{{Issuer: "https://idp"}}, Introspection: IntrospectionOptions{URL: "https://as/i"}}
	o.Defaults()
	if o.ResourceName != "Portcullis" || o.ClockSkew != 30*time.Second || o.CacheSize != 10000 || o.CacheTTL != 5*time.Minute ||
		len(o.RolesClaims) != 2 || len(o.Issuers[0].Algorithms) != 3 || o.Introspection.AuthMethod != AuthMethodClientSecretBasic ||
		o.Introspection.Timeout != 5*time.Second || o.JWKSRefreshInterval != DefaultJWKSRefreshInterval ||
		o.Introspection.NegativeCacheTTL != 30*time.Second || o.Introspection.MaxCallsPerSecond != 50 || o.Introspection.MaxCallsBurst != 100 {
		t.Errorf("Defaults = %+v", o)
	}
	if !o.Enabled() || (&Options{}).Enabled() {
		t.Error("Enabled wrong")
	}
}
