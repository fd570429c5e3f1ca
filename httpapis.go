package portcullis

import (
	"context"
	"log/slog"
	"slices"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/auth"

	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/internal/httptools"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// registerHTTPAPIs serves the declared tools of the REST APIs of
// `http_apis:` (package internal/httptools) in cat, each API a source
// that servers[].tools[].source selects by its name. Their calls go
// through the same middleware as any tool's (policy, limits, metrics,
// spans, audit); their requests are traced. subject gives APIs whose
// token is got for each caller the caller's token they present (see
// subjectToken), accts authorization_code APIs the caller's connected
// account.
func registerHTTPAPIs(ctx context.Context, apis []httptools.Options, cat *catalog.Catalog, tracing *observability.Tracing, logger *slog.Logger, subject func(*sdkauth.TokenInfo, string) (string, string, bool), accts upstream.Accounts) error {
	if len(apis) == 0 {
		return nil
	}
	return httptools.Register(ctx, apis, cat, httptools.Deps{
		Logger:       logger,
		Transport:    tracing.Transport,
		SubjectToken: subject,
		Accounts:     accts,
		// Tokens got for each caller are kept per token principal, as
		// the limits key callers.
		PrincipalKey: func(ti *sdkauth.TokenInfo) string {
			if p, ok := auth.PrincipalFromTokenInfo(ti); ok {
				return p.Key()
			}
			return ""
		},
	})
}

// httpAPIsPerCaller reports whether an API gets a token for each caller
// with the caller's token (oauth.grant token_exchange, jwt_bearer or
// id_jag).
func httpAPIsPerCaller(apis []httptools.Options) bool {
	for i := range apis {
		o := apis[i].OAuth
		o.Defaults(apis[i].BaseURL)
		if o.PerCaller() {
			return true
		}
	}
	return false
}

// validateHTTPAPIs reports the problems of http_apis, an API's name or
// prefix taken by one of the upstreams among them: a selection names
// either by it.
func validateHTTPAPIs(apis []httptools.Options, ups []upstream.Options) error {
	names, prefixes := map[string]string{}, map[string]string{}
	for i := range ups {
		u := ups[i]
		u.Defaults()
		names[u.Name] = "an upstream"
		if u.Prefix != nil && *u.Prefix != "" {
			prefixes[*u.Prefix] = "an upstream"
		}
	}
	return httptools.Validate(apis, names, prefixes)
}

// connectionUpstreams are the upstreams and, as upstreams of the same
// name, url and oauth block, the HTTP APIs: what the connected accounts
// (oauth.grant authorization_code) are set up and checked for.
func connectionUpstreams(ups []upstream.Options, apis []httptools.Options) []upstream.Options {
	out := slices.Clone(ups)
	for _, a := range apis {
		if a.OAuth.ConnectedAccount() {
			out = append(out, upstream.Options{Name: a.Name, Transport: upstream.TransportHTTP, URL: a.BaseURL, OAuth: a.OAuth})
		}
	}
	return out
}
