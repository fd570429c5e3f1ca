package upstream

import "github.com/portcullis-mcp/portcullis/internal/tokenexchange"

// Types of the caller's token a grant presents, which
// [Deps.SubjectToken] is asked for and answers with.
const (
	TokenTypeAccessToken = tokenexchange.TokenTypeAccessToken
	TokenTypeIDToken     = tokenexchange.TokenTypeIDToken
)

// IdentityProviderOptions are the identity provider's token endpoint and
// Portcullis's client there, which grant id_jag asks for an Identity
// Assertion JWT Authorization Grant (RFC 8693, requested_token_type
// urn:ietf:params:oauth:token-type:id-jag). In authorization-server mode
// the subject token is the user's ID token from the sign-in, whose
// audience is authorization_server.idp.client_id: use that client here.
type IdentityProviderOptions struct {
	// TokenURL is the identity provider's token endpoint.
	TokenURL string `yaml:"token_url" schema:"url"`
	// ClientID is Portcullis's client at the identity provider.
	ClientID string `yaml:"client_id"`
	// ClientSecretFile is a mounted file holding that client's secret.
	ClientSecretFile string `yaml:"client_secret_file"`
}

// set reports whether any key is set.
func (p IdentityProviderOptions) set() bool {
	return p.TokenURL != "" || p.ClientID != "" || p.ClientSecretFile != ""
}

// check reports p's problems, for grant id_jag, to at with the key under
// oauth.
func (p IdentityProviderOptions) check(at func(key, format string, args ...any)) {
	if p.TokenURL == "" {
		at("oauth.identity_provider.token_url", "required with oauth.grant id_jag: the identity provider's token endpoint, which issues the ID-JAG")
	} else if err := checkURL(p.TokenURL); err != nil {
		at("oauth.identity_provider.token_url", "%v", err)
	}
	if p.ClientID == "" {
		at("oauth.identity_provider.client_id", "required with oauth.grant id_jag: Portcullis's client at the identity provider")
	}
	if p.ClientSecretFile == "" {
		at("oauth.identity_provider.client_secret_file", "required with oauth.grant id_jag")
	} else if _, err := readValueFile(p.ClientSecretFile); err != nil {
		at("oauth.identity_provider.client_secret_file", "%v", err)
	}
}
