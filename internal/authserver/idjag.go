package authserver

// Enterprise-managed authorization: the token endpoint exchanges an
// Identity Assertion JWT Authorization Grant (ID-JAG,
// draft-ietf-oauth-identity-assertion-authz-grant; the MCP extension
// io.modelcontextprotocol/enterprise-managed-authorization, SEP-990) that a
// configured enterprise IdP issued for this server, presented with the
// RFC 7523 jwt-bearer grant, for an access token: no browser, no consent
// page, the IdP's policy decided.
//
// The grant is a fosite TokenEndpointHandler of this package rather than
// fosite's rfc7523 handler, which cannot express the profile: it wants the
// token endpoint URL in aud (an ID-JAG carries the issuer, as a single
// value), checks no typ, no client_id claim and no resource, grants the
// assertion's aud as the token's audience, takes scopes from a per-key
// list instead of the assertion, answers a replay with the non-standard
// jti_known, and checks and marks the jti in two steps, so two replicas
// could both accept one assertion. fosite still authenticates the client,
// issues and stores the access token (oauth2.HandleHelper) and writes the
// response and every error.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/ory/fosite"
	"github.com/ory/fosite/compose"
	"github.com/ory/fosite/handler/oauth2"

	"github.com/portcullis-mcp/portcullis/internal/jwks"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// assertionAlgs are the signature algorithms an ID-JAG may use: the
// asymmetric ones (never none, never an HMAC whose key would be public).
var assertionAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512,
	jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512,
	jose.EdDSA,
}

// refusal is an error of the ID-JAG grant with the short fixed reason its
// Event carries; fosite writes the wrapped RFC 6749 error.
type refusal struct {
	reason string
	err    *fosite.RFC6749Error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason string, err *fosite.RFC6749Error) *refusal {
	return &refusal{reason: reason, err: err}
}

// badGrant is an invalid_grant refusal with hint.
func badGrant(reason, hint string) *refusal {
	return refuse(reason, fosite.ErrInvalidGrant.WithHint(hint))
}

// idjagClaims are the claims of an ID-JAG this server reads.
type idjagClaims struct {
	Issuer    string          `json:"iss"`
	Subject   string          `json:"sub"`
	Audience  json.RawMessage `json:"aud"`
	ClientID  string          `json:"client_id"`
	JTI       string          `json:"jti"`
	Expiry    *numericDate    `json:"exp"`
	IssuedAt  *numericDate    `json:"iat"`
	NotBefore *numericDate    `json:"nbf"`
	Resource  json.RawMessage `json:"resource"`
	Scope     *string         `json:"scope"`
	// Cnf and AuthorizationDetails are refused: this server verifies no
	// proof of possession (DPoP) and grants no RFC 9396 details, so it
	// cannot honour an assertion that asks for them.
	Cnf                  json.RawMessage `json:"cnf"`
	AuthorizationDetails json.RawMessage `json:"authorization_details"`
}

// numericDate is a JWT NumericDate: seconds since the epoch, possibly
// fractional.
type numericDate struct{ time.Time }

func (d *numericDate) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f < 0 || f >= 1e11 { // 1e11 s is in the year 5138
		return fmt.Errorf("not a NumericDate: %.40s", b)
	}
	sec := int64(f)
	d.Time = time.Unix(sec, int64((f-float64(sec))*1e9))
	return nil
}

// stringOrList reads a claim that is a string or an array of strings.
func stringOrList(raw json.RawMessage) ([]string, error) {
	var one string
	if err := json.Unmarshal(raw, &one); err == nil {
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("neither a string nor an array of strings")
	}
	return list, nil
}

