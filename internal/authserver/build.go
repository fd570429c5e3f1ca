package authserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/token/jwt"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/clientreg"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// New builds the authorization server of o (defaults applied, validated).
func New(o Options, deps Deps) (*Server, error) {
	if len(deps.Resources) == 0 {
		return nil, errors.New("authserver: no resource to issue tokens for")
	}
	keys, generated, err := loadKeys(o.KeysFile)
	if err != nil {
		return nil, err
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if generated {
		logger.Warn("authorization server: no authorization_server.keys_file, so a signing key was made at start: tokens and codes stop working on restart and other replicas refuse them")
	}
	client := deps.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	now := deps.Now
	if now == nil {
		now = time.Now
	}
	state := deps.KV
	if state == nil {
		state = kv.NewMemory(nil)
	}
	s := &Server{
		o:         o,
		resources: slices.Clone(deps.Resources),
		scopes:    slices.Clone(deps.Scopes),
		kv:        state,
		keys:      keys,
		logger:    logger,
		observe:   deps.Observe,
		audit:     deps.Audit,
		now:       now,

		nextConnection: deps.NextConnection,
		secure:         strings.HasPrefix(o.Issuer, "https://"),
	}
	for _, r := range s.resources {
		for _, sc := range r.Scopes {
			if !slices.Contains(s.scopes, sc) {
				s.scopes = append(s.scopes, sc)
			}
		}
	}
	// offline_access is always offered (SEP-2207: a client asks for it
	// when the metadata lists it); refresh_tokens says whether it is needed.
	if !slices.Contains(s.scopes, scopeOfflineAccess) {
		s.scopes = append(s.scopes, scopeOfflineAccess)
	}
	s.common = append(slices.Clone(deps.Scopes), scopeOfflineAccess)
	if s.observe == nil {
		s.observe = func(Event) {}
	}
	if s.audit == nil {
		s.audit = func(context.Context, *audit.Event) {}
	}
	s.keepIdPTokens = deps.KeepIdPTokens
	s.rate = newAddressLimiter(o.Rate, now)
	if s.sealer, err = keys.sealer(); err != nil {
		return nil, err
	}
	var fetcher *clientreg.Fetcher
	if o.ClientMetadataDocuments.Mode == "on" {
		fetcher = clientreg.NewFetcher(o.ClientMetadataDocuments.FetchOptions, clientreg.FetchDeps{Cache: kvCache{state}, Now: now, Logger: logger, RootCAs: deps.CIMDRootCAs})
	}
	s.clients = newClientRegistry(o, s.resourceURLs(), s.scopes, state, fetcher)
	if o.Registration.Mode != RegistrationOff {
		if s.registrar, err = newRegistrar(o.Registration, now); err != nil {
			return nil, err
		}
	}
	s.store = &store{kv: state, clients: s.clients, o: &s.o, onReuse: s.refreshReused, resourceOf: s.grantResource}
	if s.idp, err = newIdP(o.IdP, o.Issuer+PathCallback, client); err != nil {
		return nil, err
	}
	s.idp.offline = deps.KeepIdPTokens
	global, rotated, err := keys.secrets()
	if err != nil {
		return nil, err
	}
	cfg := &fosite.Config{
		AccessTokenLifespan:            o.AccessTokenTTL,
		RefreshTokenLifespan:           o.RefreshTokenTTL,
		AuthorizeCodeLifespan:          o.CodeTTL,
		AccessTokenIssuer:              o.Issuer,
		TokenURL:                       o.Issuer + PathToken,
		GlobalSecret:                   global,
		RotatedGlobalSecrets:           rotated,
		EnforcePKCE:                    true,
		EnforcePKCEForPublicClients:    true,
		EnablePKCEPlainChallengeMethod: false,
		ScopeStrategy:                  fosite.ExactScopeStrategy,
		AudienceMatchingStrategy:       fosite.ExactAudienceMatchingStrategy,
		RefreshTokenScopes:             refreshScopes(o.RefreshTokens),
		JWTScopeClaimKey:               jwt.JWTScopeFieldString,
	}
	factories := []compose.Factory{
		compose.OAuth2AuthorizeExplicitFactory,
		compose.OAuth2RefreshTokenGrantFactory,
		compose.OAuth2TokenRevocationFactory,
		compose.OAuth2PKCEFactory,
	}
	if len(o.EnterpriseIdPs) > 0 {
		factories = append(factories, s.idjagFactory(client))
		for _, e := range o.EnterpriseIdPs {
			if e.AllowHTTP {
				logger.Warn("authorization server: enterprise_idps[].allow_http is on: assertions of an http issuer on a loopback host are accepted", "idp", e.Issuer)
			}
		}
	}
	s.provider = compose.Compose(cfg, s.store, &compose.CommonStrategy{
		CoreStrategy: tokenClock{
			CoreStrategy: compose.NewOAuth2JWTStrategy(keys.privateKey, compose.NewOAuth2HMACStrategy(cfg), cfg),
			lifespan:     o.AccessTokenTTL,
			now:          now,
		},
	}, factories...)
	return s, nil
}

// refreshScopes is fosite's RefreshTokenScopes for refresh_tokens: none
// needed (always), or offline_access.
func refreshScopes(mode string) []string {
	if mode == scopeOfflineAccess {
		return []string{scopeOfflineAccess}
	}
	return []string{}
}
