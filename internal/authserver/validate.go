package authserver

import (
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/clientreg"
)

// Validate reports every problem at once, each as "key: problem" relative
// to the section. resource is auth.resource.
func (o *Options) Validate(resource string) error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	if resource == "" {
		errs = append(errs, errors.New("enabled: needs auth.resource, the public URL of the MCP endpoint the tokens are for"))
	}
	if err := checkIssuer(o.Issuer, true); err != nil {
		add("issuer", "%v", err)
	} else if u, _ := url.Parse(o.Issuer); u.Path != "" {
		add("issuer", "%q must have no path: the metadata is served at /.well-known/oauth-authorization-server", o.Issuer)
	}
	for key, d := range map[string]time.Duration{
		"access_token_ttl":  o.AccessTokenTTL,
		"refresh_token_ttl": o.RefreshTokenTTL,
		"code_ttl":          o.CodeTTL,
		"login_ttl":         o.LoginTTL,
	} {
		if d <= 0 {
			add(key, "must be positive")
		}
	}
	if o.RefreshTokens != "always" && o.RefreshTokens != scopeOfflineAccess {
		add("refresh_tokens", "%q: want always or offline_access", o.RefreshTokens)
	}
	if o.CodeTTL > 10*time.Minute {
		add("code_ttl", "%s is longer than the 10 minutes RFC 6749 allows", o.CodeTTL)
	}
	idp := o.IdP
	if _, ok := presets[idp.Preset]; !ok {
		add("idp.preset", "%q: want generic, entra, okta, google or keycloak", idp.Preset)
	}
	if idp.Issuer == "" {
		add("idp.issuer", "required: the identity provider users sign in at")
	} else if err := checkIssuer(idp.Issuer, idp.AllowHTTP); err != nil {
		add("idp.issuer", "%v", err)
	}
	if idp.ClientID == "" {
		add("idp.client_id", "required: Portcullis's client id at the identity provider")
	}
	if idp.ClientSecretFile == "" {
		add("idp.client_secret_file", "required: a file holding Portcullis's client secret at the identity provider")
	}
	if idp.Preset == "google" && len(idp.HostedDomains) == 0 {
		add("idp.hosted_domains", "required with preset google: without it any Google account can sign in")
	}
	switch o.Registration.Mode {
	case RegistrationOpen, RegistrationOff:
	case RegistrationToken:
		if o.Registration.InitialAccessTokenFile == "" {
			add("registration.initial_access_token_file", "required with registration.mode token")
		}
	default:
		add("registration.mode", "%q: want open, token or off", o.Registration.Mode)
	}
	if o.Registration.TTL <= 0 {
		add("registration.ttl", "must be positive")
	}
	if m := o.ClientMetadataDocuments.Mode; m != "on" && m != "off" {
		add("client_metadata_documents.mode", "%q: want on or off", m)
	}
	for i, r := range o.Scopes {
		if r.Scope == "" {
			add(fmt.Sprintf("scopes[%d].scope", i), "required")
		}
		if len(r.Groups) == 0 {
			add(fmt.Sprintf("scopes[%d].groups", i), "required: the groups whose users may be granted %q", r.Scope)
		}
	}
	seen := map[string]bool{}
	for i, c := range o.Clients {
		k := fmt.Sprintf("clients[%d]", i)
		if c.ClientID == "" {
			add(k+".client_id", "required")
		} else if clientreg.IsURLClientID(c.ClientID, o.ClientMetadataDocuments.InsecureAllowHTTP) {
			add(k+".client_id", "%q is a URL, which names a client metadata document: give a pre-registered client a plain id", c.ClientID)
		} else if seen[c.ClientID] {
			add(k+".client_id", "duplicate client %q", c.ClientID)
		}
		seen[c.ClientID] = true
		if len(c.RedirectURIs) == 0 {
			add(k+".redirect_uris", "required: at least one")
		}
		for j, u := range c.RedirectURIs {
			if err := checkRedirectURI(u); err != nil {
				add(fmt.Sprintf("%s.redirect_uris[%d]", k, j), "%v", err)
			}
		}
	}
	errs = append(errs, o.validateEnterpriseIdPs(seen)...)
	return errors.Join(errs...)
}
