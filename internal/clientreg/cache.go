package clientreg

import (
	"context"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
)

// Cache holds fetched metadata documents (and recent failures) for a
// [Fetcher]. Replicas that share one, in Redis for example, fetch a
// document once between them. Keys start with "clientreg:cimd:" and
// values are opaque bytes; an implementation must keep a value no longer
// than ttl (it may drop it sooner). Errors are logged and the fetcher
// carries on as if the entry were missing or not stored.
type Cache interface {
	// Get returns the value stored under key, and whether there is one.
	Get(ctx context.Context, key string) ([]byte, bool, error)
	// Set stores val under key for ttl.
	Set(ctx context.Context, key string, val []byte, ttl time.Duration) error
}

// DefaultMemoryCacheSize is the number of entries [NewMemoryCache] keeps
// when asked for zero or fewer.
const DefaultMemoryCacheSize = 10000

// MemoryCache is a [Cache] in process memory that keeps at most a fixed
// number of entries, dropping the least recently used one first.
type MemoryCache struct {
	mu  sync.Mutex
	lru *lru.Cache[string, memoryEntry]
	now func() time.Time
}

type memoryEntry struct {
	val     []byte
	expires time.Time
}

// NewMemoryCache returns a MemoryCache of at most size entries (zero or
// fewer means [DefaultMemoryCacheSize]) whose entries expire by the clock
// now (nil means time.Now).
func NewMemoryCache(size int, now func() time.Time) *MemoryCache {
	if size <= 0 {
		size = DefaultMemoryCacheSize
	}
	if now == nil {
		now = time.Now
	}
	c, err := lru.New[string, memoryEntry](size)
	if err != nil {
		panic(err) // only for a size below 1, which cannot happen here
	}
	return &MemoryCache{lru: c, now: now}
}

// Get returns the unexpired value under key. It never fails.
func (c *MemoryCache) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.lru.Get(key)
	if !ok {
		return nil, false, nil
	}
	if !c.now().Before(e.expires) {
		c.lru.Remove(key)
		return nil, false, nil
	}
	return e.val, true, nil
}

// Set stores a copy of val under key for ttl; a ttl of zero or less
// removes the key. It never fails.
func (c *MemoryCache) Set(_ context.Context, key string, val []byte, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl <= 0 {
		c.lru.Remove(key)
		return nil
	}
	c.lru.Add(key, memoryEntry{val: append([]byte(nil), val...), expires: c.now().Add(ttl)})
	return nil
}

// Len returns the number of entries held, expired ones included.
func (c *MemoryCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}
