package doctor

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// metadataURLs returns the RFC 9728 metadata URLs for the endpoint: the
// bare well-known URL and the one suffixed with the endpoint's path.
func (d *doctor) metadataURLs() (bare, suffixed string) {
	const wellKnown = "/.well-known/oauth-protected-resource"
	origin := d.url.Scheme + "://" + d.url.Host
	bare = origin + wellKnown
	suffixed = bare
	if p := strings.TrimSuffix(d.url.EscapedPath(), "/"); p != "" {
		suffixed = origin + wellKnown + p
	}
	return bare, suffixed
}

func (d *doctor) metadata(ctx context.Context) {
	bare, suffixed := d.metadataURLs()
	for _, m := range []struct{ name, url string }{{CheckMetadata, bare}, {CheckMetadataPath, suffixed}} {
		if d.down != "" {
			d.skip(m.name, "%s", d.down)
			continue
		}
		prm, err := d.fetchMetadata(ctx, m.url)
		switch {
		case err == nil:
			d.prmURLs = append(d.prmURLs, m.url)
			if d.prm == nil {
				d.prm = prm
			}
			d.pass(m.name, "%s names this resource and %s", m.url, plural(len(prm.AuthorizationServers), "authorization server"))
		case !d.authOn && d.notMCP == "" && errors.Is(err, errNotFound):
			d.skip(m.name, "auth is off: %s is not served", m.url)
		default:
			d.fail(m.name, "%s: %v", m.url, err)
		}
	}
}

var errNotFound = errors.New("404 Not Found")

func (d *doctor) fetchMetadata(ctx context.Context, u string) (*oauthex.ProtectedResourceMetadata, error) {
	r, err := d.get(ctx, u)
	if err != nil {
		return nil, err
	}
	if r.status == http.StatusNotFound {
		return nil, errNotFound
	}
	var prm oauthex.ProtectedResourceMetadata
	if err := r.decodeJSON(&prm); err != nil {
		return nil, err
	}
	switch {
	case prm.Resource != d.opts.URL:
		return nil, fmt.Errorf("resource is %q, want exactly %q (set auth.resource to the URL connectors use)", prm.Resource, d.opts.URL)
	case len(prm.AuthorizationServers) == 0:
		return nil, errors.New("authorization_servers is empty: a connector cannot tell where to get a token")
	}
	return &prm, nil
}
