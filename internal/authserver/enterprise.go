package authserver

// The enterprise IdPs whose ID-JAGs the token endpoint takes
// (enterprise_idps): their options checked, and each one's signing keys.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"

	"github.com/portcullis-mcp/portcullis/internal/loopback"
)

// validateEnterpriseIdPs checks enterprise_idps; clients are the ids of
// the pre-registered clients.
func (o *Options) validateEnterpriseIdPs(clients map[string]bool) []error {
	var errs []error
	add := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	seen := map[string]bool{}
	for i, e := range o.EnterpriseIdPs {
		k := fmt.Sprintf("enterprise_idps[%d]", i)
		switch {
		case e.Issuer == "":
			add(k+".issuer", "required: the issuer identifier the provider's assertions carry in iss")
		case seen[e.Issuer]:
			add(k+".issuer", "duplicate issuer %q", e.Issuer)
		default:
			if err := checkIssuer(e.Issuer, e.AllowHTTP); err != nil {
				add(k+".issuer", "%v", err)
			}
		}
		seen[e.Issuer] = true
		if e.JWKSURL != "" {
			if err := checkFetchURL(e.JWKSURL, e.AllowHTTP); err != nil {
				add(k+".jwks_url", "%v", err)
			}
		}
		for j, c := range e.Clients {
			u, err := url.Parse(c)
			cimd := err == nil && u.Scheme == "https" && u.Host != ""
			if !clients[c] && !cimd {
				add(fmt.Sprintf("%s.clients[%d]", k, j), "%q is neither a client of authorization_server.clients nor a Client ID Metadata Document URL (https)", c)
			}
		}
		if e.MaxAssertionLifetime <= 0 {
			add(k+".max_assertion_lifetime", "must be positive")
		} else if e.MaxAssertionLifetime > maxAssertionLifetimeCap {
			add(k+".max_assertion_lifetime", "%s is longer than %s: an ID-JAG is short-lived", e.MaxAssertionLifetime, maxAssertionLifetimeCap)
		}
	}
	return errs
}

// checkFetchURL accepts an https URL without fragment, or an http one on
// a loopback host when allowHTTPLoopback.
func checkFetchURL(raw string, allowHTTPLoopback bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%q is not an absolute URL", raw)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%q must have no fragment", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowHTTPLoopback && loopback.Host(u.Host):
	default:
		return fmt.Errorf("%q must be https (http only on a loopback host)", raw)
	}
	return nil
}

// enterpriseIdP is a configured enterprise IdP.
type enterpriseIdP struct {
	o EnterpriseIdPOptions
	// mapper maps an assertion's claims to a User as the sign-in maps an
	// ID token's.
	mapper *idp
	keys   *idpKeys
}

// newEnterpriseIdPs builds the configured IdPs; client fetches their keys,
// now is the clock, failed is told of each fetch that failed.
func newEnterpriseIdPs(opts []EnterpriseIdPOptions, client *http.Client, now func() time.Time, failed func(issuer string, err error)) map[string]*enterpriseIdP {
	out := make(map[string]*enterpriseIdP, len(opts))
	for _, o := range opts {
		out[o.Issuer] = &enterpriseIdP{
			o:      o,
			mapper: &idp{o: IdPOptions{GroupsClaims: o.GroupsClaims}, preset: presets["generic"]},
			keys:   &idpKeys{o: o, jwksURL: o.JWKSURL, client: client, now: now, failed: failed},
		}
	}
	return out
}

// jwksRefreshInterval is the least time between two fetches of an
// enterprise IdP's keys, as auth.jwks_refresh_interval's default is for
// the issuers /mcp trusts.
const jwksRefreshInterval = 10 * time.Second

// maxJWKSBytes bounds a JWKS or discovery document.
const maxJWKSBytes = 1 << 20

var (
	// errKeysUnavailable: the provider's discovery document or JWKS could
	// not be fetched.
	errKeysUnavailable = errors.New("authserver: enterprise IdP keys unavailable")
	// errBadSignature: no key of the provider verifies the signature.
	errBadSignature = errors.New("authserver: signature does not verify")
)