// present reports whether a claim was sent (null counts as absent).
func present(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// isIDJAGType reports whether typ names an ID-JAG: media type names are
// case-insensitive and may omit "application/" (RFC 7515 §4.1.9).
func isIDJAGType(typ string) bool {
	typ = strings.ToLower(typ)
	return typ == idjagType || typ == "application/"+idjagType
}

// idjagHandler is the token endpoint's handler of the jwt-bearer grant
// carrying an ID-JAG.
type idjagHandler struct {
	s      *Server
	idps   map[string]*enterpriseIdP
	config fosite.AccessTokenLifespanProvider
	helper *oauth2.HandleHelper
	now    func() time.Time
}

// idjagFactory is the compose factory of the grant's handler; client
// fetches the providers' keys.
func (s *Server) idjagFactory(client *http.Client) compose.Factory {
	return func(config fosite.Configurator, storage, strategy any) any {
		h := &idjagHandler{
			s:      s,
			config: config,
			helper: &oauth2.HandleHelper{
				AccessTokenStrategy: strategy.(oauth2.AccessTokenStrategy),
				AccessTokenStorage:  storage.(oauth2.AccessTokenStorage),
				Config:              config,
			},
			now: s.now,
		}
		h.idps = newEnterpriseIdPs(s.o.EnterpriseIdPs, client, func() time.Time { return h.now() }, func(issuer string, err error) {
			if err == nil {
				s.logger.Info("authorization server: enterprise identity provider keys fetched again", "idp", issuer)
				return
			}
			s.logger.Error("authorization server: enterprise identity provider keys unavailable", "idp", issuer, "error", err)
		})
		return h
	}
}

var _ fosite.TokenEndpointHandler = (*idjagHandler)(nil)

func (h *idjagHandler) CanHandleTokenEndpointRequest(_ context.Context, ar fosite.AccessRequester) bool {
	return ar.GetGrantTypes().ExactOne(grantJWTBearer)
}

// CanSkipClientAuth is false: the client is identified (client_id; a
// client with credentials authenticates), since the assertion's client_id
// must name it.
func (h *idjagHandler) CanSkipClientAuth(context.Context, fosite.AccessRequester) bool { return false }

// HandleTokenEndpointRequest validates the assertion and, when it holds,
// burns its jti and sets the session, scopes and audience of the token.
func (h *idjagHandler) HandleTokenEndpointRequest(ctx context.Context, ar fosite.AccessRequester) error {
	if !h.CanHandleTokenEndpointRequest(ctx, ar) {
		return fosite.ErrUnknownRequest
	}
	e, err := h.handle(ctx, ar)
	if err != nil {
		h.refused(e, ar.GetClient().GetID(), err)
	}
	return err
}

func (h *idjagHandler) handle(ctx context.Context, ar fosite.AccessRequester) (*enterpriseIdP, error) {
	client := ar.GetClient()
	e, c, err := h.verify(ctx, ar)
	if err != nil {
		return e, err
	}
	// The scopes are checked against the resource's, but a refusal of
	// them comes before one of the resource.
	res, resErr := h.resource(c, ar)
	granted, err := h.grant(e, c, ar, res)
	if err != nil {
		return e, err
	}
	if resErr != nil {
		return e, resErr
	}
	var claims map[string]any
	if err := json.Unmarshal(c.raw, &claims); err != nil {
		return e, badGrant("malformed", "The assertion's claims are not a JSON object.")
	}
	u, err := e.mapper.user(c.Subject, claims)
	if err != nil {
		return e, badGrant("subject", "The assertion's user is not allowed here.")
	}
	// Single use: of two presentations, on any replica, one gets past
	// this; the jti is remembered for as long as the assertion would be
	// accepted.
	ttl := max(c.Expiry.Add(assertionLeeway).Sub(h.now()), time.Second)
	ok, err := h.s.kv.SetNX(ctx, kv.Join("idjag-jti", kv.Hash(e.o.Issuer), kv.Hash(c.JTI)), kv.Nonce(), ttl)
	if err != nil {
		return e, err // the token endpoint answers 503 for a store outage
	}
	if !ok {
		return e, badGrant("replay", "The assertion was already used: ask the identity provider for a new one.")
	}
	sess := sessionFor(u, client.GetID(), h.s.keys.signer().KeyID)
	lifespan := fosite.GetEffectiveLifespan(client, fosite.GrantTypeJWTBearer, fosite.AccessToken, h.config.GetAccessTokenLifespan(ctx))
	sess.SetExpiresAt(fosite.AccessToken, h.now().UTC().Add(lifespan).Round(time.Second))
	ar.SetSession(sess)
	// authorization_server.scopes applies as in a sign-in: a scope of a
	// rule only for users of its groups.
	granted, _ = h.s.grantable(u, granted)
	for _, sc := range granted {
		ar.GrantScope(sc)
	}
	ar.GrantAudience(res)
	h.s.logger.Info("audit", "event", "assertion_accepted", "idp", e.o.Issuer, "client_id", client.GetID(), "sub", u.Subject, "jti", c.JTI, "resource", res, "scope", strings.Join(granted, " "))
	return e, nil
}

// PopulateTokenEndpointResponse issues the access token, and no refresh
// token: the draft says a server SHOULD NOT, the client asks the provider
// for a new assertion instead.
func (h *idjagHandler) PopulateTokenEndpointResponse(ctx context.Context, ar fosite.AccessRequester, resp fosite.AccessResponder) error {
	if !h.CanHandleTokenEndpointRequest(ctx, ar) {
		return fosite.ErrUnknownRequest
	}
	lifespan := fosite.GetEffectiveLifespan(ar.GetClient(), fosite.GrantTypeJWTBearer, fosite.AccessToken, h.config.GetAccessTokenLifespan(ctx))
	if _, err := h.helper.IssueAccessToken(ctx, lifespan, ar, resp); err != nil {
		return err
	}
	// The draft asks for the granted resource in the response.
	resp.SetExtra("resource", h.s.grantResource(ar))
	return nil
}

// verifiedAssertion is an assertion whose signature verified.
type verifiedAssertion struct {
	idjagClaims
	raw []byte // the verified payload
}

// verify checks the assertion's form, typ, issuer and signature, then
// its claims: everything that does not depend on the request but the
// client. It returns the provider when it is known, for the audit line.
func (h *idjagHandler) verify(ctx context.Context, ar fosite.AccessRequester) (*enterpriseIdP, *verifiedAssertion, error) {
	raw := ar.GetRequestForm().Get("assertion")
	if raw == "" {
		return nil, nil, refuse("invalid_request", fosite.ErrInvalidRequest.WithHint("The assertion parameter is required with the jwt-bearer grant: the ID-JAG from your identity provider."))
	}
	if len(raw) > maxAssertionBytes {
		return nil, nil, badGrant("malformed", "The assertion is too large.")
	}
	jws, err := jose.ParseSignedCompact(raw, assertionAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, nil, badGrant("malformed", "The assertion is not a compact JWT signed with an asymmetric algorithm.")
	}
	typ, _ := jws.Signatures[0].Header.ExtraHeaders[jose.HeaderType].(string)
	if !isIDJAGType(typ) {
		return nil, nil, badGrant("typ", "The assertion's JOSE header typ must be "+idjagType+": only an Identity Assertion JWT Authorization Grant is accepted.")
	}
	var unverified struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &unverified); err != nil {
		return nil, nil, badGrant("malformed", "The assertion's claims are not a JSON object.")
	}
	e := h.idps[unverified.Issuer]
	if e == nil {
		return nil, nil, badGrant("unknown_issuer", "The assertion's issuer is not an enterprise identity provider this server trusts.")
	}
	payload, err := e.keys.Verify(ctx, jws)
	if errors.Is(err, jwks.ErrUnavailable) {
		return e, nil, h.unavailable()
	}
	if err != nil {
		return e, nil, badGrant("signature", "The assertion's signature does not verify with the identity provider's keys.")
	}
	// The verified payload is the one peeked at: a compact JWS has one, so
	// its iss is e's.
	c := &verifiedAssertion{raw: payload}
	if err := json.Unmarshal(payload, &c.idjagClaims); err != nil {
		return e, nil, badGrant("malformed", "The assertion's claims are malformed: iss, sub, client_id, jti and scope are strings, exp, iat and nbf numbers.")
	}
	if err := h.checkClaims(e, c); err != nil {
		return e, nil, err
	}
	return e, c, nil
}

