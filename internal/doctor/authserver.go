package doctor

import (
	"context"
	"net/url"
	"slices"
	"strings"
)

// authServers fetches each authorization server's metadata the way the MCP
// authorization spec tells clients to: RFC 8414, then OpenID Connect
// discovery, with path insertion for issuers that have a path.
func (d *doctor) authServers(ctx context.Context) {
	switch {
	case d.down != "":
		d.skip(CheckAuthServer, "%s", d.down)
		return
	case d.prm == nil && !d.authOn && d.notMCP == "":
		d.skip(CheckAuthServer, "auth is off")
		return
	case d.prm == nil:
		d.skip(CheckAuthServer, "no valid resource metadata names one")
		return
	}
	for _, issuer := range d.prm.AuthorizationServers {
		d.authServer(ctx, issuer)
	}
}

// authServerMeta is the part of RFC 8414 / OIDC discovery metadata doctor
// reads.
type authServerMeta struct {
	Issuer                        string   `json:"issuer"`
	AuthorizationEndpoint         string   `json:"authorization_endpoint"`
	TokenEndpoint                 string   `json:"token_endpoint"`
	CodeChallengeMethodsSupported []string `json:"code_challenge_methods_supported"`
}

func (d *doctor) authServer(ctx context.Context, issuer string) {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		d.fail(CheckAuthServer, "%q is not an absolute http(s) URL", issuer)
		return
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.Trim(u.EscapedPath(), "/")
	candidates := []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}
	if p != "" {
		candidates = []string{
			origin + "/.well-known/oauth-authorization-server/" + p,
			origin + "/.well-known/openid-configuration/" + p,
			origin + "/" + p + "/.well-known/openid-configuration",
		}
	}
	for _, c := range candidates {
		r, err := d.get(ctx, c)
		if err != nil {
			d.fail(CheckAuthServer, "%s: %v", issuer, err)
			return
		}
		if r.status >= 400 && r.status < 500 {
			continue
		}
		var m authServerMeta
		if err := r.decodeJSON(&m); err != nil {
			d.fail(CheckAuthServer, "%s: %v", c, err)
			return
		}
		if strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			d.fail(CheckAuthServer, "%s names issuer %q, want %q: clients refuse metadata of another issuer", c, m.Issuer, issuer)
			return
		}
		if m.AuthorizationEndpoint == "" || !slices.Contains(m.CodeChallengeMethodsSupported, "S256") {
			d.warn(CheckAuthServer, "%s: issuer matches, but no authorization_endpoint with PKCE S256: a Claude connector cannot sign users in here", c)
			return
		}
		d.pass(CheckAuthServer, "%s: issuer matches, authorization code with PKCE S256", c)
		return
	}
	d.fail(CheckAuthServer, "%s: no metadata at any of %s", issuer, strings.Join(candidates, ", "))
}
