package authserver

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/token/jwt"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/clientreg"
)

// Paths of the endpoints, under the issuer.
const (
	PathAuthorize = "/oauth/authorize"
	PathCallback  = "/oauth/callback"
	PathConsent   = "/oauth/consent"
	PathToken     = "/oauth/token"
	PathRevoke    = "/oauth/revoke"
	PathRegister  = "/oauth/register"
	PathJWKS      = "/oauth/jwks"
	PathMetadata  = "/.well-known/oauth-authorization-server"
	PathOpenID    = "/.well-known/openid-configuration"
)

// maxBody bounds a POST body of the endpoints.
const maxBody = 64 << 10

// Deps are what the server is given.
type Deps struct {
	// Resources are the MCP servers tokens are issued for, the root
	// server's (auth.resource) first: a sign-in names one by its URL
	// (RFC 8707 resource), and its tokens carry that one as their
	// audience. An ID-JAG that names no resource gets a token for the
	// first. At least one.
	Resources []Resource
	// Scopes are the scopes a sign-in for any resource is offered
	// (auth.scopes_supported, which every server's metadata lists);
	// each resource's own are its [Resource.Scopes].
	Scopes []string
	// KV keeps the server's state. Nil: in memory (one replica).
	KV KV
	// HTTPClient calls the identity provider. Nil: a client with a 10s
	// timeout.
	HTTPClient *http.Client
	// Logger gets the audit lines and errors. Nil: discarded.
	Logger *slog.Logger
	// Observe is told of every endpoint outcome (metrics). Nil: nothing.
	Observe func(Event)
	// Audit receives the server's audit events: sign-ins, consents,
	// tokens issued, refreshed, revoked and reused, clients registered.
	// It must not block. Nil: none.
	Audit func(context.Context, *audit.Event)
	// CIMDRootCAs verifies the servers of client metadata documents. Nil:
	// the system's roots.
	CIMDRootCAs *x509.CertPool
	// Now is the clock of the rate limits, the document cache, the access
	// tokens' iat and exp, and the ID-JAG grant (an assertion's exp, iat
	// and nbf, the enterprise IdPs' key sets). Nil: time.Now.
	Now func() time.Time
	// KeepIdPTokens keeps each user's tokens from the identity provider,
	// encrypted, for [Server.IdPAccessToken]: set when an upstream
	// exchanges them (upstreams[].oauth.grant token_exchange). Off, they
	// are dropped after sign-in.
	KeepIdPTokens bool
}

// Event is one outcome of an endpoint, for metrics: Endpoint is
// authorize, callback, consent, token or revoke; Grant the token
// endpoint's grant type; Outcome ok, refused or error; Reason a short
// fixed word (never request data).
type Event struct {
	Endpoint, Grant, Outcome, Reason string
}

// Server is the authorization server.
type Server struct {
	o         Options
	resources []Resource
	// scopes are every scope of the server: common and each resource's
	// own, for the metadata and fosite's clients; common are those every
	// resource offers (Deps.Scopes and offline_access).
	scopes    []string
	common    []string
	kv        KV
	keys      *keySet
	clients   *clientRegistry
	store     *store
	idp       *idp
	provider  fosite.OAuth2Provider
	logger    *slog.Logger
	observe   func(Event)
	now       func() time.Time
	secure    bool // the issuer is https: cookies are Secure
	rate      *addressLimiter
	registrar *registrar // nil: registration off
	// keepIdPTokens: see Deps.KeepIdPTokens; sealer encrypts them.
	keepIdPTokens bool
	sealer        *sealer
	// audit: see Deps.Audit.
	audit func(context.Context, *audit.Event)
}

