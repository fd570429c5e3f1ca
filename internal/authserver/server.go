package authserver

import (
	"context"
	"crypto/x509"
	"log/slog"
	"net/http"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// Paths of the endpoints, under the issuer.
const (
	PathAuthorize = "/oauth/authorize"
	PathCallback  = "/oauth/callback"
	PathConsent   = "/oauth/consent"
	PathContinue  = "/oauth/continue"
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
	KV kv.KV
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
	// encrypted, for [Server.IdPAccessToken] and [Server.IdPIDToken]: set
	// when an upstream presents them for a token of its own
	// (upstreams[].oauth.grant token_exchange, jwt_bearer, id_jag). Off,
	// they are dropped after sign-in.
	KeepIdPTokens bool
	// NextConnection chains the accounts a server needs into its
	// sign-in, after the identity provider and before the consent page:
	// it returns the URL of the flow that connects the first account the
	// user subject lacks for resource, leaving out those attempted in
	// this sign-in already, which returns to returnTo once done; and the
	// account's name. An empty URL: nothing is missing. Nil: none is
	// chained.
	NextConnection func(ctx context.Context, subject, resource string, attempted []string, returnTo string) (name, url string, err error)
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
	kv        kv.KV
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
	// nextConnection: see Deps.NextConnection.
	nextConnection func(ctx context.Context, subject, resource string, attempted []string, returnTo string) (name, url string, err error)
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

// Issuer is the issuer identifier tokens carry.
func (s *Server) Issuer() string { return s.o.Issuer }

// KeySet is the in-process key set that verifies this server's tokens.
func (s *Server) KeySet() oidc.KeySet { return s.keys.oidcKeySet() }
