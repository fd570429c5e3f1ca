// Package jwks caches an issuer's signing keys: the JSON Web Key Set at
// its jwks_uri, configured or discovered. It is the one key-set cache of
// the module: auth verifies the access tokens of the issuers /mcp trusts
// with it, internal/authserver the ID-JAGs of its enterprise IdPs.
//
// A [Set] fetches on first use, and again when a token names a key it
// does not hold (the issuer may have rotated to it), at most once per
// [Options.RefreshInterval] whatever the kids: tokens with made-up kids
// cost the issuer one fetch per interval, not one each. Callers that
// need a fetch while one runs wait for it and share its result. The keys
// held keep verifying while the issuer is down; keys older than
// [Options.MaxAge] are fetched again in the background, so a key the
// issuer removes stops verifying within about that long.
//
// It is not go-oidc's RemoteKeySet, which fetches again on every
// signature that does not verify, reports an unreachable issuer only in
// its error text, and has no bound on how often it fetches.
package jwks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// DefaultTimeout bounds one fetch when [Options.Timeout] is zero.
const DefaultTimeout = 5 * time.Second

// maxDocumentBytes bounds a key set or discovery document.
const maxDocumentBytes = 1 << 20

var (
	// ErrUnknownKey is returned for a token whose kid the issuer's key set
	// does not hold, after a fetch (or within the refresh interval of one).
	ErrUnknownKey = errors.New("jwks: key not in the issuer's key set")
	// ErrBadSignature is returned when no key that may have signed a
	// token verifies its signature.
	ErrBadSignature = errors.New("jwks: signature does not verify")
	// ErrUnavailable is returned when the keys a token needs are not held
	// and the last fetch of the issuer's key set failed; it wraps that
	// fetch's error.
	ErrUnavailable = errors.New("jwks: keys unavailable")

	// errRateLimited: a fetch was wanted within the refresh interval.
	errRateLimited = errors.New("jwks: fetch within the refresh interval")
)

// Options configure a [Set]. The zero value of each field but Issuer is
// usable.
type Options struct {
	// Issuer is whose keys these are: discovery starts from it, and
	// errors name it.
	Issuer string
	// URL is the key set's URL. Empty: the jwks_uri of the issuer's
	// OpenID Connect discovery document, else of its RFC 8414 metadata,
	// found on the first fetch and kept.
	URL string
	// CheckURL vets a discovered jwks_uri (its scheme and host, say);
	// an error fails the fetch. Nil: every URL is accepted.
	CheckURL func(string) error
	// Client fetches the documents. Nil: [http.DefaultClient].
	Client *http.Client
	// Now is the clock of the refresh interval and the keys' age. Nil:
	// [time.Now].
	Now func() time.Time
	// RefreshInterval is the least time between two fetches. Zero or
	// less: no bound (tests).
	RefreshInterval time.Duration
	// MaxAge is how long fetched keys are used before a background fetch
	// replaces them. Zero or less: they are used until a token names a
	// kid they lack.
	MaxAge time.Duration
	// Timeout bounds one fetch, discovery included. Zero or less:
	// [DefaultTimeout].
	Timeout time.Duration
	// Changed is told when fetching the keys starts failing (err, the
	// first failed fetch's error) and when it works again (nil), with the
	// number of keys held: once per change, not once per fetch. Nil:
	// nothing is told.
	Changed func(err error, held int)
}

// Set is an issuer's signing keys, fetched and cached. Its methods are
// safe for concurrent use.
type Set struct {
	o Options

	mu        sync.Mutex
	url       string // o.URL, or once discovered
	keys      []jose.JSONWebKey
	loaded    bool      // a fetch has worked
	fetchedAt time.Time // of the keys held
	tried     time.Time // the last fetch's start
	lastErr   error     // of the last fetch, nil when it worked
	failing   bool      // what Changed was told last
	inflight  *call
	stale     bool // a background fetch of stale keys runs
}

// call is a fetch in flight, shared by the callers that wait for it.
type call struct {
	done chan struct{}
	err  error
}

// New returns the key set o describes. It fetches nothing until it is
// used.
func New(o Options) *Set {
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	return &Set{o: o, url: o.URL}
}

// Verify returns the payload of jws, which must have one signature, when
// a key of the issuer signed it. Its error is [ErrBadSignature],
// [ErrUnknownKey] or [ErrUnavailable] (wrapped).
func (s *Set) Verify(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("jwks: want one signature, got %d", len(jws.Signatures))
	}
	keys, err := s.Keys(ctx, jws.Signatures[0].Header.KeyID)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(key.Key); err == nil {
			return payload, nil
		}
	}
	return nil, ErrBadSignature
}

// Keys returns the keys that may have signed with kid: the one with that
// kid, or every key held when kid is empty. When none is held it fetches
// (within the refresh interval, it does not) and looks again; its error
// is then [ErrUnknownKey], or [ErrUnavailable] wrapping the error of the
// last fetch when that failed.
func (s *Set) Keys(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	if keys := s.lookup(kid); len(keys) > 0 {
		s.refreshIfStale(ctx)
		return keys, nil
	}
	err := s.refresh(ctx)
	if keys := s.lookup(kid); len(keys) > 0 {
		return keys, nil // this fetch, or one that ended meanwhile
	}
	if errors.Is(err, errRateLimited) {
		err = s.lastError()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, s.o.Issuer, err)
	}
	return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
}