// record sends an audit event of type typ and outcome about the user
// subject (empty when unknown) of the client clientID; detail adds
// key-value pairs.
func (s *Server) record(ctx context.Context, typ, outcome, clientID, subject string, scopes []string, detail ...string) {
	e := &audit.Event{Type: typ, Outcome: outcome, Actor: audit.Actor{Issuer: s.o.Issuer, Subject: subject, ClientID: clientID}, Scopes: scopes}
	if len(detail) > 0 {
		e.Detail = make(map[string]string, len(detail)/2)
		for i := 0; i+1 < len(detail); i += 2 {
			if detail[i+1] != "" {
				e.Detail[detail[i]] = detail[i+1]
			}
		}
	}
	s.audit(ctx, e)
}

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
	kv := deps.KV
	if kv == nil {
		kv = NewMemoryKV(nil)
	}
	s := &Server{
		o:         o,
		resources: slices.Clone(deps.Resources),
		scopes:    slices.Clone(deps.Scopes),
		kv:        kv,
		keys:      keys,
		logger:    logger,
		observe:   deps.Observe,
		audit:     deps.Audit,
		now:       now,
		secure:    strings.HasPrefix(o.Issuer, "https://"),
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
		fetcher = clientreg.NewFetcher(o.ClientMetadataDocuments.FetchOptions, clientreg.FetchDeps{Cache: kvCache{kv}, Now: now, Logger: logger, RootCAs: deps.CIMDRootCAs})
	}
	s.clients = newClientRegistry(o, s.resourceURLs(), s.scopes, kv, fetcher)
	if o.Registration.Mode != RegistrationOff {
		if s.registrar, err = newRegistrar(o.Registration, now); err != nil {
			return nil, err
		}
	}
	s.store = &store{kv: kv, clients: s.clients, o: &s.o, onReuse: s.refreshReused, resourceOf: s.grantResource}
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

// scopeOfflineAccess asks for a refresh token (SEP-2207).
const scopeOfflineAccess = "offline_access"

// refreshScopes is fosite's RefreshTokenScopes for refresh_tokens: none
// needed (always), or offline_access.
func refreshScopes(mode string) []string {
	if mode == scopeOfflineAccess {
		return []string{scopeOfflineAccess}
	}
	return []string{}
}

// Issuer is the issuer identifier tokens carry.
func (s *Server) Issuer() string { return s.o.Issuer }

// KeySet is the in-process key set that verifies this server's tokens.
func (s *Server) KeySet() oidc.KeySet { return s.keys.oidcKeySet() }

// Handler serves the endpoints and the metadata.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+PathMetadata, cors(http.HandlerFunc(s.serveMetadata)))
	mux.Handle("GET "+PathOpenID, cors(http.HandlerFunc(s.serveMetadata)))
	mux.Handle("GET "+PathJWKS, cors(http.HandlerFunc(s.serveJWKS)))
	mux.HandleFunc("GET "+PathAuthorize, s.limit("authorize", s.serveAuthorize))
	mux.HandleFunc("GET "+PathCallback, s.serveCallback)
	mux.HandleFunc("GET "+PathConsent, s.serveConsentPage)
	mux.HandleFunc("POST "+PathConsent, s.serveConsent)
	mux.Handle("POST "+PathToken, cors(s.limit("token", s.serveToken)))
	mux.Handle("POST "+PathRevoke, cors(s.limit("revoke", s.serveRevoke)))
	corsPaths := []string{PathMetadata, PathOpenID, PathJWKS, PathToken, PathRevoke}
	if s.registrar != nil {
		mux.Handle("POST "+PathRegister, cors(s.limit("register", s.serveRegister)))
		corsPaths = append(corsPaths, PathRegister)
	}
	for _, p := range corsPaths {
		mux.Handle("OPTIONS "+p, cors(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	}
	return mux
}

// Paths are the paths Handler serves, for the caller's mux.
func (s *Server) Paths() []string {
	return []string{PathMetadata, PathOpenID, "/oauth/"}
}

// cors lets a browser-based client on any origin read the metadata and
// call the token endpoints: they take no cookies, and their answers are
// for whoever holds the code or token sent.
func cors(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Access-Control-Allow-Origin", "*")
		if r.Method == http.MethodOptions {
			hd.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
			hd.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, MCP-Protocol-Version")
			hd.Set("Access-Control-Max-Age", "600")
		}
		h.ServeHTTP(w, r)
	})
}
