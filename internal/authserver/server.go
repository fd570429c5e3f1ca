package authserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/token/jwt"

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
	// Resource is auth.resource: the only audience tokens are issued for.
	Resource string
	// Scopes are the scopes clients may ask for (auth.scopes_supported and
	// the scopes auth.policy names).
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
	// CIMDRootCAs verifies the servers of client metadata documents. Nil:
	// the system's roots.
	CIMDRootCAs *x509.CertPool
	// Now is the clock of the rate limits and the document cache. Nil:
	// time.Now.
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
	resource  string
	scopes    []string
	kv        KV
	keys      *keySet
	clients   *clientRegistry
	store     *store
	idp       *idp
	provider  fosite.OAuth2Provider
	logger    *slog.Logger
	observe   func(Event)
	secure    bool // the issuer is https: cookies are Secure
	rate      *addressLimiter
	registrar *registrar // nil: registration off
	// keepIdPTokens: see Deps.KeepIdPTokens; sealer encrypts them.
	keepIdPTokens bool
	sealer        *sealer
}

// New builds the authorization server of o (defaults applied, validated).
func New(o Options, deps Deps) (*Server, error) {
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
		o:        o,
		resource: deps.Resource,
		scopes:   slices.Clone(deps.Scopes),
		kv:       kv,
		keys:     keys,
		logger:   logger,
		observe:  deps.Observe,
		secure:   strings.HasPrefix(o.Issuer, "https://"),
	}
	// offline_access is always offered (SEP-2207: a client asks for it
	// when the metadata lists it); refresh_tokens says whether it is needed.
	if !slices.Contains(s.scopes, scopeOfflineAccess) {
		s.scopes = append(s.scopes, scopeOfflineAccess)
	}
	if s.observe == nil {
		s.observe = func(Event) {}
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
	s.clients = newClientRegistry(o, s.resource, s.scopes, kv, fetcher)
	if o.Registration.Mode != RegistrationOff {
		if s.registrar, err = newRegistrar(o.Registration, now); err != nil {
			return nil, err
		}
	}
	s.store = &store{kv: kv, clients: s.clients, o: &s.o, onReuse: s.refreshReused}
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
		CoreStrategy: compose.NewOAuth2JWTStrategy(keys.privateKey, compose.NewOAuth2HMACStrategy(cfg), cfg),
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

// grants are the grant types the token endpoint takes: jwt-bearer (an
// enterprise IdP's ID-JAG) when enterprise_idps are configured.
func (s *Server) grants() []string {
	g := []string{grantCode, grantRefresh}
	if len(s.o.EnterpriseIdPs) > 0 {
		g = append(g, grantJWTBearer)
	}
	return g
}

// metadata is the RFC 8414 document.
func (s *Server) metadata() map[string]any {
	iss := s.o.Issuer
	m := map[string]any{
		"issuer":                                         iss,
		"authorization_endpoint":                         iss + PathAuthorize,
		"token_endpoint":                                 iss + PathToken,
		"revocation_endpoint":                            iss + PathRevoke,
		"jwks_uri":                                       iss + PathJWKS,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          s.grants(),
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"scopes_supported":                               nonNil(s.scopes),
		"authorization_response_iss_parameter_supported": true,
		"client_id_metadata_document_supported":          s.clients.fetcher != nil,
		// OpenID discovery's required members; this server issues access
		// tokens only, no ID tokens.
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
	}
	if s.registrar != nil {
		m["registration_endpoint"] = iss + PathRegister
	}
	if len(s.o.EnterpriseIdPs) > 0 {
		// draft-ietf-oauth-identity-assertion-authz-grant: how MCP
		// clients find that this server takes ID-JAGs.
		m["authorization_grant_profiles_supported"] = []string{idjagProfile}
	}
	return m
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) serveMetadata(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.metadata())
}

