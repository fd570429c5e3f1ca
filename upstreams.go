package portcullis

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/bearer"
	"github.com/portcullis-mcp/portcullis/internal/catalog"
	"github.com/portcullis-mcp/portcullis/observability"
	"github.com/portcullis-mcp/portcullis/upstream"
)

// startUpstreams is the server's one hook for upstream MCP servers
// (config `upstreams:`, package upstream): it builds their manager, which
// puts what they offer into cat, wires its hooks to metrics and traces,
// and starts it. It returns nil when none is configured. The caller stops
// the manager with Close.
//
// subject gives upstreams whose token is got for each caller the
// caller's token they present (see subjectToken), accts authorization_code
// upstreams the caller's connected account. au records upstreams'
// connections and disconnections.
func startUpstreams(ctx context.Context, cfg *configFile, cat *catalog.Catalog, metrics *observability.Metrics, tracing *observability.Tracing, logger *slog.Logger, subject func(*sdkauth.TokenInfo, string) (string, string, bool), accts upstream.Accounts, au *auditor) (*upstream.Manager, error) {
	if len(cfg.Upstreams) == 0 {
		return nil, nil
	}
	obs := observability.NewUpstreams(metrics, tracing)
	for _, u := range cfg.Upstreams {
		obs.Declare(u.Name)
	}
	client := upstream.DefaultHTTPClient()
	client.Transport = tracing.Transport(client.Transport)
	m, err := upstream.New(cfg.Upstreams, cat, upstream.Deps{
		Logger:     logger,
		HTTPClient: client,
		Hooks: upstream.Hooks{StartCall: obs.StartCall, Inject: obs.Inject,
			Restarted: func(name string) {
				obs.Restarted(name)
				au.upstream(name, true, true)
			},
			Up: func(name string, up bool) {
				obs.Up(name, up)
				au.upstream(name, up, false)
			},
		},
		Version: version,
		// per_principal upstreams run a process per token principal, keyed
		// as the limits key callers.
		PrincipalKey: func(ti *sdkauth.TokenInfo) string {
			if p, ok := auth.PrincipalFromTokenInfo(ti); ok {
				return p.Key()
			}
			return ""
		},
		// pass_principal gives stdio servers the verified identity, never
		// the token.
		Principal: func(ti *sdkauth.TokenInfo) (upstream.Principal, bool) {
			p, ok := auth.PrincipalFromTokenInfo(ti)
			if !ok {
				return upstream.Principal{}, false
			}
			return upstream.Principal{Issuer: p.Issuer, Subject: p.Subject, ClientID: p.ClientID, Scopes: p.Scopes}, true
		},
		SubjectToken: subject,
		Accounts:     accts,
	})
	if err != nil {
		return nil, err
	}
	m.Start(ctx)
	return m, nil
}

// usesTokenExchange reports whether an upstream gets a token for each
// caller with the caller's token (oauth.grant token_exchange, jwt_bearer
// or id_jag).
func usesTokenExchange(ups []upstream.Options) bool {
	for _, u := range ups {
		switch u.OAuth.Grant {
		case upstream.GrantTokenExchange, upstream.GrantJWTBearer, upstream.GrantIDJAG:
			return true
		}
	}
	return false
}

// subjectToken returns the hook that gives an upstream whose token is got
// for each caller (token_exchange, jwt_bearer, id_jag) the caller's token
// it presents: for a caller signed in through Portcullis's authorization
// server, the user's token at the identity provider, kept encrypted by the
// authorization server: its ID token when the grant wants one (id_jag),
// else its access token (the one that provider's token exchange or
// on-behalf-of flow accepts); for any other caller, signed in at the
// identity provider directly, its own bearer token, an access token
// whatever the grant wants, which only internal/bearer reads out of the
// token info. Neither is logged or sent upstream: only to the token
// endpoint.
//
// The authorization server is set up after the upstreams start, so the
// hook reads it from as when called.
func subjectToken(as *atomic.Pointer[authserver.Server], logger *slog.Logger, au *auditor) func(*sdkauth.TokenInfo, string) (string, string, bool) {
	return func(ti *sdkauth.TokenInfo, want string) (string, string, bool) {
		s := as.Load()
		if p, ok := auth.PrincipalFromTokenInfo(ti); ok && s != nil && p.Issuer == s.Issuer() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			kept, from := s.IdPAccessToken, "identity_provider"
			if want == upstream.TokenTypeIDToken {
				kept, from = s.IdPIDToken, "identity_provider_id_token"
			}
			tok, err := kept(ctx, p.Subject)
			if err != nil {
				logger.Warn("upstream token exchange: no identity provider token for the caller", "error", err)
				au.tokenExchange(ti, from, false)
				return "", "", false
			}
			au.tokenExchange(ti, from, true)
			return tok, want, true
		}
		tok, ok := bearer.FromTokenInfo(ti)
		au.tokenExchange(ti, "caller", ok)
		return tok, upstream.TokenTypeAccessToken, ok
	}
}

// readyUpstreams adds the required upstreams' readiness to health.
func readyUpstreams(m *upstream.Manager, health *observability.Health) {
	if m != nil && m.Required() {
		health.AddCheck("required upstream MCP server not connected", m.Ready)
	}
}
