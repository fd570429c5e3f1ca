package auth

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/loopback"
)

// Validate reports every problem at once, joined, each as "key.path: problem"
// relative to the auth section.
func (o *Options) Validate() error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if o.Enabled() {
		if o.Resource == "" {
			add("resource", "required when auth is on (the public URL of the MCP endpoint, e.g. https://mcp.example.com/mcp)")
		} else if err := checkURL(o.Resource, true); err != nil {
			add("resource", "%v", err)
		}
	} else if o.Resource != "" {
		if err := checkURL(o.Resource, true); err != nil {
			add("resource", "%v", err)
		}
	}
	if len(o.RequiredScopes) > 0 && !o.Enabled() {
		add("required_scopes", "set but no issuers or introspection are configured")
	}
	seen := map[string]bool{}
	for i, is := range o.Issuers {
		k := fmt.Sprintf("issuers[%d]", i)
		switch {
		case is.Issuer == "":
			add(k+".issuer", "required")
		default:
			if err := checkURL(is.Issuer, is.AllowHTTP); err != nil {
				add(k+".issuer", "%v", err)
			}
			if seen[is.Issuer] {
				add(k+".issuer", "duplicate issuer %q", is.Issuer)
			}
			seen[is.Issuer] = true
		}
		if is.JWKSURL != "" {
			if err := checkURL(is.JWKSURL, is.AllowHTTP); err != nil {
				add(k+".jwks_url", "%v", err)
			}
		}
		for j, a := range is.Audiences {
			if strings.TrimSpace(a) == "" {
				add(fmt.Sprintf("%s.audiences[%d]", k, j), "empty audience")
			}
		}
		for j, a := range is.Algorithms {
			kk := fmt.Sprintf("%s.algorithms[%d]", k, j)
			switch {
			case strings.EqualFold(a, "none"):
				add(kk, `"none" is never allowed`)
			case strings.HasPrefix(strings.ToUpper(a), "HS"):
				add(kk, "%q is an HMAC algorithm: refused (a resource server must not share a secret with the issuer, and HMAC with a public key is a known forgery)", a)
			case !slices.Contains(asymmetricAlgs, a):
				add(kk, "unknown algorithm %q (want one of %s)", a, strings.Join(asymmetricAlgs, ", "))
			}
		}
		for j, c := range is.RequiredClaims {
			if strings.TrimSpace(c) == "" {
				add(fmt.Sprintf("%s.required_claims[%d]", k, j), "empty claim name")
			}
		}
	}
	in := o.Introspection
	if in.URL != "" {
		if err := checkURL(in.URL, false); err != nil {
			add("introspection.url", "%v", err)
		}
		if in.ClientID == "" {
			add("introspection.client_id", "required with introspection.url")
		}
		if in.ClientSecretFile == "" {
			add("introspection.client_secret_file", "required with introspection.url")
		}
		switch in.AuthMethod {
		case "", AuthMethodClientSecretBasic:
		case AuthMethodBearer:
			if in.TokenURL == "" {
				add("introspection.token_url", "required with auth_method bearer")
			} else if err := checkURL(in.TokenURL, false); err != nil {
				add("introspection.token_url", "%v", err)
			}
		default:
			add("introspection.auth_method", "must be %q or %q, got %q", AuthMethodClientSecretBasic, AuthMethodBearer, in.AuthMethod)
		}
		if in.Timeout < 0 || in.Timeout > time.Minute {
			add("introspection.timeout", "must be between 0 and 1m, got %v", in.Timeout)
		}
		if in.NegativeCacheTTL < 0 || in.NegativeCacheTTL > MaxNegativeCacheTTL {
			add("introspection.negative_cache_ttl", "must be between 0 and %v, got %v", MaxNegativeCacheTTL, in.NegativeCacheTTL)
		}
		if in.MaxCallsPerSecond < 0 || math.IsNaN(in.MaxCallsPerSecond) || math.IsInf(in.MaxCallsPerSecond, 0) {
			add("introspection.max_calls_per_second", "must be a number, 0 or more, got %v", in.MaxCallsPerSecond)
		}
		if in.MaxCallsBurst < 0 {
			add("introspection.max_calls_burst", "must not be negative")
		}
		if in.Issuer != "" {
			if err := checkURL(in.Issuer, false); err != nil {
				add("introspection.issuer", "%v", err)
			}
		}
		for j, a := range in.Audiences {
			if strings.TrimSpace(a) == "" {
				add(fmt.Sprintf("introspection.audiences[%d]", j), "empty audience")
			}
		}
	} else if in.ClientID != "" || in.ClientSecretFile != "" || in.TokenURL != "" || in.Issuer != "" || len(in.Audiences) > 0 || in.AllowMissingAudience ||
		in.NegativeCacheTTL != 0 || in.MaxCallsPerSecond != 0 || in.MaxCallsBurst != 0 {
		add("introspection.url", "required when other introspection settings are set")
	}
	if o.ClockSkew < 0 || o.ClockSkew > MaxClockSkew {
		add("clock_skew", "must be between 0 and %v, got %v", MaxClockSkew, o.ClockSkew)
	}
	if o.CacheSize < 0 {
		add("cache_size", "must not be negative")
	}
	if o.CacheTTL < 0 || o.CacheTTL > time.Hour {
		add("cache_ttl", "must be between 0 and 1h, got %v", o.CacheTTL)
	}
	if o.JWKSRefreshInterval < 0 {
		add("jwks_refresh_interval", "must not be negative")
	}
	if o.JWKSMaxAge < 0 {
		add("jwks_max_age", "must not be negative")
	} else if o.JWKSMaxAge > 0 && o.JWKSMaxAge < o.JWKSRefreshInterval {
		add("jwks_max_age", "%v is shorter than jwks_refresh_interval %v", o.JWKSMaxAge, o.JWKSRefreshInterval)
	}
	for i, c := range o.RolesClaims {
		if strings.TrimSpace(c) == "" {
			add(fmt.Sprintf("roles_claims[%d]", i), "empty claim name")
		}
	}
	for i, s := range o.RequiredScopes {
		if !validScope(s) {
			add(fmt.Sprintf("required_scopes[%d]", i), "invalid scope %q", s)
		}
	}
	for i, s := range o.ScopesSupported {
		if !validScope(s) {
			add(fmt.Sprintf("scopes_supported[%d]", i), "invalid scope %q", s)
		}
	}
	tools := map[string]bool{}
	rules := map[string]string{}
	for i, p := range o.Policy {
		k := fmt.Sprintf("policy[%d]", i)
		if p.Tool == "" {
			add(k+".tool", "required")
		} else if tools[p.Tool] {
			add(k+".tool", "duplicate tool %q", p.Tool)
		}
		tools[p.Tool] = true
		if p.IsPattern() {
			if _, err := path.Match(p.Tool, ""); err != nil {
				add(k+".tool", "%q: a malformed pattern: %v", p.Tool, err)
			}
			if len(p.Scopes) > 0 || len(p.Roles) > 0 {
				add(k+".tool", "%q is a pattern: an entry that names tools by a pattern takes rules only (scopes and roles name one tool)", p.Tool)
			}
		}
		for j, r := range p.Rules {
			kk := fmt.Sprintf("%s.rules[%d]", k, j)
			switch {
			case r.Name == "":
				add(kk+".name", "required")
			case !validRuleName(r.Name):
				add(kk+".name", "%q: use letters, digits, '-', '_' and '.', at most %d", r.Name, MaxRuleName)
			case rules[r.Name] != "":
				add(kk+".name", "duplicate rule name %q (also %s)", r.Name, rules[r.Name])
			default:
				rules[r.Name] = kk
			}
		}
		for j, s := range p.Scopes {
			if !validScope(s) {
				add(fmt.Sprintf("%s.scopes[%d]", k, j), "invalid scope %q", s)
			}
		}
		for j, r := range p.Roles {
			if strings.TrimSpace(r) == "" {
				add(fmt.Sprintf("%s.roles[%d]", k, j), "empty role")
			}
		}
	}
	return errors.Join(errs...)
}

// validScope reports whether s is an RFC 6749 scope-token (no spaces, quotes
// or backslashes), so it can be placed in a WWW-Authenticate header.
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return false
		}
	}
	return true
}

// checkURL checks an absolute https URL (http only on loopback hosts, or
// anywhere when allowHTTP), with no fragment.
func checkURL(raw string, allowHTTP bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("not a URL: %v", err)
	}
	if u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("must be an absolute https URL, got %q", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("must not have a fragment")
	}
	if u.Scheme == "http" && !allowHTTP && !isLoopbackURLHost(u.Hostname()) {
		return fmt.Errorf("must be https (http is allowed only on a loopback host, or with allow_http for tests and labs), got %q", raw)
	}
	return nil
}

// isLoopbackURLHost reports whether host (a name or IP, without port) is
// "localhost", a name under .localhost (which RFC 6761 reserves for
// loopback), or a loopback address. Unlike [loopback.Host] it accepts
// *.localhost: it decides whether an issuer or resource URL may be plain
// http, not whether a request may have come from a rebound name.
func isLoopbackURLHost(host string) bool {
	return loopback.Host(host) || strings.HasSuffix(strings.ToLower(host), ".localhost")
}
