package portcullis

import (
	"slices"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// setupAuthServer builds the authorization server of
// authorization_server (nil when off) and makes its issuer the first of
// auth.issuers, verified with its in-process keys: the Protected Resource
// Metadata of /mcp and of every virtual server (built after this) then
// names it first, and they verify its tokens like any issuer's. It issues
// tokens for the root server and each virtual server, each token for one
// of them (authServerResources). Its state is in Redis when redis.url is set (every replica
// shares sign-ins, codes and refresh tokens), else in memory.
func (a *app) setupAuthServer() (*authserver.Server, error) {
	o := a.cfg.AuthorizationServer
	if !o.Enabled {
		return nil, nil
	}
	deps := authserver.Deps{
		Resources: authServerResources(a.cfg),
		Scopes:    authServerScopes(a.cfg),
		Logger:    a.logger,
		Observe: func(e authserver.Event) {
			a.metrics.AuthServerEvent(e.Endpoint, e.Grant, e.Outcome, e.Reason)
		},
		KeepIdPTokens: usesTokenExchange(a.cfg.Upstreams) || httpAPIsPerCaller(a.cfg.HTTPAPIs),
	}
	if a.audit != nil {
		deps.Audit = a.audit.record
	}
	if len(signInUpstreams(a.cfg.Upstreams)) > 0 {
		deps.NextConnection = a.nextConnection
	}
	if a.redis != nil {
		deps.KV = kv.NewRedis(redisKit(a.cfg, a.redis), a.cfg.Redis.KeyPrefix+"as:")
	} else {
		a.logger.Warn("authorization server: no redis.url, so sign-ins, codes and refresh tokens live in this replica's memory: run one replica, and expect users to sign in again after a restart")
	}
	s, err := authserver.New(o, deps)
	if err != nil {
		return nil, err
	}
	a.authServer.Store(s)
	a.cfg.Auth.Issuers = append([]auth.IssuerOptions{{
		Issuer:     s.Issuer(),
		Algorithms: []string{"ES256"},
		KeySet:     s.KeySet(),
	}}, a.cfg.Auth.Issuers...)
	return s, nil
}

// authServerResources are the servers the authorization server issues
// tokens for: the root server at /mcp (auth.resource, by
// auth.resource_name, the name its metadata gives it) and each virtual
// server (its resource, name and title), each with its own scopes.
func authServerResources(cfg *configFile) []authserver.Resource {
	out := []authserver.Resource{{URL: cfg.Auth.Resource, Name: rootServerName, Title: cfg.Auth.ResourceName,
		Scopes: serverScopes(cfg.Auth.RequiredScopes, cfg.Auth.Policy)}}
	for _, s := range cfg.Servers {
		out = append(out, authserver.Resource{URL: s.Resource, Name: s.Name, Title: s.Title,
			Scopes: serverScopes(s.Auth.RequiredScopes, s.Auth.Policy)})
	}
	return out
}

// serverScopes are the scopes of one server alone, which a sign-in for
// it is offered besides authServerScopes: its required scopes and every
// scope its policy names.
func serverScopes(required []string, policy []auth.ToolPolicy) []string {
	out := slices.Clone(required)
	for _, p := range policy {
		for _, s := range p.Scopes {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// authServerScopes are the scopes a sign-in for any server is offered:
// auth.scopes_supported, which the metadata of /mcp and of every virtual
// server lists.
func authServerScopes(cfg *configFile) []string {
	return slices.Clone(cfg.Auth.ScopesSupported)
}
