package portcullis

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/loopback"
)

// setupDev turns on auth with an embedded issuer at addr, so the first run
// needs no identity provider but still exercises the real auth path.
func setupDev(cfg *configFile, addr string) (*devIssuer, error) {
	dev, err := newDevIssuer("http://"+addr+devIssuerPath, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Auth.Resource == "" {
		cfg.Auth.Resource = "http://" + addr + mcpPath
	}
	cfg.defaultServerResources()
	dev.DefaultAudience = cfg.Auth.Resource
	cfg.Auth.Issuers = append(cfg.Auth.Issuers, dev.IssuerOptions())
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return dev, nil
}

// devScopes are the scopes the printed dev token carries: every scope the
// configuration names, so the token can call every tool.
func devScopes(o auth.Options) []string {
	scopes := append(slices.Clone(o.ScopesSupported), o.RequiredScopes...)
	for _, p := range o.Policy {
		scopes = append(scopes, p.Scopes...)
	}
	slices.Sort(scopes)
	return slices.Compact(scopes)
}

func printDevBanner(w io.Writer, dev *devIssuer, o auth.Options, url string) error {
	const ttl = 8 * time.Hour
	token, err := dev.Mint("dev-user", o.Resource, devScopes(o), ttl)
	if err != nil {
		return fmt.Errorf("minting the dev token: %w", err)
	}
	fmt.Fprintf(w, `Portcullis %s is serving MCP at %s (dev mode: embedded issuer %s)

A token for subject dev-user, valid %s:

  export MCP_TOKEN=%s

Try it with the MCP Inspector (it needs Node 22 or later):

  npx --yes @modelcontextprotocol/inspector@2.12.0 --cli %s --transport http \
    --header "Authorization: Bearer $MCP_TOKEN" --method tools/list

More tokens: curl -s -d grant_type=client_credentials -d client_id=me -d resource=%s %s/token
`, version, url, dev.Issuer(), ttl, token, url, o.Resource, dev.Issuer())
	return nil
}

// validateDev validates c as serve --dev will run it. setupDev adds the
// embedded issuer, and auth.resource when unset, once the listener's
// address is known; until then a stand-in for them lets what needs an
// issuer (auth.required_scopes) pass.
//
// The resource must be on a loopback host too: the embedded issuer mints
// a token for anyone who asks, so a resource reached through a proxy or
// tunnel would be open to everyone who can reach that.
func (c *configFile) validateDev() error {
	var resourceErrs []error
	notLoopback := func(key, resource string) {
		if u, err := url.Parse(resource); resource != "" && err == nil && u.Host != "" && !loopback.Host(u.Hostname()) {
			resourceErrs = append(resourceErrs, fmt.Errorf("%s: %q is not on a loopback host: --dev's embedded issuer mints tokens for anyone who asks, so it guards only a loopback resource (leave %s unset, or run without --dev)", key, resource, key))
		}
	}
	notLoopback("auth.resource", c.Auth.Resource)
	for i, s := range c.Servers {
		notLoopback(fmt.Sprintf("servers[%d].resource", i), s.Resource)
	}
	if checkAddr(c.Server.Listen) != nil || !loopback.Host(c.Server.Listen) {
		// Reported by Validate, or --dev refuses it itself: no dev issuer
		// is made for it.
		return errors.Join(append(resourceErrs, c.Validate())...)
	}
	d := *c
	d.Auth.Issuers = append(slices.Clone(c.Auth.Issuers), auth.IssuerOptions{Issuer: "http://" + c.Server.Listen + devIssuerPath})
	if d.Auth.Resource == "" {
		d.Auth.Resource = "http://" + c.Server.Listen + mcpPath
	}
	d.Servers = slices.Clone(c.Servers)
	d.defaultServerResources()
	return errors.Join(append(resourceErrs, d.Validate())...)
}
