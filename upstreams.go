package portcullis

import (
	"context"
	"log/slog"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/auth"
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
func startUpstreams(ctx context.Context, cfg *configFile, cat *catalog.Catalog, metrics *observability.Metrics, tracing *observability.Tracing, logger *slog.Logger) (*upstream.Manager, error) {
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
		Hooks:      upstream.Hooks{StartCall: obs.StartCall, Inject: obs.Inject, Restarted: obs.Restarted, Up: obs.Up},
		Version:    version,
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
		// token_exchange upstreams exchange the caller's token, which only
		// internal/bearer reads out of the token info.
		SubjectToken: bearer.FromTokenInfo,
	})
	if err != nil {
		return nil, err
	}
	m.Start(ctx)
	return m, nil
}

// readyUpstreams adds the required upstreams' readiness to health.
func readyUpstreams(m *upstream.Manager, health *observability.Health) {
	if m != nil && m.Required() {
		health.AddCheck("required upstream MCP server not connected", m.Ready)
	}
}