// checkClaims checks the audience, lifetime, subject, jti, resource and
// what this server cannot honour.
func (h *idjagHandler) checkClaims(e *enterpriseIdP, c *verifiedAssertion) error {
	if aud, err := stringOrList(c.Audience); err != nil || len(aud) != 1 || aud[0] != h.s.o.Issuer {
		return badGrant("audience", "The assertion's aud must be exactly this authorization server's issuer, "+h.s.o.Issuer+".")
	}
	now := h.now()
	switch {
	case c.Expiry == nil || c.IssuedAt == nil:
		return badGrant("malformed", "The assertion must carry exp and iat.")
	case now.After(c.Expiry.Add(assertionLeeway)):
		return badGrant("expired", "The assertion has expired: ask the identity provider for a new one.")
	case c.IssuedAt.After(now.Add(assertionLeeway)):
		return badGrant("lifetime", "The assertion's iat is in the future.")
	case c.NotBefore != nil && c.NotBefore.After(now.Add(assertionLeeway)):
		return badGrant("lifetime", "The assertion is not valid yet (nbf).")
	case !c.Expiry.After(c.IssuedAt.Time):
		return badGrant("lifetime", "The assertion's exp is not after its iat.")
	case c.Expiry.Sub(c.IssuedAt.Time) > e.o.MaxAssertionLifetime:
		return badGrant("lifetime", fmt.Sprintf("The assertion is valid for longer than the %s this server accepts from its identity provider.", e.o.MaxAssertionLifetime))
	}
	if c.Subject == "" {
		return badGrant("subject", "The assertion must name the user in sub.")
	}
	if c.JTI == "" {
		return badGrant("malformed", "The assertion must carry a jti: it is single use.")
	}
	if present(c.Resource) {
		if res, err := stringOrList(c.Resource); err != nil || len(res) != 1 {
			return badGrant("resource", "The assertion's resource must be one resource.")
		} else if _, ok := h.s.resource(res[0]); !ok {
			return badGrant("resource", "The assertion is for a resource this server does not issue tokens for. "+h.s.invalidTargetHint())
		}
	}
	if present(c.Cnf) {
		return badGrant("unsupported", "The assertion is bound to a key (cnf), and this server verifies no proof of possession.")
	}
	if present(c.AuthorizationDetails) {
		return badGrant("unsupported", "The assertion carries authorization_details, which this server does not support.")
	}
	return nil
}

