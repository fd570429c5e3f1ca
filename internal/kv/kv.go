// Package kv is the expiring key-value state that replicas share: the
// authorization server's sign-ins, codes, grants and consents, and the
// vault of users' connected accounts. Replicas share it through Redis
// ([NewRedis]); one replica can keep it in memory ([NewMemory]). Every
// value expires.
package kv

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
)

// ErrNotFound is what a [KV] returns for a key it does not hold.
var ErrNotFound = errors.New("kv: not found")

// ErrUnavailable wraps a [KV] failure: the shared store did not answer,
// or did not keep a write on as many replicas as asked. The endpoints
// answer 503 temporarily_unavailable; tokens already issued keep
// working, since /mcp verifies them without the store. It is the one
// error of every store Portcullis keeps in Redis (internal/rediskit).
var ErrUnavailable = rediskit.ErrUnavailable

// KV is expiring state keyed by string. Replicas share it through Redis
// ([NewRedis]); one replica can keep it in memory ([NewMemory]). Every
// value expires.
type KV interface {
	// Get returns key's value, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set stores value under key for ttl.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// SetNX stores value under key for ttl only if key is absent, and
	// reports whether it did: the one winner of a race. Give each writer
	// a value of its own ([Nonce]): a write Redis took but too few
	// replicas acknowledged is taken back only while it holds that value.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// CompareAndSwap stores value under key for ttl if key holds old, and
	// reports whether it did; it reports true too when key holds value
	// already (a retry of the same swap).
	CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error)
	// GetDel returns key's value and deletes it in one step, or ErrNotFound:
	// what is used once is taken once.
	GetDel(ctx context.Context, key string) ([]byte, error)
	// Del deletes keys; absent ones are no error.
	Del(ctx context.Context, keys ...string) error
}

// Memory is a KV in process memory, for one replica.
type Memory struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]memoryEntry
	ops int
}

type memoryEntry struct {
	value   []byte
	expires time.Time
}

// NewMemory returns a KV in process memory; now is the clock (nil:
// time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, m: map[string]memoryEntry{}}
}

// get returns key's live entry; the caller holds mu. Every 1024 operations
// it sweeps expired entries, so memory stays bounded by what is live.
func (k *Memory) get(key string) (memoryEntry, bool) {
	now := k.now()
	if k.ops++; k.ops%1024 == 0 {
		for key, e := range k.m {
			if !now.Before(e.expires) {
				delete(k.m, key)
			}
		}
	}
	e, ok := k.m[key]
	if ok && !now.Before(e.expires) {
		delete(k.m, key)
		return memoryEntry{}, false
	}
	return e, ok
}

func (k *Memory) Get(_ context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return e.value, nil
}

func (k *Memory) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.get(key)
	k.m[key] = memoryEntry{value: value, expires: k.now().Add(ttl)}
	return nil
}

func (k *Memory) SetNX(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.get(key); ok {
		return false, nil
	}
	k.m[key] = memoryEntry{value: value, expires: k.now().Add(ttl)}
	return true, nil
}

func (k *Memory) CompareAndSwap(_ context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.get(key)
	switch {
	case ok && bytes.Equal(e.value, value):
		return true, nil
	case !ok || !bytes.Equal(e.value, old):
		return false, nil
	}
	k.m[key] = memoryEntry{value: value, expires: k.now().Add(ttl)}
	return true, nil
}

func (k *Memory) GetDel(_ context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	delete(k.m, key)
	return e.value, nil
}

func (k *Memory) Del(_ context.Context, keys ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		delete(k.m, key)
	}
	return nil
}

// Each calls fn with every live entry, under the lock: what a test
// reads to show that nothing secret is stored in the clear.
func (k *Memory) Each(fn func(key string, value []byte)) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.now()
	for key, e := range k.m {
		if now.Before(e.expires) {
			fn(key, e.value)
		}
	}
}

// redisKV is a KV in Redis, shared by replicas: rediskit's expiring
// values, whose writes wait for replicas as the client's durability says.
type redisKV struct{ v *rediskit.Values }

// NewRedis returns a KV in Redis under keys starting with prefix.
func NewRedis(c *rediskit.Client, prefix string) KV {
	return &redisKV{v: c.Values(prefix)}
}

// found maps a rediskit read: a value not found is ErrNotFound.
func found(b []byte, ok bool, err error) ([]byte, error) {
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return nil, ErrNotFound
	}
	return b, nil
}

func (k *redisKV) Get(ctx context.Context, key string) ([]byte, error) {
	return found(k.v.Get(ctx, key))
}

func (k *redisKV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return k.v.Set(ctx, key, value, ttl)
}

func (k *redisKV) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	return k.v.SetNX(ctx, key, value, ttl)
}

func (k *redisKV) CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	return k.v.CompareAndSwap(ctx, key, old, value, ttl)
}

func (k *redisKV) GetDel(ctx context.Context, key string) ([]byte, error) {
	return found(k.v.GetDel(ctx, key))
}

func (k *redisKV) Del(ctx context.Context, keys ...string) error {
	return k.v.Del(ctx, keys...)
}

// Join builds a key from parts; parts are ids and hashes, never raw
// tokens.
func Join(parts ...string) string { return strings.Join(parts, ":") }

// Hash names v in a key without holding it (rediskit.Hash).
func Hash(v string) string { return rediskit.Hash(v) }

// Nonce returns a value of its own for a writer of SetNX.
func Nonce() []byte {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return []byte(hex.EncodeToString(b[:]))
}
