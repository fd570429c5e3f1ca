package authserver

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
)

// Defaults of [Options].
const (
	DefaultAccessTokenTTL  = 10 * time.Minute
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour
	DefaultCodeTTL         = time.Minute
	DefaultLoginTTL        = 10 * time.Minute
	DefaultConsentTTL      = 90 * 24 * time.Hour
	// DefaultMaxAssertionLifetime is the longest an enterprise IdP's
	// ID-JAG may be valid for (exp − iat) unless configured.
	DefaultMaxAssertionLifetime = 5 * time.Minute
)

// Options is the authorization_server section: Portcullis as the OAuth 2.1
// authorization server its Protected Resource Metadata names, signing users
// in at the organisation's identity provider. Off unless Enabled.
type Options struct {
	// Enabled turns the authorization server on. With it off nothing of
	// this section is used and the endpoints are not served.
	Enabled bool `yaml:"enabled"`
	// Issuer is the authorization server's issuer identifier, an https URL
	// without query or fragment (http only for a loopback host). Default:
	// the origin of auth.resource (https://mcp.example.com for
	// https://mcp.example.com/mcp). Its endpoints are served under
	// /oauth/ on the MCP listener, its metadata at
	// /.well-known/oauth-authorization-server.
	Issuer string `yaml:"issuer" schema:"url"`
	// KeysFile is a JSON Web Key Set of private EC P-256 keys (ES256) that
	// sign the access tokens, each with a "kid": the first signs, the others
	// stay published and accepted (rotation: add the new key first, remove
	// the old one after the longest token lifetime). Secrets of codes and
	// refresh tokens are derived from the same keys, so every replica must
	// mount the same file. Empty: a key made at start, fine for one replica
	// and lost on restart (every token and code it issued stops working).
	KeysFile string `yaml:"keys_file"`
	// AccessTokenTTL is the lifetime of an access token. Default 10m. Access
	// tokens are verified without a lookup, so a revoked grant's last token
	// lives until it expires: keep this short.
	AccessTokenTTL time.Duration `yaml:"access_token_ttl"`
	// RefreshTokenTTL is the lifetime of a refresh token family. Default
	// 720h (30 days). Refresh tokens rotate on every use; presenting a used
	// one revokes the family.
	RefreshTokenTTL time.Duration `yaml:"refresh_token_ttl"`
	// RefreshTokens says when a grant gets a refresh token: always (the
	// default), or offline_access: only when the client asks for the
	// offline_access scope (SEP-2207), which the metadata lists either way.
	// A client without a refresh token signs the user in again when its
	// access token expires; the TypeScript SDK v1 answers a step-up 403 by
	// refreshing when it holds a refresh token, which cannot widen the
	// scope (fixed in v2), so with such clients offline_access lets
	// step-up work.
	RefreshTokens string `yaml:"refresh_tokens" schema:"enum=always|offline_access"`
	// CodeTTL is the lifetime of an authorization code. Default 1m.
	CodeTTL time.Duration `yaml:"code_ttl"`
	// LoginTTL is how long a user has to sign in at the identity provider
	// and answer the consent page. Default 10m.
	LoginTTL time.Duration `yaml:"login_ttl"`
	// IdP is the identity provider users sign in at.
	IdP IdPOptions `yaml:"idp"`
	// Clients are the pre-registered clients (Claude's connector, VS Code,
	// an internal agent…).
	Clients []ClientOptions `yaml:"clients"`
	// Consent configures the consent page.
	Consent ConsentOptions `yaml:"consent"`
	// Scopes restrict scopes to users of IdP groups: a scope listed here is
	// granted only to a user in one of its groups; any other scope the
	// server issues is granted to every user who consents. A scope is what
	// a user lets a client do on their behalf, so without a rule any user
	// can let a client have any scope: guard a tool that only some users
	// may call with a rule here, or with roles in auth.policy.
	Scopes []ScopeRule `yaml:"scopes"`
	// Rate bounds requests per client address to the endpoints.
	Rate RateOptions `yaml:"rate"`
	// Registration configures dynamic client registration (RFC 7591) at
	// /oauth/register.
	Registration RegistrationOptions `yaml:"registration"`
	// ClientMetadataDocuments configures clients whose client_id is the
	// https URL of their metadata document (Client ID Metadata Documents,
	// the registration MCP 2025-11-25 and later prefer).
	ClientMetadataDocuments CIMDOptions `yaml:"client_metadata_documents"`
	// EnterpriseIdPs are the enterprise identity providers whose Identity
	// Assertion JWT Authorization Grants (ID-JAG, the MCP
	// Enterprise-Managed Authorization extension) the token endpoint
	// exchanges for access tokens with no browser round trip (grant_type
	// urn:ietf:params:oauth:grant-type:jwt-bearer, the ID-JAG in
	// assertion, the client in client_id). An assertion is accepted when
	// its JOSE typ is oauth-id-jag+jwt, a key of the provider's JWKS
	// signed it (RS, PS, ES or EdDSA), its aud is exactly this server's
	// issuer, its client_id is the requesting client, its resource (if
	// any) is auth.resource or a servers[].resource, it is within exp,
	// and its jti was never accepted before; cnf (proof of possession)
	// and authorization_details are refused. The token is for the
	// assertion's resource (else the token request's, else
	// auth.resource), its user the assertion's sub, email and groups, its scopes those
	// requested (each granted by the assertion's scope claim, if it has
	// one) or else the assertion's, all of them scopes of the server the
	// token is for (auth.scopes_supported and its required and policy
	// scopes). No refresh
	// token: the client gets a new assertion from its IdP. Clients here
	// are public, identified by client_id without a secret, so a stolen
	// assertion is worth one token until its exp. Empty (default): the
	// grant is off.
	EnterpriseIdPs []EnterpriseIdPOptions `yaml:"enterprise_idps"`
}

