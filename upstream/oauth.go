package upstream

import "github.com/portcullis-mcp/portcullis/internal/tokenexchange"

// Grants accepted in [OAuthOptions.Grant].
const (
	// GrantClientCredentials gets the upstream a token of Portcullis's own
	// (RFC 6749 section 4.4).
	GrantClientCredentials = "client_credentials"
	// GrantTokenExchange gets the upstream a token for each caller by
	// exchanging the caller's token for one whose audience is the
	// upstream (RFC 8693).
	GrantTokenExchange = "token_exchange"
	// GrantJWTBearer gets the upstream a token for each caller with the
	// RFC 7523 JWT bearer grant, the caller's token the assertion, at the
	// identity provider that issued it: Entra ID's on-behalf-of flow
	// (requested_token_use=on_behalf_of).
	GrantJWTBearer = "jwt_bearer"
	// GrantIDJAG gets the upstream a token for each caller by
	// enterprise-managed authorization: an Identity Assertion JWT
	// Authorization Grant for the caller from the identity provider
	// (RFC 8693, oauth.identity_provider), then the RFC 7523 JWT bearer
	// grant with it at the upstream's authorization server (token_url).
	GrantIDJAG = "id_jag"
	// GrantAuthorizationCode sends each caller's own connected account at
	// the upstream: a token the upstream's own authorization server issued
	// to Portcullis for that user, who connected it once (the connect
	// page). A caller who has not is asked to ([ConnectRequired]).
	GrantAuthorizationCode = "authorization_code"
)

// OAuthOptions configures how an http upstream gets its access token.
// With grant client_credentials (RFC 6749 section 4.4) the token is
// Portcullis's own. The other grants get a token for each caller, sent on
// that caller's own HTTP session (isolation per_principal): token_exchange
// exchanges the caller's token at token_url (RFC 8693) for one whose
// audience is the upstream; jwt_bearer presents it at token_url, the
// identity provider's, as the assertion of the RFC 7523 JWT bearer grant
// with requested_token_use=on_behalf_of (Entra ID's on-behalf-of flow);
// id_jag exchanges the caller's token at identity_provider.token_url for
// an Identity Assertion JWT Authorization Grant whose audience is the
// upstream's authorization server and resource the upstream, then
// presents that at token_url, the upstream's authorization server's, with
// the JWT bearer grant (enterprise-managed authorization). For a caller
// signed in through Portcullis's authorization server the caller's token
// is the identity provider's token kept from the sign-in: its access
// token, or for id_jag its ID token. The session that lists what the
// upstream offers uses a client-credentials token of the client at
// token_url. Tokens are cached and renewed before they expire; the
// caller's own token is never sent to the upstream. With
// authorization_code the token is the one of the account each caller
// connected at the upstream's own authorization server (issuer), and the
// listing session sends the headers alone.
type OAuthOptions struct {
	// Grant is client_credentials (the default), token_exchange,
	// jwt_bearer, id_jag or authorization_code (each user's connected
	// account).
	Grant string `yaml:"grant" schema:"enum=client_credentials|token_exchange|jwt_bearer|id_jag|authorization_code"`
	// TokenURL is the authorization server's token endpoint: with
	// jwt_bearer the identity provider's, with id_jag the upstream's
	// authorization server's. With authorization_code, optional:
	// discovered from the issuer.
	TokenURL string `yaml:"token_url" schema:"url"`
	// Issuer is the upstream's authorization server (authorization_code
	// only): its metadata gives the endpoints, and its authorization
	// responses must name it (RFC 9207). Empty: the one the upstream's
	// Protected Resource Metadata names.
	Issuer string `yaml:"issuer" schema:"url"`
	// AuthorizationURL is the authorization endpoint (authorization_code
	// only). Empty: from the issuer's metadata.
	AuthorizationURL string `yaml:"authorization_url" schema:"url"`
	// ClientID is Portcullis's client at the authorization server.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile is a mounted file holding the client secret.
	// Optional with authorization_code: without, Portcullis is a public
	// client (PKCE alone).
	ClientSecretFile string `yaml:"client_secret_file"`
	// Scopes are requested with the token.
	Scopes []string `yaml:"scopes"`
	// Resource, when set, is sent as the RFC 8707 resource parameter: the
	// upstream's identifier, so that the token is good for it alone. With
	// id_jag it is the ID-JAG's resource, and defaults to url.
	Resource string `yaml:"resource" schema:"url"`
	// Audience, when set, is sent as the RFC 8693 audience parameter: the
	// logical name of the upstream at the authorization server
	// (token_exchange), or the issuer of the upstream's authorization
	// server, the ID-JAG's audience (id_jag, required).
	Audience string `yaml:"audience"`
	// RequestedTokenType is the RFC 8693 requested_token_type
	// (token_exchange only). Default
	// urn:ietf:params:oauth:token-type:access_token.
	RequestedTokenType string `yaml:"requested_token_type"`
	// IdentityProvider is where grant id_jag gets each caller's ID-JAG
	// (id_jag only, required there).
	IdentityProvider IdentityProviderOptions `yaml:"identity_provider"`
	// TokenEnv is the environment variable a stdio upstream's process
	// (per_principal, authorization_code) gets its user's connected
	// account's access token in, such as GITHUB_PERSONAL_ACCESS_TOKEN. A
	// process whose token was refreshed is replaced by one with the new
	// token once its calls in flight are done.
	TokenEnv string `yaml:"token_env"`
	// TokenFileEnv is, instead, the environment variable that names a
	// file holding the token (mode 0600, in a directory of the process's
	// own), which is rewritten in place when the token is refreshed: for
	// a server that reads its token from a file.
	TokenFileEnv string `yaml:"token_file_env"`
	// ConnectAtSignIn chains connecting this account into the sign-in at
	// Portcullis's authorization server (authorization_code only), after
	// the identity provider and before the consent page, for a server
	// that serves this upstream: the client's first calls then need no
	// connection. Off: a user connects when a call needs it, or on the
	// connections page.
	ConnectAtSignIn bool `yaml:"connect_at_sign_in"`
}