func (s *Server) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.keys.public())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errInvalidTarget is RFC 8707's error for a resource this server does
// not issue tokens for.
func (s *Server) errInvalidTarget() *fosite.RFC6749Error {
	return &fosite.RFC6749Error{
		ErrorField:       "invalid_target",
		DescriptionField: "The requested resource is invalid, missing, unknown, or malformed.",
		HintField:        fmt.Sprintf("This server issues tokens for the resource %s only; send it as the resource parameter (RFC 8707).", s.resource),
		CodeField:        http.StatusBadRequest,
	}
}

// storeError maps a store outage to 503 temporarily_unavailable.
func storeError(err error) error {
	if errors.Is(err, ErrUnavailable) {
		return fosite.ErrTemporarilyUnavailable.WithWrap(err).WithHint("The authorization server's store is unavailable; try again shortly.")
	}
	return err
}

// login is a sign-in in progress: the client's authorize request, waiting
// for the user to sign in at the provider and consent.
type login struct {
	ID       string     `json:"id"`
	Form     url.Values `json:"form"`
	ClientID string     `json:"client_id"`
	Browser  string     `json:"browser"` // SHA-256 of the browser's cookie
	State    string     `json:"state"`
	Nonce    string     `json:"nonce"`
	Verifier string     `json:"verifier"`
	User     *User      `json:"user,omitempty"`
	CSRF     string     `json:"csrf"`
}

// cookieName is the browser-binding cookie: the sign-in continues only in
// the browser that started it.
func (s *Server) cookieName() string {
	if s.secure {
		return "__Host-portcullis-login"
	}
	return "portcullis-login"
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashString(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}

// browserID returns the browser's binding secret, setting the cookie when
// the browser has none.
func (s *Server) browserID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(s.cookieName()); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	v := randomString(32)
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: v, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.o.LoginTTL / time.Second),
	})
	return v
}

// sameBrowser reports whether r comes from the browser that started l.
func (s *Server) sameBrowser(r *http.Request, l *login) bool {
	c, err := r.Cookie(s.cookieName())
	return err == nil && subtle.ConstantTimeCompare([]byte(hashString(c.Value)), []byte(l.Browser)) == 1
}

func (s *Server) saveLogin(ctx context.Context, l *login) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, joinKey("login", l.ID), b, s.o.LoginTTL)
}

func (s *Server) loadLogin(ctx context.Context, id string, take bool) (*login, error) {
	get := s.kv.Get
	if take {
		get = s.kv.GetDel
	}
	b, err := get(ctx, joinKey("login", id))
	if err != nil {
		return nil, err
	}
	var l login
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	return &l, nil
}

// serveAuthorize validates the client's request, then sends the browser
// to the identity provider.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.refuseAuthorize(w, r, ar, err, "invalid_request")
		return
	}
	form := ar.GetRequestForm()
	if m := form.Get("response_mode"); m != "" && m != "query" {
		s.refuseAuthorize(w, r, ar, fosite.ErrUnsupportedResponseMode.WithHint("This server answers in the query only (response_mode query)."), "response_mode")
		return
	}
	if res := form["resource"]; len(res) != 1 || res[0] != s.resource {
		s.refuseAuthorize(w, r, ar, s.errInvalidTarget(), "invalid_target")
		return
	}
	if form.Get("code_challenge") == "" || form.Get("code_challenge_method") != "S256" {
		s.refuseAuthorize(w, r, ar, fosite.ErrInvalidRequest.WithHint("PKCE is required: send code_challenge with code_challenge_method S256."), "pkce")
		return
	}
	l := &login{
		ID:       randomString(24),
		Form:     form,
		ClientID: ar.GetClient().GetID(),
		Browser:  hashString(s.browserID(w, r)),
		State:    randomString(24),
		Nonce:    randomString(24),
		Verifier: randomString(48),
		CSRF:     randomString(24),
	}
	// The parameters that carry no secret are what finishing needs; the
	// form of an authorize request has none.
	authURL, err := s.idp.authURL(ctx, l.State, l.Nonce, l.Verifier)
	if err != nil {
		s.logger.Error("authorization server: identity provider unavailable", "error", err)
		s.observe(Event{Endpoint: "authorize", Outcome: "error", Reason: "idp_unavailable"})
		s.writeAuthorizeError(w, ar, fosite.ErrTemporarilyUnavailable.WithHint("The identity provider cannot be reached; try again shortly."))
		return
	}
	if err := s.saveLogin(ctx, l); err != nil {
		s.storeFailed(w, r, ar, "authorize", err)
		return
	}
	if err := s.kv.Set(ctx, joinKey("login-state", hashString(l.State)), []byte(l.ID), s.o.LoginTTL); err != nil {
		s.storeFailed(w, r, ar, "authorize", err)
		return
	}
	s.observe(Event{Endpoint: "authorize", Outcome: "ok"})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// refuseAuthorize answers an authorize request fosite or a check refused:
// to the client's redirect URI once fosite trusts it, else on a page.
func (s *Server) refuseAuthorize(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, err error, reason string) {
	s.observe(Event{Endpoint: "authorize", Outcome: "refused", Reason: reason})
	s.writeAuthorizeError(w, ar, err)
}

func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, endpoint string, err error) {
	s.logger.Error("authorization server: store failed", "endpoint", endpoint, "error", err)
	s.observe(Event{Endpoint: endpoint, Outcome: "error", Reason: "store"})
	if ar != nil {
		s.writeAuthorizeError(w, ar, storeError(err))
		return
	}
	s.page(w, http.StatusServiceUnavailable, "Try again shortly", "The sign-in service is temporarily unavailable.")
}

// serveCallback is where the identity provider sends the browser back.
func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	idb, err := s.kv.GetDel(ctx, joinKey("login-state", hashString(q.Get("state"))))
	if errors.Is(err, ErrNotFound) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "unknown_state"})
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown or has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	l, err := s.loadLogin(ctx, string(idb), false)
	if errors.Is(err, ErrNotFound) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "expired"})
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	if !s.sameBrowser(r, l) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "browser"})
		s.page(w, http.StatusBadRequest, "Sign-in refused", "This sign-in was started in another browser.")
		return
	}
	if e := q.Get("error"); e != "" {
		s.logger.Warn("authorization server: the identity provider refused the sign-in", "client_id", l.ClientID, "idp_error", e)
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "idp_refused"})
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("The identity provider did not sign the user in."))
		return
	}
	u, idpTok, err := s.idp.exchange(ctx, q.Get("code"), l.Verifier, l.Nonce)
	if err != nil {
		s.logger.Warn("authorization server: sign-in failed", "client_id", l.ClientID, "error", err)
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "sign_in"})
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("Signing in at the identity provider failed."))
		return
	}
	s.logger.Info("audit", "event", "sign_in", "client_id", l.ClientID, "sub", u.Subject, "email", u.Email)
	if s.keepIdPTokens {
		if err := s.saveIdPToken(ctx, u.Subject, idpTok); err != nil {
			s.logger.Warn("authorization server: the identity provider's token was not kept; upstreams that exchange it refuse this user until the next sign-in", "error", err)
		}
	}
	s.observe(Event{Endpoint: "callback", Outcome: "ok"})
	l.User = &u
	scopes := strings.Fields(l.Form.Get("scope"))
	if s.consented(ctx, u, l.ClientID, scopes) {
		_ = s.kv.Del(ctx, joinKey("login", l.ID))
		s.finish(w, r, l)
		return
	}
	if err := s.saveLogin(ctx, l); err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	http.Redirect(w, r, PathConsent+"?login="+url.QueryEscape(l.ID), http.StatusSeeOther)
}

// consentKey names a user's remembered approval of a client.
func consentKey(u User, clientID string) string {
	return joinKey("consent", hashString(u.Subject), hashString(clientID))
}

