package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/time/rate"
)

// fetchTimeout bounds one discovery or JWKS fetch.
const fetchTimeout = 5 * time.Second

// maxJWKSBytes bounds a key-set or discovery document.
const maxJWKSBytes = 1 << 20

var errRateLimited = errors.New("key set refresh rate limited")

// keySet is an [oidc.KeySet] backed by a remote JWKS. It keeps the keys it
// has, refreshes when a token names an unknown kid (at most once per
// interval, shared by all callers, whatever the kids), bounds every fetch,
// and keeps serving the keys it has when the IdP is down. Keys older than
// maxAge are refreshed in the background, without holding the request that
// noticed, so a key the IdP removes stops being trusted within about
// maxAge.
//
// Whether the issuer answers is logged once per change: the first failed
// fetch (at start, on an unknown kid, in the background, or for
// readiness) as a warning with the issuer and the error, then the first
// fetch that works again; not once per request or probe.
type keySet struct {
	issuer    string
	jwksURL   string // from config, or discovered
	allowHTTP bool
	client    *http.Client
	now       func() time.Time
	limiter   *rate.Limiter
	maxAge    time.Duration // 0: never refresh known keys
	logger    *slog.Logger

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetchedAt time.Time // of the keys held
	stale     bool      // a background refresh of stale keys is running
	loaded    bool
	lastErr   error
	inflight  *fetchCall
	fetches   int  // number of JWKS fetches attempted (tests)
	failing   bool // the last fetch failed (what was logged last)
}

type fetchCall struct {
	done chan struct{}
	err  error
}

