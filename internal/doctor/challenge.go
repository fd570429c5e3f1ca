package doctor

import (
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// challenge checks the WWW-Authenticate header of the unauthenticated
// initialize: a Bearer challenge naming the metadata and the scopes.
func (d *doctor) challenge() {
	if d.blocked(CheckChallenge) {
		return
	}
	if !d.authOn {
		d.skip(CheckChallenge, "auth is off: no challenge")
		return
	}
	cs, err := oauthex.ParseWWWAuthenticate(d.initResp.header.Values("WWW-Authenticate"))
	if err != nil {
		d.fail(CheckChallenge, "WWW-Authenticate does not parse: %v", err)
		return
	}
	i := slices.IndexFunc(cs, func(c oauthex.Challenge) bool { return c.Scheme == "bearer" })
	if i < 0 {
		d.fail(CheckChallenge, "the 401 has no WWW-Authenticate: Bearer challenge (got %q)", d.initResp.header.Values("WWW-Authenticate"))
		return
	}
	params := cs[i].Params
	rm := params["resource_metadata"]
	bare, suffixed := d.metadataURLs()
	switch {
	case rm == "":
		d.fail(CheckChallenge, "the Bearer challenge has no resource_metadata: a connector cannot discover the authorization server")
		return
	case rm != bare && rm != suffixed:
		d.fail(CheckChallenge, "resource_metadata is %q, want %q (or %q)", rm, suffixed, bare)
		return
	case !slices.Contains(d.prmURLs, rm):
		d.fail(CheckChallenge, "resource_metadata points at %s, which failed above", rm)
		return
	}
	scope := params["scope"]
	if scope == "" && d.prm != nil && len(d.prm.ScopesSupported) > 0 {
		d.warn(CheckChallenge, "resource_metadata=%q but no scope, while the metadata lists scopes_supported %v: clients then ask for all of them (set auth.required_scopes)", rm, d.prm.ScopesSupported)
		return
	}
	if scope == "" {
		d.pass(CheckChallenge, "401 Bearer resource_metadata=%q", rm)
		return
	}
	if d.prm != nil && len(d.prm.ScopesSupported) > 0 {
		var unlisted []string
		for _, sc := range strings.Fields(scope) {
			if !slices.Contains(d.prm.ScopesSupported, sc) {
				unlisted = append(unlisted, sc)
			}
		}
		if len(unlisted) > 0 {
			d.warn(CheckChallenge, "scope=%q names %q, which the metadata's scopes_supported %v does not list: clients ask the authorization server for the challenge's scopes, which it may not know (for Entra ID, list api://APP/scope in auth.scopes_supported)", scope, unlisted, d.prm.ScopesSupported)
			return
		}
	}
	d.pass(CheckChallenge, "401 Bearer resource_metadata=%q scope=%q", rm, scope)
}
