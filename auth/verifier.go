package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/portcullis-mcp/portcullis/internal/outbound"
)

// VerifierFunc adapts a function to [Verifier].
type VerifierFunc func(ctx context.Context, token string) (*Principal, error)

// Verify calls f.
func (f VerifierFunc) Verify(ctx context.Context, token string) (*Principal, error) {
	return f(ctx, token)
}

// Readier is implemented by the verifier [NewVerifier] returns: Ready
// reports whether keys are loaded for every issuer (for /readyz). It never
// blocks longer than one bounded, rate-limited key fetch per issuer.
type Readier interface {
	Ready(ctx context.Context) error
}

// NewVerifier builds the verifier for o, whose zero fields take their
// defaults (see [Options.Defaults]) and which must pass Validate: one go-oidc verifier per issuer, picked by the
// token's unverified "iss" and then checked again after the signature;
// introspection for tokens that are not JWTs when configured; all wrapped in
// the verified-token cache. NewVerifier makes no network calls: keys are
// fetched on first use or by Ready.
func NewVerifier(ctx context.Context, o Options, deps Deps) (Verifier, error) {
	httpClient, now := deps.HTTPClient, deps.Now
	if !o.Enabled() {
		return nil, errors.New("auth: no issuers or introspection configured")
	}
	o.Defaults()
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("auth: invalid options: %w", err)
	}
	if now == nil {
		now = time.Now
	}
	if httpClient == nil {
		httpClient = defaultHTTPClient()
	}
	mv := &multiVerifier{issuers: map[string]*issuerVerifier{}}
	for _, is := range o.Issuers {
		algs := is.Algorithms
		if len(algs) == 0 {
			algs = DefaultAlgorithms
		}
		iv := &issuerVerifier{
			issuer:    is.Issuer,
			algs:      slices.Clone(algs),
			audiences: append([]string{o.Resource}, is.Audiences...),
			required:  is.RequiredClaims,
			untyped:   is.AllowUntypedAccessTokens,
			roles:     o.RolesClaims,
			skew:      o.ClockSkew,
			now:       now,
		}
		var ks oidc.KeySet
		if is.KeySet != nil {
			ks = staticKeySet{is.KeySet}
			iv.ready = func(context.Context) error { return nil }
		} else {
			rk := newKeySet(is.Issuer, is.JWKSURL, is.AllowHTTP, httpClient, now, o.JWKSRefreshInterval, o.JWKSMaxAge, deps.Logger)
			ks = rk
			iv.ready = rk.Ready
			mv.keySets = append(mv.keySets, rk)
		}
		iv.oidc = oidc.NewVerifier(is.Issuer, ks, &oidc.Config{
			SupportedSigningAlgs: iv.algs,
			SkipClientIDCheck:    true, // aud is checked against our own list
			SkipExpiryCheck:      true, // exp, nbf, iat are checked with our skew
			Now:                  now,
		})
		mv.issuers[is.Issuer] = iv
		mv.order = append(mv.order, iv)
	}
	if o.Introspection.URL != "" {
		ix, err := newIntrospector(ctx, o, httpClient, now)
		if err != nil {
			return nil, err
		}
		mv.introspect = ix
	}
	size := o.CacheSize
	if size <= 0 {
		size = DefaultCacheSize
	}
	ttl := o.CacheTTL
	if ttl <= 0 {
		ttl = DefaultCacheTTL
	}
	return newCachingVerifier(mv, size, ttl, now)
}

// defaultHTTPClient calls the authorization server (keys, introspection),
// as many requests at a time as requests with new tokens come in.
func defaultHTTPClient() *http.Client {
	return &http.Client{Transport: outbound.Transport(), Timeout: 15 * time.Second}
}

// multiVerifier routes a token to its issuer, or to introspection.
type multiVerifier struct {
	issuers    map[string]*issuerVerifier
	order      []*issuerVerifier
	keySets    []*keySet
	introspect *introspector
}

func (m *multiVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	if token == "" {
		return nil, fail(ReasonMissing, "empty token")
	}
	if len(token) > MaxTokenSize {
		return nil, fail(ReasonMalformed, "token longer than %d bytes", MaxTokenSize)
	}
	header, payload, isJWT := splitJWT(token)
	if !isJWT {
		if m.introspect != nil {
			return m.introspect.verify(ctx, token)
		}
		return nil, fail(ReasonMalformed, "not a JWT and introspection is not configured")
	}
	if len(m.order) == 0 {
		if m.introspect != nil {
			return m.introspect.verify(ctx, token)
		}
		return nil, fail(ReasonWrongIssuer, "no issuers configured")
	}
	iss, err := unverifiedIssuer(payload)
	if err != nil {
		return nil, fail(ReasonMalformed, "JWT payload: %v", err)
	}
	iv, ok := m.issuers[iss]
	if !ok {
		if m.introspect != nil {
			return m.introspect.verify(ctx, token)
		}
		return nil, fail(ReasonWrongIssuer, "issuer %q is not trusted", iss)
	}
	return iv.verify(ctx, token, header)
}

// Ready reports an error naming every issuer without keys.
func (m *multiVerifier) Ready(ctx context.Context) error {
	var errs []error
	for _, iv := range m.order {
		if err := iv.ready(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