// consented reports whether u approved clientID for every one of scopes
// within consent.remember_for. A store failure asks again.
func (s *Server) consented(ctx context.Context, u User, clientID string, scopes []string) bool {
	if s.o.Consent.RememberFor < 0 {
		return false
	}
	b, err := s.kv.Get(ctx, consentKey(u, clientID))
	if err != nil {
		return false
	}
	var granted []string
	if json.Unmarshal(b, &granted) != nil {
		return false
	}
	for _, sc := range scopes {
		if !slices.Contains(granted, sc) {
			return false
		}
	}
	return true
}

func (s *Server) remember(ctx context.Context, u User, clientID string, scopes []string) {
	if s.o.Consent.RememberFor < 0 {
		return
	}
	var granted []string
	if b, err := s.kv.Get(ctx, consentKey(u, clientID)); err == nil {
		_ = json.Unmarshal(b, &granted)
	}
	for _, sc := range scopes {
		if !slices.Contains(granted, sc) {
			granted = append(granted, sc)
		}
	}
	b, _ := json.Marshal(nonNil(granted))
	if err := s.kv.Set(ctx, consentKey(u, clientID), b, s.o.Consent.RememberFor); err != nil {
		s.logger.Warn("authorization server: consent not remembered", "error", err)
	}
}

// replay rebuilds the client's authorize request from l, so fosite
// validates it again (the client may have changed since).
func (s *Server) replay(r *http.Request, l *login) (fosite.AuthorizeRequester, error) {
	r2 := r.Clone(r.Context())
	r2.Method = http.MethodGet
	r2.URL = &url.URL{Path: PathAuthorize, RawQuery: l.Form.Encode()}
	r2.Form, r2.PostForm, r2.MultipartForm = nil, nil, nil
	r2.Body, r2.ContentLength = http.NoBody, 0
	r2.Header.Del("Content-Type")
	return s.provider.NewAuthorizeRequest(r.Context(), r2)
}

// finish issues the code for l's approved request and sends the browser
// back to the client with it and the issuer (RFC 9207).
func (s *Server) finish(w http.ResponseWriter, r *http.Request, l *login) {
	ctx := r.Context()
	ar, err := s.replay(r, l)
	if err != nil {
		s.refuseAuthorize(w, r, ar, err, "invalid_request")
		return
	}
	for _, sc := range ar.GetRequestedScopes() {
		if s.mayGrant(*l.User, sc) {
			ar.GrantScope(sc)
		}
	}
	ar.GrantAudience(s.resource)
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, sessionFor(*l.User, l.ClientID, s.keys.signer().KeyID))
	if err != nil {
		s.logger.Warn("authorization server: authorization refused", "client_id", l.ClientID, "error", err)
		s.observe(Event{Endpoint: "consent", Outcome: "error", Reason: "issue"})
		s.writeAuthorizeError(w, ar, storeError(err))
		return
	}
	s.clients.touch(ctx, ar.GetClient())
	s.logger.Info("audit", "event", "code_issued", "client_id", l.ClientID, "sub", l.User.Subject, "scope", strings.Join(ar.GetGrantedScopes(), " "))
	s.writeAuthorizeResponse(w, ar, resp)
}

// mayGrant reports whether u may be granted scope (authorization_server.scopes).
func (s *Server) mayGrant(u User, scope string) bool {
	for _, r := range s.o.Scopes {
		if r.Scope == scope {
			for _, g := range r.Groups {
				if slices.Contains(u.Groups, g) {
					return true
				}
			}
			return false
		}
	}
	return true
}

// grantable splits the requested scopes into those u may be granted and
// those withheld.
func (s *Server) grantable(u User, requested []string) (grant, withheld []string) {
	for _, sc := range requested {
		if s.mayGrant(u, sc) {
			grant = append(grant, sc)
		} else {
			withheld = append(withheld, sc)
		}
	}
	return grant, withheld
}