// grant checks the assertion against the request (client, audience,
// scopes) and returns the scopes to grant: those the request asks for,
// each of which the assertion must grant when it has a scope claim; or,
// when the request asks for none, the assertion's. Every one must be a
// scope of the client and one this server offers for res, the resource
// the token is for (any resource's when res is none of them).
func (h *idjagHandler) grant(e *enterpriseIdP, c *verifiedAssertion, ar fosite.AccessRequester, res string) ([]string, error) {
	client := ar.GetClient()
	if !client.GetGrantTypes().Has(grantJWTBearer) {
		return nil, refuse("client", fosite.ErrUnauthorizedClient.WithHint("The client may not use the jwt-bearer grant."))
	}
	if c.ClientID == "" || c.ClientID != client.GetID() {
		return nil, badGrant("client", "The assertion's client_id is not the client making this request.")
	}
	if len(e.o.Clients) > 0 && !slices.Contains(e.o.Clients, client.GetID()) {
		return nil, badGrant("client", "This identity provider's assertions are not accepted for this client.")
	}
	r, known := h.s.resource(res)
	offered := func(sc string) bool {
		if known && !h.s.offers(r, sc) || !slices.Contains(h.s.scopes, sc) {
			return false
		}
		return fosite.ExactScopeStrategy(client.GetScopes(), sc)
	}
	requested := ar.GetRequestedScopes()
	for _, sc := range requested {
		if !offered(sc) {
			err := fosite.ErrInvalidScope.WithHintf("The scope %q is not one this server offers.", sc)
			if known {
				err = h.s.errScopeNotOffered(r, sc)
			}
			return nil, refuse("scope", err)
		}
	}
	if c.Scope == nil {
		return requested, nil
	}
	asserted := strings.Fields(*c.Scope)
	for _, sc := range asserted {
		if !offered(sc) {
			return nil, badGrant("scope", "The assertion grants a scope this server does not offer for its resource.")
		}
	}
	if len(requested) == 0 {
		return asserted, nil
	}
	for _, sc := range requested {
		if !slices.Contains(asserted, sc) {
			return nil, refuse("scope", fosite.ErrInvalidScope.WithHintf("The scope %q is more than the assertion grants.", sc))
		}
	}
	return requested, nil
}

// resource returns the resource the token is for: the one the assertion
// names (checkClaims made sure it is one of this server's), else the one
// the request names (the resource parameter, or fosite's audience), else
// the first, the root server's. What the request names must be that one.
func (h *idjagHandler) resource(c *verifiedAssertion, ar fosite.AccessRequester) (string, error) {
	var named []string
	if present(c.Resource) {
		res, _ := stringOrList(c.Resource)
		named = append(named, res...)
	}
	named = append(named, ar.GetRequestForm()["resource"]...)
	named = append(named, ar.GetRequestedAudience()...)
	if len(named) == 0 {
		return h.s.resources[0].URL, nil
	}
	for _, n := range named {
		if _, ok := h.s.resource(n); !ok || n != named[0] {
			return "", refuse("invalid_target", h.s.errInvalidTarget())
		}
	}
	return named[0], nil
}

// unavailable is the refusal when the provider's keys cannot be fetched
// (the failed fetch was logged, once).
func (h *idjagHandler) unavailable() error {
	return refuse("idp_unavailable", fosite.ErrTemporarilyUnavailable.WithHint("The identity provider's keys cannot be fetched; try again shortly."))
}

// refused leaves the audit line of a refused assertion: never the
// assertion, the provider only when it is one configured.
func (h *idjagHandler) refused(e *enterpriseIdP, clientID string, err error) {
	var r *refusal
	if !errors.As(err, &r) || r.reason == "idp_unavailable" {
		return
	}
	idp := ""
	if e != nil {
		idp = e.o.Issuer
	}
	h.s.logger.Warn("audit", "event", "assertion_refused", "reason", r.reason, "idp", idp, "client_id", clientID)
}
