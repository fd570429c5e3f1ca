package auth

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/portcullis-mcp/portcullis/internal/bearer"
)

// Principal is the authenticated caller of a request, built from a verified
// token. Values returned by a [Verifier] may be shared between requests (the
// cache hands out the same *Principal): treat them as read-only.
type Principal struct {
	// Subject is the token's "sub" claim.
	Subject string
	// Issuer is the token's "iss" claim; for introspected tokens, the
	// configured introspection.issuer, or else the introspection endpoint
	// URL (never an "iss" the response names unchecked).
	Issuer string
	// ClientID is the OAuth client the token was issued to, from
	// "client_id", "azp" or "cid", in that order.
	ClientID string
	// Scopes from the "scope" claim (space separated) or "scp" (array or
	// string).
	Scopes []string
	// Roles from the claims named in Options.RolesClaims (each a string
	// array or a space-separated string), in order, without duplicates.
	Roles []string
	// Expiry is the token's "exp".
	Expiry time.Time
	// Claims are all the token's claims as JSON, by name (for an
	// introspected token, the introspection response's members): what
	// the policy's expression rules read as caller.claims, and the
	// audit trail as the delegation chain ("act"). Read-only, like the
	// rest of the principal.
	Claims map[string]json.RawMessage

	// tokenInfo is the SDK's view of a principal held by the verified-token
	// cache, made once before the principal is shared, so that requests
	// with a cached token allocate none.
	tokenInfo *sdkauth.TokenInfo
}

// newTokenInfo returns the SDK's TokenInfo for p, carrying p itself (see
// [PrincipalFromTokenInfo]) and raw, the token p was verified from, which
// only package internal/bearer can read back.
func (p *Principal) newTokenInfo(raw string) *sdkauth.TokenInfo {
	extra := map[string]any{tokenInfoPrincipalKey: p}
	bearer.Set(extra, raw)
	return &sdkauth.TokenInfo{Scopes: p.Scopes, Expiration: p.Expiry, UserID: p.UserID(), Extra: extra}
}

// UserID is the identity the SDK binds legacy sessions to: issuer "|" subject.
func (p *Principal) UserID() string { return p.Issuer + "|" + p.Subject }

// Key names the caller for what is counted or kept per caller: rate
// limits, legacy sessions, per-principal upstream processes. Two tokens
// share a key when they share issuer, subject and OAuth client.
func (p *Principal) Key() string { return p.Issuer + "\x00" + p.Subject + "\x00" + p.ClientID }

// HasScopes reports whether p holds every one of scopes. A nil principal
// holds none; any principal holds the empty set.
func (p *Principal) HasScopes(scopes ...string) bool {
	if len(scopes) == 0 {
		return true
	}
	if p == nil {
		return false
	}
	for _, s := range scopes {
		if !slices.Contains(p.Scopes, s) {
			return false
		}
	}
	return true
}

// HasAnyRole reports whether p holds at least one of roles.
func (p *Principal) HasAnyRole(roles ...string) bool {
	if p == nil {
		return false
	}
	for _, r := range roles {
		if slices.Contains(p.Roles, r) {
			return true
		}
	}
	return false
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal [Middleware] put in ctx.
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

// tokenInfoPrincipalKey is the key of the *Principal in the Extra map of the
// SDK's TokenInfo, which the SDK hands to method handlers in request extras.
const tokenInfoPrincipalKey = "portcullis.principal"

// PrincipalFromTokenInfo returns the principal [Middleware] stored in the
// SDK's TokenInfo (what MCP method handlers see in req.GetExtra().TokenInfo).
func PrincipalFromTokenInfo(ti *sdkauth.TokenInfo) (*Principal, bool) {
	if ti == nil {
		return nil, false
	}
	p, ok := ti.Extra[tokenInfoPrincipalKey].(*Principal)
	return p, ok && p != nil
}

// Verifier checks a bearer token and returns its [Principal]. Errors are
// *[Error] values whose Reason says why the token was refused.
type Verifier interface {
	Verify(ctx context.Context, token string) (*Principal, error)
}