// finishError sends the browser back to the client with err.
func (s *Server) finishError(w http.ResponseWriter, r *http.Request, l *login, err error) {
	_ = s.kv.Del(r.Context(), joinKey("login", l.ID))
	ar, rerr := s.replay(r, l)
	if rerr != nil {
		s.writeAuthorizeError(w, ar, rerr)
		return
	}
	s.writeAuthorizeError(w, ar, err)
}

// serveToken is the token endpoint.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.observe(Event{Endpoint: "token", Outcome: "refused", Reason: "invalid_request"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), fosite.ErrInvalidRequest.WithHint("The body is not a form within 64 KiB."))
		return
	}
	grant := r.PostForm.Get("grant_type")
	if !slices.Contains(s.grants(), grant) {
		s.observe(Event{Endpoint: "token", Grant: "other", Outcome: "refused", Reason: "unsupported_grant_type"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), fosite.ErrUnsupportedGrantType.WithHintf("Supported: %s.", strings.Join(s.grants(), ", ")))
		return
	}
	if res, ok := r.PostForm["resource"]; ok && (len(res) != 1 || res[0] != s.resource) {
		s.observe(Event{Endpoint: "token", Grant: grant, Outcome: "refused", Reason: "invalid_target"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), s.errInvalidTarget())
		return
	}
	ar, err := s.provider.NewAccessRequest(ctx, r, newSession())
	if err != nil {
		s.tokenRefused(w, r, ar, grant, err)
		return
	}
	if grant == grantRefresh && !slices.Contains(ar.GetGrantedAudience(), s.resource) {
		s.tokenRefused(w, r, ar, grant, s.errInvalidTarget())
		return
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.tokenRefused(w, r, ar, grant, err)
		return
	}
	s.observe(Event{Endpoint: "token", Grant: grant, Outcome: "ok"})
	s.logger.Info("audit", "event", "token_issued", "grant", grant, "client_id", ar.GetClient().GetID(), "sub", ar.GetSession().GetSubject())
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

func (s *Server) tokenRefused(w http.ResponseWriter, r *http.Request, ar fosite.AccessRequester, grant string, err error) {
	reason := ""
	switch {
	case errors.Is(err, ErrUnavailable):
		reason = "store"
	case grant == grantRefresh && errors.Is(err, fosite.ErrInactiveToken):
		// A used refresh token: its family is revoked (see refreshReused).
		reason = "refresh_reuse"
	}
	err = storeError(err)
	rfc := fosite.ErrorToRFC6749Error(err)
	// A refusal of the ID-JAG grant names its reason and logged its cause.
	ref := (*refusal)(nil)
	if errors.As(err, &ref) {
		reason = ref.reason
	}
	outcome := "refused"
	if rfc.CodeField >= 500 {
		outcome = "error"
		if ref == nil {
			s.logger.Error("authorization server: token endpoint failed", "grant", grant, "error", err)
		}
	}
	if reason == "" {
		reason = rfc.ErrorField
	}
	s.observe(Event{Endpoint: "token", Grant: grant, Outcome: outcome, Reason: reason})
	if ar == nil {
		ar = fosite.NewAccessRequest(newSession())
	}
	s.provider.WriteAccessError(r.Context(), w, ar, err)
}

// refreshReused is told when a used refresh token is presented: fosite
// revokes its family; this leaves the audit line (tokenRefused counts it,
// once, as reason refresh_reuse).
func (s *Server) refreshReused(_ context.Context, clientID, subject string) {
	s.logger.Warn("audit", "event", "refresh_reuse", "client_id", clientID, "sub", subject)
}

// serveRevoke is the RFC 7009 revocation endpoint.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	err := s.provider.NewRevocationRequest(ctx, r)
	outcome := "ok"
	if err != nil {
		outcome = "refused"
	}
	s.observe(Event{Endpoint: "revoke", Outcome: outcome})
	s.provider.WriteRevocationResponse(ctx, w, err)
}