// enabled reports whether the grant is configured.
func (o OAuthOptions) enabled() bool { return o.TokenURL != "" || o.account() }

// set reports whether any key is set.
func (o OAuthOptions) set() bool {
	return o.TokenURL != "" || o.ClientID != "" || o.ClientSecretFile != "" || len(o.Scopes) > 0 || o.Resource != "" ||
		o.Grant != "" || o.Audience != "" || o.RequestedTokenType != "" || o.Issuer != "" || o.AuthorizationURL != "" ||
		o.IdentityProvider.set() || o.TokenEnv != "" || o.TokenFileEnv != "" || o.ConnectAtSignIn
}

// account reports whether the grant is authorization_code: each caller's
// connected account.
func (o OAuthOptions) account() bool { return o.Grant == GrantAuthorizationCode }

// clientCredentials reports whether Portcullis's own token authenticates
// the shared session: grant client_credentials, or a grant that gets a
// token for each caller, whose listing session uses the same client's.
func (o OAuthOptions) clientCredentials() bool { return o.TokenURL != "" && !o.account() }

// exchange reports whether the grant gets a token for each caller for
// the caller's token (token_exchange, jwt_bearer, id_jag).
func (o OAuthOptions) exchange() bool {
	switch o.Grant {
	case GrantTokenExchange, GrantJWTBearer, GrantIDJAG:
		return o.enabled()
	}
	return false
}

// subjectType is the type of the caller's token the grant prefers: the
// ID token for id_jag, else the access token.
func (o OAuthOptions) subjectType() string {
	if o.Grant == GrantIDJAG {
		return TokenTypeIDToken
	}
	return TokenTypeAccessToken
}

// checkAccount checks the keys of grant authorization_code, reporting
// each problem with at.
func (o OAuthOptions) checkAccount(at func(key, format string, args ...any)) {
	for _, u := range []struct{ key, url string }{{"oauth.issuer", o.Issuer}, {"oauth.authorization_url", o.AuthorizationURL}, {"oauth.token_url", o.TokenURL}, {"oauth.resource", o.Resource}} {
		if u.url != "" {
			if err := checkURL(u.url); err != nil {
				at(u.key, "%v", err)
			}
		}
	}
	if (o.AuthorizationURL == "") != (o.TokenURL == "") {
		at("oauth.authorization_url", "set both authorization_url and token_url, or neither (they come from the issuer's metadata)")
	}
	if o.AuthorizationURL != "" && o.Issuer == "" {
		at("oauth.issuer", "required with authorization_url: authorization responses are checked to come from it (RFC 9207)")
	}
	if o.ClientID == "" {
		at("oauth.client_id", "required with grant authorization_code: Portcullis's client at the upstream's authorization server")
	}
	if o.ClientSecretFile != "" {
		if _, err := readValueFile(o.ClientSecretFile); err != nil {
			at("oauth.client_secret_file", "%v", err)
		}
	}
	if o.Audience != "" || o.RequestedTokenType != "" {
		at("oauth.grant", "audience and requested_token_type apply only to token_exchange (and audience to id_jag)")
	}
	if o.IdentityProvider.set() {
		at("oauth.identity_provider", "applies only to oauth.grant id_jag")
	}
}