// EnterpriseIdPOptions describe an enterprise identity provider trusted to
// issue ID-JAGs (draft-ietf-oauth-identity-assertion-authz-grant) for
// this server; [Options.EnterpriseIdPs] says what is checked.
type EnterpriseIdPOptions struct {
	// Issuer is the provider's issuer identifier, exactly as its ID-JAGs
	// carry it in iss (for Okta: https://ACME.okta.com). Tokens carry the
	// assertion's sub as is, the subjects of users signed in at idp too:
	// trust a provider whose subjects name the same users as idp's
	// (usually it is the same provider).
	Issuer string `yaml:"issuer" schema:"required,url"`
	// JWKSURL is the provider's JSON Web Key Set. Empty (default): the
	// jwks_uri of its discovery document
	// (ISSUER/.well-known/openid-configuration, else its RFC 8414
	// authorization server metadata), fetched on first use. The keys are
	// fetched again when an assertion names a key they lack (at most
	// every 10s) and in the background once they are 15m old, as the
	// defaults of auth.jwks_refresh_interval and auth.jwks_max_age have
	// it for auth.issuers.
	JWKSURL string `yaml:"jwks_url" schema:"url"`
	// Clients, when set, are the only clients (client_id) this provider's
	// assertions are accepted for: pre-registered clients or Client ID
	// Metadata Document URLs. Empty: any client of this server.
	Clients []string `yaml:"clients"`
	// GroupsClaims name the assertion claims whose values become the
	// user's groups, which auth.policy roles match. Default: groups,
	// roles.
	GroupsClaims []string `yaml:"groups_claims"`
	// MaxAssertionLifetime is the longest an assertion may be valid for,
	// from iat to exp. Default 5m; at most 1h. Every accepted jti is
	// remembered until its exp, so a replay is refused.
	MaxAssertionLifetime time.Duration `yaml:"max_assertion_lifetime"`
	// AllowHTTP accepts an http issuer and jwks_url on a loopback host
	// (tests). Off by default.
	AllowHTTP bool `yaml:"allow_http"`
}

// ScopeRule names the IdP groups a scope is granted to.
type ScopeRule struct {
	// Scope is the scope.
	Scope string `yaml:"scope" schema:"required"`
	// Groups are the IdP groups (idp.groups_claims) whose users may be
	// granted the scope.
	Groups []string `yaml:"groups"`
}

// Registration modes.
const (
	RegistrationOpen  = "open"
	RegistrationToken = "token"
	RegistrationOff   = "off"
)

// RegistrationOptions configure dynamic client registration. Registered
// clients are public clients (PKCE, no secret); they still need a user to
// sign in and consent, and the consent page says that their name is
// self-declared.
type RegistrationOptions struct {
	// Mode is open (anyone may register: what most MCP clients expect),
	// token (only with the initial access token of
	// initial_access_token_file, RFC 7591 §3) or off. Default open.
	Mode string `yaml:"mode" schema:"enum=open|token|off"`
	// InitialAccessTokenFile holds the token mode token requires.
	InitialAccessTokenFile string `yaml:"initial_access_token_file"`
	// TTL is how long a registration lives after it was last used to sign
	// in. Default 720h (30 days).
	TTL time.Duration `yaml:"ttl"`
	// PerMinute caps registrations per replica, across all addresses.
	// Default 30.
	PerMinute int `yaml:"per_minute" schema:"min=0"`
}

