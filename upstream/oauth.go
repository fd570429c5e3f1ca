package upstream

import (
	"errors"
	"net/url"
)

// Grants accepted in [OAuthOptions.Grant].
const (
	// GrantClientCredentials gets the upstream a token of Portcullis's own
	// (RFC 6749 section 4.4).
	GrantClientCredentials = "client_credentials"
	// GrantTokenExchange gets the upstream a token for each caller by
	// exchanging the caller's token for one whose audience is the
	// upstream (RFC 8693).
	GrantTokenExchange = "token_exchange"
	// GrantAuthorizationCode sends each caller's own connected account at
	// the upstream: a token the upstream's own authorization server issued
	// to Portcullis for that user, who connected it once (the connect
	// page). A caller who has not is asked to ([ConnectRequired]).
	GrantAuthorizationCode = "authorization_code"
)

// OAuthOptions configures how an http upstream gets its access token.
// With grant client_credentials (RFC 6749 section 4.4) the token is
// Portcullis's own. With grant token_exchange (RFC 8693) each caller's
// token is exchanged at token_url for a token whose audience is the
// upstream, which is sent on that caller's own HTTP session (isolation
// per_principal); the session that lists what the upstream offers uses a
// client-credentials token of the same client. Tokens are cached and
// renewed before they expire; the caller's own token is never sent to the
// upstream.
type OAuthOptions struct {
	// Grant is client_credentials (the default), token_exchange or
	// authorization_code (each user's connected account).
	Grant string `yaml:"grant" schema:"enum=client_credentials|token_exchange|authorization_code"`
	// TokenURL is the authorization server's token endpoint. With
	// authorization_code, optional: discovered from the issuer.
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
	// upstream's identifier, so that the token is good for it alone.
	Resource string `yaml:"resource" schema:"url"`
	// Audience, when set, is sent as the RFC 8693 audience parameter: the
	// logical name of the upstream at the authorization server
	// (token_exchange only).
	Audience string `yaml:"audience"`
	// RequestedTokenType is the RFC 8693 requested_token_type
	// (token_exchange only). Default
	// urn:ietf:params:oauth:token-type:access_token.
	RequestedTokenType string `yaml:"requested_token_type"`
}

// enabled reports whether the grant is configured.
func (o OAuthOptions) enabled() bool { return o.TokenURL != "" || o.account() }

// set reports whether any key is set.
func (o OAuthOptions) set() bool {
	return o.TokenURL != "" || o.ClientID != "" || o.ClientSecretFile != "" || len(o.Scopes) > 0 || o.Resource != "" ||
		o.Grant != "" || o.Audience != "" || o.RequestedTokenType != "" || o.Issuer != "" || o.AuthorizationURL != ""
}

// account reports whether the grant is authorization_code: each caller's
// connected account.
func (o OAuthOptions) account() bool { return o.Grant == GrantAuthorizationCode }

// clientCredentials reports whether Portcullis's own token authenticates
// the shared session: grant client_credentials, or token_exchange, whose
// listing session uses the same client's.
func (o OAuthOptions) clientCredentials() bool { return o.TokenURL != "" && !o.account() }

// exchange reports whether the grant is token_exchange.
func (o OAuthOptions) exchange() bool { return o.enabled() && o.Grant == GrantTokenExchange }

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL (required for transport http)")
	}
	if u.User != nil {
		return errors.New("must not contain credentials: use headers with value_file")
	}
	return nil
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
		at("oauth.grant", "audience and requested_token_type apply only to token_exchange")
	}
}
