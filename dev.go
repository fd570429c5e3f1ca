package portcullis

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/portcullis-mcp/portcullis/auth"
)

// devIssuerPath is where --dev mounts its embedded issuer.
const devIssuerPath = "/dev-issuer"

// setupDev turns on auth with an embedded issuer at addr, so the first run
// needs no identity provider but still exercises the real auth path.
func setupDev(cfg *configFile, addr string) (*auth.DevIssuer, error) {
	dev, err := auth.NewDevIssuer("http://"+addr+devIssuerPath, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Auth.Resource == "" {
		cfg.Auth.Resource = "http://" + addr + mcpPath
	}
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

func printDevBanner(w io.Writer, dev *auth.DevIssuer, o auth.Options, url string) error {
	const ttl = 8 * time.Hour
	token, err := dev.Mint("dev-user", o.Resource, devScopes(o), ttl)
	if err != nil {
		return fmt.Errorf("minting the dev token: %w", err)
	}
	fmt.Fprintf(w, `Portcullis %s is serving MCP at %s (dev mode: embedded issuer %s)

A token for subject dev-user, valid %s:

  export MCP_TOKEN=%s

Try it with the MCP Inspector (Node 22):

  npx --yes @modelcontextprotocol/inspector@2.12.0 --cli %s --transport http \
    --header "Authorization: Bearer $MCP_TOKEN" --method tools/list

More tokens: curl -s -d grant_type=client_credentials -d client_id=me -d resource=%s %s/token
`, version, url, dev.Issuer(), ttl, token, url, o.Resource, dev.Issuer())
	return nil
}