// CIMDOptions configure Client ID Metadata Documents.
type CIMDOptions struct {
	// Mode is on (default) or off.
	Mode string `yaml:"mode" schema:"enum=on|off"`
	// The fetch's caps and cache: documents are fetched over https with
	// size and time caps, never from private, loopback or link-local
	// addresses, without following redirects, and kept per their
	// Cache-Control (in Redis when configured, so replicas share them).
	clientreg.FetchOptions `yaml:",inline"`
}

// IdPOptions configure the OpenID Connect provider users sign in at.
// Portcullis is a confidential client there, with one redirect URI:
// ISSUER/oauth/callback.
type IdPOptions struct {
	// Preset applies the known quirks of a provider: generic (default),
	// entra, okta, google, keycloak. See docs/authorization-server.md.
	Preset string `yaml:"preset" schema:"enum=generic|entra|okta|google|keycloak"`
	// Issuer is the provider's issuer URL (its discovery document is
	// ISSUER/.well-known/openid-configuration). For Entra ID:
	// https://login.microsoftonline.com/TENANT/v2.0.
	Issuer string `yaml:"issuer" schema:"url"`
	// ClientID is Portcullis's client id at the provider.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile is a file holding Portcullis's client secret at the
	// provider (a mounted Secret).
	ClientSecretFile string `yaml:"client_secret_file"`
	// Scopes are requested at the provider. Default: openid email profile
	// (and what the preset adds).
	Scopes []string `yaml:"scopes"`
	// GroupsClaims name the ID token claims whose values become the
	// user's groups, which auth.policy roles match. Default: the preset's
	// (groups, roles; Keycloak: realm_access.roles).
	GroupsClaims []string `yaml:"groups_claims"`
	// HostedDomains, when set, are the only Google Workspace domains (the
	// ID token's hd claim) allowed to sign in. Required with preset google:
	// without it any Google account could sign in.
	HostedDomains []string `yaml:"hosted_domains"`
	// AllowedEmailDomains, when set, are the only e-mail domains allowed to
	// sign in (the ID token's email, which must be verified where the
	// provider says so).
	AllowedEmailDomains []string `yaml:"allowed_email_domains"`
	// AllowHTTP accepts an http issuer on a loopback host (tests). Off by
	// default.
	AllowHTTP bool `yaml:"allow_http"`
}

// ClientOptions describe a pre-registered client: a public client using
// PKCE, which has no secret.
type ClientOptions struct {
	// ClientID is the client's identifier.
	ClientID string `yaml:"client_id" schema:"required"`
	// Name is shown on the consent page.
	Name string `yaml:"name"`
	// RedirectURIs are matched exactly; an http://127.0.0.1 or
	// http://[::1] one matches on any port (RFC 8252).
	RedirectURIs []string `yaml:"redirect_uris"`
}

// ConsentOptions configure the consent page.
type ConsentOptions struct {
	// RememberFor is how long a user's approval of a client is
	// remembered, so that the next sign-in of that client skips the page.
	// Default 2160h (90 days); a negative value asks every time.
	RememberFor time.Duration `yaml:"remember_for"`
}

// Defaults fills the zero values. resource is auth.resource.
func (o *Options) Defaults(resource string) {
	if o.Issuer == "" && resource != "" {
		if u, err := url.Parse(resource); err == nil && u.Host != "" {
			o.Issuer = u.Scheme + "://" + u.Host
		}
	}
	o.Issuer = strings.TrimSuffix(o.Issuer, "/")
	if o.AccessTokenTTL == 0 {
		o.AccessTokenTTL = DefaultAccessTokenTTL
	}
	if o.RefreshTokenTTL == 0 {
		o.RefreshTokenTTL = DefaultRefreshTokenTTL
	}
	if o.RefreshTokens == "" {
		o.RefreshTokens = "always"
	}
	if o.CodeTTL == 0 {
		o.CodeTTL = DefaultCodeTTL
	}
	if o.LoginTTL == 0 {
		o.LoginTTL = DefaultLoginTTL
	}
	if o.Consent.RememberFor == 0 {
		o.Consent.RememberFor = DefaultConsentTTL
	}
	o.Rate.defaults()
	if o.Registration.Mode == "" {
		o.Registration.Mode = RegistrationOpen
	}
	if o.Registration.TTL == 0 {
		o.Registration.TTL = 30 * 24 * time.Hour
	}
	if o.Registration.PerMinute == 0 {
		o.Registration.PerMinute = 30
	}
	if o.ClientMetadataDocuments.Mode == "" {
		o.ClientMetadataDocuments.Mode = "on"
	}
	if o.IdP.Preset == "" {
		o.IdP.Preset = "generic"
	}
	for i := range o.EnterpriseIdPs {
		if o.EnterpriseIdPs[i].MaxAssertionLifetime == 0 {
			o.EnterpriseIdPs[i].MaxAssertionLifetime = DefaultMaxAssertionLifetime
		}
	}
}

