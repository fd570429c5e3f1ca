package portcullis

import (
	"slices"

	"github.com/portcullis-mcp/portcullis/auth"
	"github.com/portcullis-mcp/portcullis/internal/authserver"
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
		KeepIdPTokens: usesTokenExchange(a.cfg.Upstreams),
	}
	if a.redis != nil {
		deps.KV = authserver.NewRedisKV(redisKit(a.cfg, a.redis), a.cfg.Redis.KeyPrefix+"as:")
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
// server (its resource, name and title).
func authServerResources(cfg *configFile) []authserver.Resource {
	out := []authserver.Resource{{URL: cfg.Auth.Resource, Name: rootServerName, Title: cfg.Auth.ResourceName}}
	for _, s := range cfg.Servers {
		out = append(out, authserver.Resource{URL: s.Resource, Name: s.Name, Title: s.Title})
	}
	return out
}

// authServerScopes are the scopes clients may ask the authorization
// server for: auth.scopes_supported, auth.required_scopes and every scope
// auth.policy names, and each virtual server's required scopes and the
// scopes its policy names.
func authServerScopes(cfg *configFile) []string {
	o := cfg.Auth
	var out []string
	add := func(ss []string) {
		for _, s := range ss {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	add(o.ScopesSupported)
	add(o.RequiredScopes)
	for _, p := range o.Policy {
		add(p.Scopes)
	}
	for _, s := range cfg.Servers {
		add(s.Auth.RequiredScopes)
		for _, p := range s.Auth.Policy {
			add(p.Scopes)
		}
	}
	return out
}