// idpKeys is an enterprise IdP's signing keys: its JWKS (at jwks_url, or
// the jwks_uri of its OpenID discovery document, found with go-oidc),
// fetched on first use and again when an assertion names a kid it does not
// hold, at most once per jwksRefreshInterval whatever the kids: forged
// assertions cost the IdP no fetch each, and a key the IdP rotates to is
// found at most that long after its first use. The keys held keep
// verifying while the IdP is down.
//
// It is not go-oidc's RemoteKeySet, which fetches again on every
// signature that does not verify, reports an unreachable IdP only in its
// error text, and can hand a caller the result of a fetch that ended
// before the call. auth's key set does the same for /mcp's issuers;
// authserver may not import auth.
type idpKeys struct {
	o      EnterpriseIdPOptions
	client *http.Client
	now    func() time.Time
	failed func(issuer string, err error)

	// mu is held across a fetch: callers for one IdP wait for it.
	mu      sync.Mutex
	jwksURL string // configured, or once discovered
	keys    []jose.JSONWebKey
	tried   time.Time // the last fetch
	err     error     // of the last fetch, when it failed
}

// verify returns jws's payload when a key of the IdP signed it; else an
// error that is errBadSignature or wraps errKeysUnavailable.
func (k *idpKeys) verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	keys, err := k.keysFor(ctx, jws.Signatures[0].Header.KeyID)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, errBadSignature
}

// keysFor returns the keys that may have signed with kid, refreshing
// (rate limited) when it is unknown: the IdP may have rotated to it.
func (k *idpKeys) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if keys := k.lookup(kid); len(keys) > 0 {
		return keys, nil
	}
	if err := k.refresh(ctx); err != nil {
		return nil, err
	}
	return k.lookup(kid), nil
}

// lookup returns the keys held that match kid (all when it is empty); a
// refresh replaces k.keys, never changes it, so the slice stays valid.
// k.mu is held.
func (k *idpKeys) lookup(kid string) []jose.JSONWebKey {
	if kid == "" {
		return k.keys
	}
	for i := range k.keys {
		if k.keys[i].KeyID == kid {
			return k.keys[i : i+1]
		}
	}
	return nil
}

// refresh fetches the keys unless it did less than jwksRefreshInterval
// ago; it returns the error of the last fetch. k.mu is held.
func (k *idpKeys) refresh(ctx context.Context) error {
	now := k.now()
	if !k.tried.IsZero() && now.Sub(k.tried) < jwksRefreshInterval {
		return k.err
	}
	k.tried = now
	// Not the request's context: a client that goes away must not make the
	// fetch fail for the next interval.
	keys, err := k.fetch(context.WithoutCancel(ctx))
	if err != nil {
		k.failed(k.o.Issuer, err)
		k.err = fmt.Errorf("%w: %s: %v", errKeysUnavailable, k.o.Issuer, err)
		return k.err
	}
	k.keys, k.err = keys, nil
	return nil
}

// fetch reads the JWKS, discovering its URL first when needed, and keeps
// the public signing keys.
func (k *idpKeys) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	if k.jwksURL == "" {
		prov, err := oidc.NewProvider(oidc.ClientContext(ctx, k.client), k.o.Issuer)
		if err != nil {
			return nil, fmt.Errorf("discovery: %v", err)
		}
		var m struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := prov.Claims(&m); err != nil || m.JWKSURI == "" {
			return nil, errors.New("the discovery document names no jwks_uri")
		}
		if err := checkFetchURL(m.JWKSURI, k.o.AllowHTTP); err != nil {
			return nil, fmt.Errorf("jwks_uri: %v", err)
		}
		k.jwksURL = m.JWKSURI
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.jwksURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := k.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", k.jwksURL, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKSBytes)).Decode(&set); err != nil {
		return nil, fmt.Errorf("GET %s: not a JWKS: %v", k.jwksURL, err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if json.Unmarshal(raw, &key) != nil || key.Use == "enc" || !key.IsPublic() {
			continue // a key type go-jose does not know, an encryption or a symmetric key
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("GET %s: no public signing keys", k.jwksURL)
	}
	return keys, nil
}