// newKeySet returns the key set of issuer; logger nil means no logging.
func newKeySet(issuer, jwksURL string, allowHTTP bool, client *http.Client, now func() time.Time, interval, maxAge time.Duration, logger *slog.Logger) *keySet {
	lim := rate.NewLimiter(rate.Every(interval), 1)
	if interval <= 0 {
		lim = rate.NewLimiter(rate.Inf, 1)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &keySet{issuer: issuer, jwksURL: jwksURL, allowHTTP: allowHTTP, client: client, now: now, limiter: lim, maxAge: maxAge, logger: logger}
}

// refreshIfStale starts one background refresh when the keys held are
// older than maxAge. Until it succeeds the keys held keep verifying; if the
// IdP is down they are kept, and a later request tries again.
func (k *keySet) refreshIfStale(ctx context.Context) {
	if k.maxAge <= 0 {
		return
	}
	k.mu.Lock()
	if k.stale || k.inflight != nil || k.now().Sub(k.fetchedAt) < k.maxAge {
		k.mu.Unlock()
		return
	}
	k.stale = true
	k.mu.Unlock()
	go func() {
		_ = k.refresh(context.WithoutCancel(ctx))
		k.mu.Lock()
		k.stale = false
		k.mu.Unlock()
	}()
}

// VerifySignature implements [oidc.KeySet]. Its errors are *Error with
// ReasonUnknownKey or ReasonBadSignature; go-oidc flattens them to text, so
// the reason is also recorded in the reasonSlot of ctx, if any.
func (k *keySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	payload, err := k.verify(ctx, raw)
	if err != nil {
		noteReason(ctx, err)
	}
	return payload, err
}

func (k *keySet) verify(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, joseAlgs)
	if err != nil {
		return nil, fail(ReasonMalformed, "parsing jwt: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fail(ReasonMalformed, "want one signature, got %d", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	if keys := k.lookup(kid); len(keys) > 0 {
		k.refreshIfStale(ctx)
		return verifyWith(jws, keys)
	}
	// Unknown kid: refresh (rate limited) and look again.
	if err := k.refresh(ctx); err != nil && !errors.Is(err, errRateLimited) {
		if keys := k.lookup(kid); len(keys) > 0 {
			return verifyWith(jws, keys)
		}
		return nil, fail(ReasonUnknownKey, "key %q not found; refreshing the key set failed: %v", kid, err)
	}
	if keys := k.lookup(kid); len(keys) > 0 {
		return verifyWith(jws, keys)
	}
	return nil, fail(ReasonUnknownKey, "key %q not in the issuer's key set", kid)
}

func verifyWith(jws *jose.JSONWebSignature, keys []jose.JSONWebKey) ([]byte, error) {
	for _, key := range keys {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, fail(ReasonBadSignature, "signature does not verify")
}

// lookup returns the signing keys matching kid (all of them when the token
// names no kid).
func (k *keySet) lookup(kid string) []jose.JSONWebKey {
	k.mu.Lock()
	defer k.mu.Unlock()
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

// refresh fetches the key set unless the rate limit forbids it. Concurrent
// callers share one in-flight fetch.
func (k *keySet) refresh(ctx context.Context) error {
	k.mu.Lock()
	if c := k.inflight; c != nil {
		k.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if !k.limiter.AllowN(k.now(), 1) {
		k.mu.Unlock()
		return errRateLimited
	}
	c := &fetchCall{done: make(chan struct{})}
	k.inflight = c
	k.fetches++
	k.mu.Unlock()

	// The fetch is shared: a caller that goes away must not cancel it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	keys, err := k.fetch(fctx)
	cancel()

	k.mu.Lock()
	if err == nil {
		k.keys, k.loaded, k.lastErr, k.fetchedAt = keys, true, nil, k.now()
	} else {
		k.lastErr = err // keep the keys we have
	}
	k.inflight = nil
	changed := k.failing != (err != nil)
	k.failing = err != nil
	held := len(k.keys)
	k.mu.Unlock()
	if changed {
		// Only this fetch saw the change: concurrent callers share it.
		k.logChange(err, held)
	}
	c.err = err
	close(c.done)
	return err
}

// maxLoggedError bounds the error text logged for a failed fetch, which
// may quote the IdP's answer.
const maxLoggedError = 500

// logChange logs that fetching the issuer's keys started failing (err)
// or works again (err nil).
func (k *keySet) logChange(err error, held int) {
	if err == nil {
		k.logger.Info("auth: issuer keys fetched again", "issuer", k.issuer, "keys", held)
		return
	}
	msg := err.Error()
	if len(msg) > maxLoggedError {
		msg = msg[:maxLoggedError] + "…"
	}
	k.logger.Warn("auth: issuer unreachable: cannot fetch its keys; tokens with keys already held still verify", "issuer", k.issuer, "error", msg, "keys_held", held)
}

// Ready reports whether keys are loaded, trying one (rate-limited, bounded)
// fetch when they are not.
func (k *keySet) Ready(ctx context.Context) error {
	k.mu.Lock()
	loaded := k.loaded
	k.mu.Unlock()
	if loaded {
		return nil
	}
	if err := k.refresh(ctx); err != nil {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.lastErr != nil {
			return fmt.Errorf("auth: issuer %s: no keys loaded: %w", k.issuer, k.lastErr)
		}
		return fmt.Errorf("auth: issuer %s: no keys loaded: %w", k.issuer, err)
	}
	return nil
}

func (k *keySet) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	u := k.jwksURL
	if u == "" {
		var err error
		if u, err = k.discover(ctx); err != nil {
			return nil, err
		}
	}
	var set jose.JSONWebKeySet
	if err := getJSON(ctx, k.client, u, &set); err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, key := range set.Keys {
		if key.Use == "enc" || !key.IsPublic() {
			continue // never verify with an encryption key or a symmetric key
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, errors.New("JWKS has no public signing keys")
	}
	return keys, nil
}

// discover finds the jwks_uri by OpenID Connect discovery, then RFC 8414.
// A discovered URL is remembered.
func (k *keySet) discover(ctx context.Context) (string, error) {
	var jwks string
	p, oidcErr := oidc.NewProvider(oidc.ClientContext(ctx, k.client), k.issuer)
	if oidcErr == nil {
		var c struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := p.Claims(&c); err == nil {
			jwks = c.JWKSURI
		}
	}
	if jwks == "" {
		// oauthex.GetAuthServerMeta insists on PKCE support, which a
		// resource server does not care about: read the document directly.
		var asm oauthex.AuthServerMeta
		err := getJSON(ctx, k.client, rfc8414URL(k.issuer), &asm)
		if err == nil && asm.Issuer != k.issuer {
			err = fmt.Errorf("metadata names issuer %q", asm.Issuer)
		}
		if err != nil {
			return "", fmt.Errorf("discovery for %s failed: OIDC: %v; RFC 8414: %v", k.issuer, oidcErr, err)
		}
		jwks = asm.JWKSURI
	}
	if jwks == "" {
		return "", fmt.Errorf("discovery for %s: no jwks_uri", k.issuer)
	}
	if err := checkURL(jwks, k.allowHTTP); err != nil {
		return "", fmt.Errorf("discovered jwks_uri: %v", err)
	}
	k.mu.Lock()
	k.jwksURL = jwks
	k.mu.Unlock()
	return jwks, nil
}

// rfc8414URL inserts the well-known segment between host and path, as RFC
// 8414 section 3.1 says.
func rfc8414URL(issuer string) string {
	i := strings.Index(issuer, "://")
	if i < 0 {
		return issuer
	}
	rest := issuer[i+3:]
	host, path, _ := strings.Cut(rest, "/")
	path = strings.TrimSuffix(path, "/")
	u := issuer[:i+3] + host + "/.well-known/oauth-authorization-server"
	if path != "" {
		u += "/" + path
	}
	return u
}

func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return json.Unmarshal(body, v)
}

// joseAlgs are the algorithms the key set parses; the issuer's allow-list is
// enforced earlier by go-oidc and by the header check.
var joseAlgs = func() []jose.SignatureAlgorithm {
	out := make([]jose.SignatureAlgorithm, len(asymmetricAlgs))
	for i, a := range asymmetricAlgs {
		out[i] = jose.SignatureAlgorithm(a)
	}
	return out
}()

// reasonSlot carries the reason a key set refused a token through go-oidc,
// which flattens key-set errors to text.
type reasonSlot struct{ reason Reason }

type reasonSlotKey struct{}

func noteReason(ctx context.Context, err error) {
	if s, ok := ctx.Value(reasonSlotKey{}).(*reasonSlot); ok {
		s.reason = ReasonOf(err)
	}
}

// staticKeySet adapts any oidc.KeySet (e.g. the dev issuer's) so its
// failures are classified as bad signatures.
type staticKeySet struct{ oidc.KeySet }

func (s staticKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	p, err := s.KeySet.VerifySignature(ctx, raw)
	if err != nil {
		err = &Error{Reason: ReasonBadSignature, Err: err}
		noteReason(ctx, err)
	}
	return p, err
}
