package auth

import (
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Options is the `auth:` section of the configuration. The zero value means
// "auth off"; call [Options.Defaults] then [Options.Validate] before use.
type Options struct {
	// Resource is the public URL of the MCP endpoint, such as
	// https://mcp.example.com/mcp. It is the "resource" of the Protected
	// Resource Metadata and always an accepted token audience. Required when
	// auth is on.
	Resource string `yaml:"resource"`
	// ResourceName is the human-readable name in the metadata. Default "Portcullis".
	ResourceName string `yaml:"resource_name"`
	// Issuers are the trusted token issuers (JWT access tokens).
	Issuers []IssuerOptions `yaml:"issuers"`
	// Introspection, when its URL is set, verifies opaque (non-JWT) tokens
	// with RFC 7662.
	Introspection IntrospectionOptions `yaml:"introspection"`
	// ScopesSupported is advertised in the metadata. The challenges name
	// a required scope as this list spells it: where an IdP has clients
	// ask for a prefixed scope that its tokens carry unprefixed (Entra
	// ID: api://APP/mcp.tools, scp "mcp.tools"), list the prefixed form
	// here and the unprefixed one in RequiredScopes and the policy.
	ScopesSupported []string `yaml:"scopes_supported"`
	// RequiredScopes are needed for any call to the endpoint.
	RequiredScopes []string `yaml:"required_scopes"`
	// RolesClaims name the claims holding roles or groups. Default ["roles", "groups"].
	RolesClaims []string `yaml:"roles_claims"`
	// ClockSkew is the tolerance on exp, nbf and iat. Default 30s, at most 5m.
	ClockSkew time.Duration `yaml:"clock_skew"`
	// CacheSize bounds the verified-token cache. Default 10000.
	CacheSize int `yaml:"cache_size" schema:"min=0"`
	// CacheTTL is the longest a verification is reused (never beyond the
	// token's exp). Default 5m.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// JWKSRefreshInterval is the least time between two key-set fetches
	// caused by unknown key ids, so made-up kids cannot hammer the IdP.
	// Default 10s.
	JWKSRefreshInterval time.Duration `yaml:"jwks_refresh_interval"`
	// JWKSMaxAge is how long fetched keys are trusted before they are
	// fetched again in the background (requests never wait for it), so a
	// key the IdP removes stops verifying within about this long. When the
	// IdP is down the keys held are kept. Default 15m.
	JWKSMaxAge time.Duration `yaml:"jwks_max_age"`
	// Policy lists per-tool requirements: for each tool it names, the
	// scopes or roles a caller needs to call it.
	Policy []ToolPolicy `yaml:"policy"`
	// InsecureAllowUnauthenticated serves the endpoint with no auth on a
	// non-loopback address. The server logs a warning at start when it is on.
	InsecureAllowUnauthenticated bool `yaml:"insecure_allow_unauthenticated"`
	// AllowStdioAllTools lets `portcullis stdio` list and call the tools
	// that Policy guards. stdio carries no token, so its caller is no
	// principal and, with this off (the default), those tools are hidden
	// there as from any caller without a token. Turn it on only where
	// whoever can start the process may use every tool. The server logs a
	// warning at start when it is on.
	AllowStdioAllTools bool `yaml:"allow_stdio_all_tools"`
}

// Deps are what the verifier and the middleware need from the process,
// besides their [Options]. Every field may be left zero.
type Deps struct {
	// HTTPClient fetches discovery documents and keys and calls the
	// introspection endpoint. Nil means a client with timeouts.
	HTTPClient *http.Client
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Logger receives what the verifier notices about the issuers (one
	// warning when fetching an issuer's keys starts failing, one line when
	// it works again) and the middleware's denials (at Info, with the
	// reason, never the token). Nil means no logging.
	Logger *slog.Logger
	// Hook receives every authentication outcome, for metrics. Nil means
	// none.
	Hook Hook
}

// IssuerOptions describes one trusted issuer.
type IssuerOptions struct {
	// Issuer is the exact "iss" value. It must be https unless AllowHTTP is
	// set or its host is loopback.
	Issuer string `yaml:"issuer" schema:"required,url"`
	// JWKSURL is the key set; when empty it is found by OpenID Connect
	// discovery, then RFC 8414 authorization server metadata.
	JWKSURL string `yaml:"jwks_url" schema:"url"`
	// Audiences are accepted "aud" values besides Options.Resource (for
	// example the application id Entra ID puts in v1 tokens).
	Audiences []string `yaml:"audiences"`
	// Algorithms is the signing-algorithm allow-list. Default RS256, ES256,
	// PS256. "none" and HMAC (HS*) are refused.
	Algorithms []string `yaml:"algorithms" schema:"enum=RS256|RS384|RS512|ES256|ES384|ES512|PS256|PS384|PS512|EdDSA"`
	// RequiredClaims must be present in every token of this issuer.
	RequiredClaims []string `yaml:"required_claims"`
	// AllowHTTP permits an http:// issuer (and JWKS URL) on a non-loopback
	// host: for tests and labs only; the server warns when it is on.
	AllowHTTP bool `yaml:"allow_http"`
	// AllowUntypedAccessTokens accepts this issuer's JWTs whose JOSE header
	// "typ" is missing or the generic "JWT", for IdPs that do not type
	// their access tokens "at+jwt" (RFC 9068). Off, such tokens are
	// refused, since nothing then tells an access token from an ID token
	// the same issuer signed. On, tokens with the marks of an OpenID
	// Connect ID token (a nonce, at_hash, c_hash or s_hash claim, or
	// Keycloak's "typ": "ID") are still refused, and so is any other typ.
	// The server warns when it is on.
	AllowUntypedAccessTokens bool `yaml:"allow_untyped_access_tokens"`

	// KeySet, when set, is used instead of fetching the JWKS (the dev
	// issuer's in-process keys, tests). Not configurable from YAML.
	KeySet oidc.KeySet `yaml:"-"`
}

// IntrospectionOptions configures RFC 7662 token introspection.
type IntrospectionOptions struct {
	// URL is the introspection endpoint; empty means opaque tokens are refused.
	URL string `yaml:"url" schema:"url"`
	// ClientID is this server's own client at the authorization server.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client secret (secrets never live in the
	// config file itself).
	ClientSecretFile string `yaml:"client_secret_file"`
	// AuthMethod is "client_secret_basic" (default) or "bearer": a token got
	// with client_credentials from TokenURL.
	AuthMethod string `yaml:"auth_method" schema:"enum=client_secret_basic|bearer"`
	// TokenURL is the token endpoint for AuthMethod "bearer".
	TokenURL string `yaml:"token_url" schema:"url"`
	// Timeout bounds one introspection call. Default 5s.
	Timeout time.Duration `yaml:"timeout"`
	// Issuer is the authorization server's issuer identifier. When set, an
	// "iss" in an introspection response must equal it, and introspected
	// principals carry it as their issuer. When empty, their issuer is URL
	// (whatever "iss" the response names), so an introspection response
	// can never take on the identity of a JWT issuer's subjects.
	Issuer string `yaml:"issuer"`
	// Audiences are accepted "aud" values besides Options.Resource and the
	// issuers' Audiences, which introspected tokens are also held to.
	Audiences []string `yaml:"audiences"`
	// NegativeCacheTTL is how long a token the introspection endpoint's
	// answer refused (active false; or active but expired, for another
	// audience or issuer, or without a subject) stays refused without
	// another call, so that sending the same bad token again costs the
	// authorization server nothing. Such answers are kept in a cache of
	// their own, keyed by the token's SHA-256 and bounded by auth.cache_size,
	// so that they never push verified tokens out. A token that becomes
	// active within the TTL (an authorization server whose replicas lag)
	// is refused until it ends, hence a short default. Failed calls and
	// not-yet-valid tokens are never remembered. Zero means 30s; at most
	// 10m.
	NegativeCacheTTL time.Duration `yaml:"negative_cache_ttl"`
	// MaxCallsPerSecond bounds the introspection calls made for tokens in
	// neither cache, so that a flood of made-up opaque tokens cannot turn
	// into a flood of calls to the authorization server. Over it (after
	// MaxCallsBurst), a request with such a token is refused with 503 and
	// Retry-After, never accepted, and counted with reason
	// introspection_throttled; tokens already verified, or already
	// refused, are answered from their cache as usual. The bound is per
	// replica. Zero means 50.
	MaxCallsPerSecond float64 `yaml:"max_calls_per_second" schema:"min=0"`
	// MaxCallsBurst is how many introspection calls may go out at once
	// above MaxCallsPerSecond. Zero means 100.
	MaxCallsBurst int `yaml:"max_calls_burst" schema:"min=0"`
	// AllowMissingAudience accepts an active introspection response with
	// no "aud" at all (RFC 7662 makes it optional). Off, such a token is
	// refused: without an audience nothing says it was issued for this
	// resource rather than for another service of the same authorization
	// server. Only for authorization servers that never return "aud"; the
	// server warns when it is on.
	AllowMissingAudience bool `yaml:"allow_missing_audience"`
}

// Authentication methods for the introspection endpoint.
const (
	AuthMethodClientSecretBasic = "client_secret_basic"
	AuthMethodBearer            = "bearer"
)

// Defaults and limits.
const (
	DefaultResourceName        = "Portcullis"
	DefaultClockSkew           = 30 * time.Second
	MaxClockSkew               = 5 * time.Minute
	DefaultCacheSize           = 10000
	DefaultCacheTTL            = 5 * time.Minute
	DefaultJWKSRefreshInterval = 10 * time.Second
	DefaultJWKSMaxAge          = 15 * time.Minute
	DefaultIntrospectTimeout   = 5 * time.Second
	// DefaultNegativeCacheTTL, DefaultIntrospectionRate and
	// DefaultIntrospectionBurst are the defaults of
	// IntrospectionOptions.NegativeCacheTTL, MaxCallsPerSecond and
	// MaxCallsBurst; MaxNegativeCacheTTL is the longest NegativeCacheTTL.
	DefaultNegativeCacheTTL   = 30 * time.Second
	MaxNegativeCacheTTL       = 10 * time.Minute
	DefaultIntrospectionRate  = 50
	DefaultIntrospectionBurst = 100
	// MaxTokenSize is the largest bearer token accepted (bytes).
	MaxTokenSize = 8 << 10
)

// DefaultAlgorithms is the signing-algorithm allow-list when an issuer lists none.
var DefaultAlgorithms = []string{"RS256", "ES256", "PS256"}

var asymmetricAlgs = []string{"RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "EdDSA"}

// Defaults fills every unset field with its documented default.
func (o *Options) Defaults() {
	if o.ResourceName == "" {
		o.ResourceName = DefaultResourceName
	}
	if len(o.RolesClaims) == 0 {
		o.RolesClaims = []string{"roles", "groups"}
	}
	if o.ClockSkew == 0 {
		o.ClockSkew = DefaultClockSkew
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.JWKSRefreshInterval == 0 {
		o.JWKSRefreshInterval = DefaultJWKSRefreshInterval
	}
	if o.JWKSMaxAge == 0 {
		o.JWKSMaxAge = DefaultJWKSMaxAge
	}
	for i := range o.Issuers {
		if len(o.Issuers[i].Algorithms) == 0 {
			o.Issuers[i].Algorithms = slices.Clone(DefaultAlgorithms)
		}
	}
	if o.Introspection.URL != "" {
		if o.Introspection.AuthMethod == "" {
			o.Introspection.AuthMethod = AuthMethodClientSecretBasic
		}
		if o.Introspection.Timeout == 0 {
			o.Introspection.Timeout = DefaultIntrospectTimeout
		}
		if o.Introspection.NegativeCacheTTL == 0 {
			o.Introspection.NegativeCacheTTL = DefaultNegativeCacheTTL
		}
		if o.Introspection.MaxCallsPerSecond == 0 {
			o.Introspection.MaxCallsPerSecond = DefaultIntrospectionRate
		}
		if o.Introspection.MaxCallsBurst == 0 {
			o.Introspection.MaxCallsBurst = DefaultIntrospectionBurst
		}
	}
}

// Enabled reports whether any issuer or introspection is configured.
func (o *Options) Enabled() bool {
	return len(o.Issuers) > 0 || o.Introspection.URL != ""
}

// AdvertisedScopes returns scopes as a client must ask the authorization
// server for them, for a WWW-Authenticate challenge: each scope as
// ScopesSupported lists it, or, when it is not listed itself, the one
// listed scope that ends in "/" and the scope (Entra ID's
// api://APP/scope). Other scopes are returned as they are.
func (o Options) AdvertisedScopes(scopes []string) []string {
	out := make([]string, 0, len(scopes))
	for _, s := range scopes {
		out = append(out, o.advertisedScope(s))
	}
	return out
}

func (o Options) advertisedScope(s string) string {
	if slices.Contains(o.ScopesSupported, s) {
		return s
	}
	match := ""
	for _, sup := range o.ScopesSupported {
		if strings.HasSuffix(sup, "/"+s) {
			if match != "" {
				return s // ambiguous: the token's form is all we know
			}
			match = sup
		}
	}
	if match == "" {
		return s
	}
	return match
}
