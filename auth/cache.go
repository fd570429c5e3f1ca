package auth

import (
	"context"
	"crypto/sha256"
	"time"
	"unsafe"

	lru "github.com/hashicorp/golang-lru/v2"
)

// cachingVerifier remembers successful verifications, keyed by the SHA-256
// of the token, until the earlier of the token's expiry and now+ttl.
// Failures are never cached.
type cachingVerifier struct {
	next  Verifier
	cache *lru.Cache[[sha256.Size]byte, cacheEntry]
	ttl   time.Duration
	now   func() time.Time
}

type cacheEntry struct {
	p       *Principal
	expires time.Time
}

func newCachingVerifier(next Verifier, size int, ttl time.Duration, now func() time.Time) (*cachingVerifier, error) {
	c, err := lru.New[[sha256.Size]byte, cacheEntry](size)
	if err != nil {
		return nil, err
	}
	return &cachingVerifier{next: next, cache: c, ttl: ttl, now: now}, nil
}

// tokenHash hashes token without copying it.
func tokenHash(token string) [sha256.Size]byte {
	return sha256.Sum256(unsafe.Slice(unsafe.StringData(token), len(token)))
}

func (c *cachingVerifier) Verify(ctx context.Context, token string) (*Principal, error) {
	key := tokenHash(token)
	now := c.now()
	if e, ok := c.cache.Get(key); ok {
		if now.Before(e.expires) {
			return e.p, nil
		}
		c.cache.Remove(key)
	}
	p, err := c.next.Verify(ctx, token)
	if err != nil {
		return nil, err
	}
	expires := now.Add(c.ttl)
	if !p.Expiry.IsZero() && p.Expiry.Before(expires) {
		expires = p.Expiry
	}
	if now.Before(expires) {
		// p is ours alone until it is in the cache: c.next is the
		// multiVerifier, which makes a new principal per verification.
		p.tokenInfo = p.newTokenInfo(token)
		c.cache.Add(key, cacheEntry{p: p, expires: expires})
	}
	return p, nil
}

// Ready forwards to the wrapped verifier.
func (c *cachingVerifier) Ready(ctx context.Context) error {
	if r, ok := c.next.(interface{ Ready(context.Context) error }); ok {
		return r.Ready(ctx)
	}
	return nil
}