// Ready reports whether keys are held, fetching (within the refresh
// interval, not) when none is: nil, or [ErrUnavailable] wrapping the
// error of the last fetch.
func (s *Set) Ready(ctx context.Context) error {
	s.mu.Lock()
	loaded := s.loaded
	s.mu.Unlock()
	if loaded {
		return nil
	}
	err := s.refresh(ctx)
	if err == nil {
		return nil
	}
	if last := s.lastError(); last != nil {
		err = last
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, s.o.Issuer, err)
}

// lookup returns the keys held that match kid (all of them when it is
// empty). A fetch replaces s.keys, never changes it, so the slice
// returned stays valid.
func (s *Set) lookup(kid string) []jose.JSONWebKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	if kid == "" {
		return s.keys
	}
	for i := range s.keys {
		if s.keys[i].KeyID == kid {
			return s.keys[i : i+1]
		}
	}
	return nil
}

func (s *Set) lastError() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// refreshIfStale starts one background fetch when the keys held are
// older than MaxAge. The keys held keep verifying until it works; when
// it fails they are kept, and a later call tries again.
func (s *Set) refreshIfStale(ctx context.Context) {
	if s.o.MaxAge <= 0 {
		return
	}
	s.mu.Lock()
	if s.stale || s.inflight != nil || s.o.Now().Sub(s.fetchedAt) < s.o.MaxAge {
		s.mu.Unlock()
		return
	}
	s.stale = true
	s.mu.Unlock()
	go func() {
		_ = s.refresh(context.WithoutCancel(ctx))
		s.mu.Lock()
		s.stale = false
		s.mu.Unlock()
	}()
}

// refresh fetches the key set unless the last fetch started less than
// RefreshInterval ago (errRateLimited). Callers while a fetch runs wait
// for it and get its error.
func (s *Set) refresh(ctx context.Context) error {
	s.mu.Lock()
	if c := s.inflight; c != nil {
		s.mu.Unlock()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := s.o.Now()
	if s.o.RefreshInterval > 0 && !s.tried.IsZero() && now.Sub(s.tried) < s.o.RefreshInterval {
		s.mu.Unlock()
		return errRateLimited
	}
	s.tried = now
	c := &call{done: make(chan struct{})}
	s.inflight = c
	s.mu.Unlock()

	// The fetch is shared: a caller that goes away must not cancel it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.o.Timeout)
	keys, err := s.fetch(fctx)
	cancel()

	s.mu.Lock()
	if err == nil {
		s.keys, s.loaded, s.fetchedAt = keys, true, s.o.Now()
	}
	s.lastErr = err // on failure the keys held are kept
	s.inflight = nil
	changed := s.failing != (err != nil)
	s.failing = err != nil
	held := len(s.keys)
	s.mu.Unlock()
	if changed && s.o.Changed != nil {
		// Only this fetch saw the change: the callers waiting share it.
		s.o.Changed(err, held)
	}
	c.err = err
	close(c.done)
	return err
}

// fetch reads the key set, discovering its URL first when needed, and
// keeps its public signing keys.
func (s *Set) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	s.mu.Lock()
	u := s.url
	s.mu.Unlock()
	if u == "" {
		var err error
		if u, err = s.discover(ctx); err != nil {
			return nil, err
		}
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := getJSON(ctx, s.o.Client, u, &set); err != nil {
		return nil, fmt.Errorf("fetching JWKS: %w", err)
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
		return nil, fmt.Errorf("fetching JWKS: %s has no public signing keys", u)
	}
	return keys, nil
}

// discover finds the jwks_uri by OpenID Connect discovery, then RFC 8414,
// and keeps it.
func (s *Set) discover(ctx context.Context) (string, error) {
	var jwksURI string
	p, oidcErr := oidc.NewProvider(oidc.ClientContext(ctx, s.o.Client), s.o.Issuer)
	if oidcErr == nil {
		var c struct {
			JWKSURI string `json:"jwks_uri"`
		}
		if err := p.Claims(&c); err == nil {
			jwksURI = c.JWKSURI
		}
	}
	if jwksURI == "" {
		var m struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		err := getJSON(ctx, s.o.Client, rfc8414URL(s.o.Issuer), &m)
		if err == nil && m.Issuer != s.o.Issuer {
			err = fmt.Errorf("metadata names issuer %q", m.Issuer)
		}
		if err != nil {
			return "", fmt.Errorf("discovery for %s failed: OIDC: %v; RFC 8414: %v", s.o.Issuer, oidcErr, err)
		}
		jwksURI = m.JWKSURI
	}
	if jwksURI == "" {
		return "", fmt.Errorf("discovery for %s: no jwks_uri", s.o.Issuer)
	}
	if s.o.CheckURL != nil {
		if err := s.o.CheckURL(jwksURI); err != nil {
			return "", fmt.Errorf("discovered jwks_uri: %w", err)
		}
	}
	s.mu.Lock()
	s.url = jwksURI
	s.mu.Unlock()
	return jwksURI, nil
}

// rfc8414URL inserts the well-known segment between the issuer's host
// and path, as RFC 8414 §3.1 says.
func rfc8414URL(issuer string) string {
	i := strings.Index(issuer, "://")
	if i < 0 {
		return issuer
	}
	host, path, _ := strings.Cut(issuer[i+3:], "/")
	path = strings.TrimSuffix(path, "/")
	u := issuer[:i+3] + host + "/.well-known/oauth-authorization-server"
	if path != "" {
		u += "/" + path
	}
	return u
}

// getJSON decodes the JSON document at u into v.
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	return nil
}