// scopeOfflineAccess asks for a refresh token (SEP-2207).
const scopeOfflineAccess = "offline_access"

// RateOptions bound what one client address may ask of the endpoints that
// create state (authorize, token, register, revoke), before any client is
// known. Per replica.
type RateOptions struct {
	// PerSecond is the sustained rate per client address. Default 5.
	// Behind a load balancer that does not preserve client addresses,
	// every request comes from its address: raise this accordingly.
	PerSecond float64 `yaml:"per_second" schema:"min=0"`
	// Burst is how many requests an address may make at once. Default 20.
	Burst int `yaml:"burst" schema:"min=0"`
}

func (o *RateOptions) defaults() {
	if o.PerSecond == 0 {
		o.PerSecond = 5
	}
	if o.Burst == 0 {
		o.Burst = 20
	}
}

// Resource is an MCP server of this Portcullis that the authorization
// server issues tokens for: the root server at /mcp or a virtual server
// (servers:). A sign-in is for one of them, named by the client's RFC 8707
// resource parameter, and every code, access token and refresh token of
// that sign-in carries its URL, and only its URL, as the audience.
type Resource struct {
	// URL is the resource identifier and the tokens' audience:
	// auth.resource for the root server, servers[].resource for a virtual
	// one. Matched exactly.
	URL string
	// Name is the server's name (servers[].name; "root" for /mcp), in the
	// audit lines.
	Name string
	// Title is the server's human-readable name, which the consent page
	// shows next to its URL. Empty: Name.
	Title string
	// Scopes are the scopes of this server alone (its required scopes and
	// those its policy names), which a sign-in for it is offered besides
	// [Deps.Scopes].
	Scopes []string
}

// display is what the consent page calls r.
func (r Resource) display() string { return cmp.Or(r.Title, r.Name) }

// checkIssuer accepts an https URL without query or fragment, or an http
// one on a loopback host when allowHTTPLoopback.
func checkIssuer(raw string, allowHTTPLoopback bool) error {
	if err := checkFetchURL(raw, allowHTTPLoopback); err != nil {
		return err
	}
	if u, _ := url.Parse(raw); u.RawQuery != "" {
		return fmt.Errorf("%q must have no query or fragment", raw)
	}
	return nil
}

// checkRedirectURI accepts an absolute URL without fragment that is https,
// http on a loopback host, or a private-use scheme (RFC 8252 §7.1) that is
// not one a browser runs.
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return fmt.Errorf("%q is not an absolute URI", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q must have no fragment", raw)
	}
	switch s := strings.ToLower(u.Scheme); {
	case s == "https":
		if u.Host == "" {
			return fmt.Errorf("%q has no host", raw)
		}
	case s == "http":
		if !loopback.Host(u.Host) {
			return fmt.Errorf("%q: http only on a loopback host (127.0.0.1, [::1], localhost)", raw)
		}
	case slices.Contains([]string{"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"}, s):
		return fmt.Errorf("%q: scheme %s is not allowed", raw, s)
	case !strings.Contains(s, "."):
		return fmt.Errorf("%q: a private-use scheme must be a reverse domain name (com.example.app)", raw)
	}
	return nil
}

// checkFetchURL accepts an https URL without fragment, or an http one on
// a loopback host when allowHTTPLoopback.
func checkFetchURL(raw string, allowHTTPLoopback bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q must have no fragment", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTPLoopback && loopback.Host(u.Host):
	default:
		return fmt.Errorf("%q must be https (http only on a loopback host)", raw)
	}
	return nil
}
