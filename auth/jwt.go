package auth

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// issuerVerifier verifies the JWTs of one issuer with go-oidc.
type issuerVerifier struct {
	issuer    string
	algs      []string
	audiences []string // Options.Resource first, then IssuerOptions.Audiences
	required  []string
	untyped   bool // IssuerOptions.AllowUntypedAccessTokens
	roles     []string
	skew      time.Duration
	now       func() time.Time
	oidc      *oidc.IDTokenVerifier
	ready     func(context.Context) error
}

// jwtHeader is the part of the JOSE header looked at before verification.
type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

// splitJWT returns the header and payload of a compact JWS, or ok=false when
// raw does not look like one (it may be an opaque token).
func splitJWT(raw string) (header, payload []byte, ok bool) {
	h, rest, ok1 := strings.Cut(raw, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") || h == "" || p == "" {
		return nil, nil, false
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(h)
	pb, err2 := base64.RawURLEncoding.DecodeString(p)
	if err1 != nil || err2 != nil || len(hb) == 0 || hb[0] != '{' {
		return nil, nil, false
	}
	return hb, pb, true
}

// unverifiedIssuer reads "iss" from an unverified payload, only to pick the
// verifier; everything is checked again after the signature.
func unverifiedIssuer(payload []byte) (string, error) {
	var c struct {
		Iss string `json:"iss"`
	}
	if err := json.Unmarshal(payload, &c); err != nil {
		return "", err
	}
	return c.Iss, nil
}

func (v *issuerVerifier) verify(ctx context.Context, raw string, header []byte) (*Principal, error) {
	var h jwtHeader
	if err := json.Unmarshal(header, &h); err != nil {
		return nil, fail(ReasonMalformed, "JOSE header: %v", err)
	}
	if !slices.Contains(v.algs, h.Alg) {
		return nil, fail(ReasonBadSignature, "algorithm %q not allowed for issuer %s", h.Alg, v.issuer)
	}
	slot := &reasonSlot{}
	tok, err := v.oidc.Verify(context.WithValue(ctx, reasonSlotKey{}, slot), raw)
	if err != nil {
		if slot.reason != "" {
			return nil, &Error{Reason: slot.reason, Err: err}
		}
		if strings.Contains(err.Error(), "different provider") {
			return nil, &Error{Reason: ReasonWrongIssuer, Err: err}
		}
		if strings.Contains(err.Error(), "malformed jwt") {
			return nil, &Error{Reason: ReasonMalformed, Err: err}
		}
		return nil, &Error{Reason: ReasonInvalid, Err: err}
	}
	var claims map[string]json.RawMessage
	if err := tok.Claims(&claims); err != nil {
		return nil, fail(ReasonMalformed, "claims: %v", err)
	}
	// The header is part of what the signature covers: typ is the
	// issuer's word, checked once the signature is.
	if err := v.checkTokenType(h.Typ, claims); err != nil {
		return nil, err
	}
	var std struct {
		Exp *numericDate `json:"exp"`
		Nbf *numericDate `json:"nbf"`
		Iat *numericDate `json:"iat"`
	}
	if err := tok.Claims(&std); err != nil {
		return nil, fail(ReasonMalformed, "time claims: %v", err)
	}
	now := v.now()
	if std.Exp == nil {
		return nil, fail(ReasonInvalid, "token has no exp")
	}
	exp := time.Time(*std.Exp)
	if !now.Before(exp.Add(v.skew)) {
		return nil, fail(ReasonExpired, "expired at %s", exp.UTC().Format(time.RFC3339))
	}
	if std.Nbf != nil && now.Add(v.skew).Before(time.Time(*std.Nbf)) {
		return nil, fail(ReasonNotYetValid, "nbf %s is in the future", time.Time(*std.Nbf).UTC().Format(time.RFC3339))
	}
	if std.Iat != nil && now.Add(v.skew).Before(time.Time(*std.Iat)) {
		return nil, fail(ReasonNotYetValid, "iat %s is in the future", time.Time(*std.Iat).UTC().Format(time.RFC3339))
	}
	if !audienceOK(tok.Audience, v.audiences) {
		return nil, fail(ReasonWrongAudience, "aud %q names none of the accepted audiences", tok.Audience)
	}
	// RFC 9068 requires sub: without it every such token of an issuer
	// would share one identity, and with it sessions and MRTR state.
	if tok.Subject == "" {
		return nil, fail(ReasonInvalid, "token has no sub")
	}
	for _, c := range v.required {
		if val, ok := claims[c]; !ok || string(val) == "null" {
			return nil, fail(ReasonInvalid, "required claim %q missing", c)
		}
	}
	p := principalFromClaims(claims, v.roles)
	p.Issuer = tok.Issuer
	p.Subject = tok.Subject
	p.Expiry = exp
	return p, nil
}

// isAccessTokenType reports whether a JOSE header typ names a JWT access
// token (RFC 9068 section 2.1; media types compare case-insensitively).
func isAccessTokenType(typ string) bool {
	return strings.EqualFold(typ, "at+jwt") || strings.EqualFold(typ, "application/at+jwt")
}

// idTokenClaims are claims only OpenID Connect ID tokens carry (OIDC Core
// sections 2 and 3.3.2.11, FAPI's s_hash): an access token has no use for
// them.
var idTokenClaims = []string{"nonce", "at_hash", "c_hash", "s_hash"}

// checkTokenType refuses a JWT that is not an access token, so an ID
// token (or a logout or event token) the issuer signed for some client
// cannot be replayed here. RFC 9068 section 4: the typ must be at+jwt or
// application/at+jwt. For an issuer with AllowUntypedAccessTokens, a
// missing typ or the generic "JWT" is accepted too, unless the claims
// carry the marks of an ID token: one of idTokenClaims, or Keycloak's
// "typ": "ID". Any other typ is refused in every mode.
func (v *issuerVerifier) checkTokenType(typ string, claims map[string]json.RawMessage) error {
	if isAccessTokenType(typ) {
		return nil
	}
	if !v.untyped {
		return fail(ReasonWrongTokenType, "JOSE header typ %q is not at+jwt (RFC 9068); issuer %s needs allow_untyped_access_tokens if it does not type its access tokens", typ, v.issuer)
	}
	if typ != "" && !strings.EqualFold(typ, "JWT") && !strings.EqualFold(typ, "application/jwt") {
		return fail(ReasonWrongTokenType, "JOSE header typ %q is not an access token type", typ)
	}
	for _, c := range idTokenClaims {
		if _, ok := claims[c]; ok {
			return fail(ReasonWrongTokenType, "untyped token carries the ID token claim %q", c)
		}
	}
	var kc string
	if raw, ok := claims["typ"]; ok && json.Unmarshal(raw, &kc) == nil && strings.EqualFold(kc, "ID") {
		return fail(ReasonWrongTokenType, `untyped token has the claim "typ": "ID" (a Keycloak ID token)`)
	}
	return nil
}

// audienceOK reports whether any aud value is accepted. An empty accepted
// list accepts nothing (fail closed).
func audienceOK(aud, accepted []string) bool {
	for _, a := range aud {
		if a != "" && slices.Contains(accepted, a) {
			return true
		}
	}
	return false
}

// principalFromClaims reads scopes, client id and roles. Issuer, subject
// and expiry are set by the caller.
func principalFromClaims(claims map[string]json.RawMessage, rolesClaims []string) *Principal {
	p := &Principal{Claims: claims}
	if s := stringsClaim(claims["scope"]); len(s) > 0 {
		p.Scopes = s
	} else {
		p.Scopes = stringsClaim(claims["scp"])
	}
	for _, name := range []string{"client_id", "azp", "cid"} {
		var s string
		if raw, ok := claims[name]; ok && json.Unmarshal(raw, &s) == nil && s != "" {
			p.ClientID = s
			break
		}
	}
	for _, name := range rolesClaims {
		for _, r := range stringsClaim(claims[name]) {
			if !slices.Contains(p.Roles, r) {
				p.Roles = append(p.Roles, r)
			}
		}
	}
	return p
}

// stringsClaim decodes a claim that is either a space-separated string or
// an array of strings.
func stringsClaim(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.Fields(s)
	}
	var a []string
	if json.Unmarshal(raw, &a) == nil {
		out := a[:0]
		for _, x := range a {
			if x != "" {
				out = append(out, x)
			}
		}
		return out
	}
	return nil
}

// numericDate is a JWT NumericDate (seconds since the epoch, possibly
// fractional).
type numericDate time.Time

func (n *numericDate) UnmarshalJSON(b []byte) error {
	var f json.Number
	if err := json.Unmarshal(b, &f); err != nil {
		return errors.New("not a number")
	}
	x, err := f.Float64()
	if err != nil {
		return fmt.Errorf("not a number: %v", err)
	}
	sec := int64(x)
	*n = numericDate(time.Unix(sec, int64((x-float64(sec))*1e9)))
	return nil
}