// checkStdioAccount checks the oauth block of a stdio upstream: only
// authorization_code, per_principal, naming where its process gets the
// token, with the authorization server named (a stdio server has no
// metadata to discover it from).
func (o OAuthOptions) checkStdioAccount(perPrincipal bool, at func(key, format string, args ...any)) {
	if !o.account() {
		at("oauth.grant", "a stdio upstream takes only authorization_code, each user's connected account, given to the user's own process")
		return
	}
	o.checkAccount(at)
	if !perPrincipal {
		at("isolation", "oauth.grant authorization_code on a stdio upstream needs per_principal: each user's process gets that user's token")
	}
	switch {
	case o.TokenEnv == "" && o.TokenFileEnv == "":
		at("oauth.token_env", "required on a stdio upstream (or token_file_env): the environment variable the process gets its user's token in")
	case o.TokenEnv != "" && o.TokenFileEnv != "":
		at("oauth.token_env", "set token_env or token_file_env, not both")
	}
	for key, name := range map[string]string{"oauth.token_env": o.TokenEnv, "oauth.token_file_env": o.TokenFileEnv} {
		if name != "" && !validEnvName.MatchString(name) {
			at(key, "%q is not a valid environment variable name", name)
		}
	}
	if o.Issuer == "" {
		at("oauth.issuer", "required on a stdio upstream: the authorization server that issues its users' tokens")
	}
}

// checkGrant checks the keys of an oauth block of an HTTP service whose
// grant is not authorization_code (see checkAccount), token_url set,
// reporting each problem with at.
func (o OAuthOptions) checkGrant(at func(key, format string, args ...any)) {
	switch o.Grant {
	case GrantClientCredentials:
		if o.Audience != "" || o.RequestedTokenType != "" {
			at("oauth.grant", "audience and requested_token_type apply only to token_exchange")
		}
	case GrantTokenExchange:
		if o.RequestedTokenType != tokenexchange.TokenTypeAccessToken && o.RequestedTokenType != tokenexchange.TokenTypeJWT {
			at("oauth.requested_token_type", "%q is not one of %s, %s: the upstream is sent a bearer access token", o.RequestedTokenType, tokenexchange.TokenTypeAccessToken, tokenexchange.TokenTypeJWT)
		}
	case GrantJWTBearer:
		if o.Audience != "" || o.RequestedTokenType != "" {
			at("oauth.grant", "audience and requested_token_type apply only to token_exchange (and audience to id_jag)")
		}
		if len(o.Scopes) == 0 {
			at("oauth.scopes", "required with oauth.grant jwt_bearer: the on-behalf-of request names the upstream's API by its scope (at Entra ID, api://<its application ID>/.default)")
		}
	case GrantIDJAG:
		if o.RequestedTokenType != "" {
			at("oauth.requested_token_type", "applies only to token_exchange: id_jag asks the identity provider for an ID-JAG, and the upstream's authorization server for an access token")
		}
		if o.Audience == "" {
			at("oauth.audience", "required with oauth.grant id_jag: the issuer of the upstream's authorization server, the ID-JAG's audience")
		}
		o.IdentityProvider.check(at)
	default:
		at("oauth.grant", "%q is not one of client_credentials, token_exchange, jwt_bearer, id_jag, authorization_code", o.Grant)
	}
	if o.Issuer != "" || o.AuthorizationURL != "" || o.ConnectAtSignIn {
		at("oauth.grant", "issuer, authorization_url and connect_at_sign_in apply only to authorization_code")
	}
	if o.Grant != GrantIDJAG && o.IdentityProvider.set() {
		at("oauth.identity_provider", "applies only to oauth.grant id_jag")
	}
	if err := checkURL(o.TokenURL); err != nil {
		at("oauth.token_url", "%v", err)
	}
	if o.ClientID == "" {
		at("oauth.client_id", "required with oauth.token_url")
	}
	if o.ClientSecretFile == "" {
		at("oauth.client_secret_file", "required with oauth.token_url")
	} else if _, err := readValueFile(o.ClientSecretFile); err != nil {
		at("oauth.client_secret_file", "%v", err)
	}
	if o.Resource != "" {
		if err := checkURL(o.Resource); err != nil {
			at("oauth.resource", "%v", err)
		}
	}
}
