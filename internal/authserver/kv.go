package authserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotFound is what a [KV] returns for a key it does not hold.
var ErrNotFound = errors.New("authserver: not found")

// ErrUnavailable wraps a [KV] failure: the shared store did not answer.
// The endpoints answer 503 temporarily_unavailable; tokens already issued
// keep working, since /mcp verifies them without the store.
var ErrUnavailable = errors.New("authserver: store unavailable")

// KV is the state the authorization server keeps: codes, sign-ins in
// progress, refresh-token families, consents. Replicas share it through
// Redis ([NewRedisKV]); one replica can keep it in memory ([NewMemoryKV]).
// Every value expires.
type KV interface {
	// Get returns key's value, or ErrNotFound.
	Get(ctx context.Context, key string) ([]byte, error)
	// Set stores value under key for ttl.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// SetNX stores value under key for ttl only if key is absent, and
	// reports whether it did: the one winner of a race.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// GetDel returns key's value and deletes it in one step, or ErrNotFound:
	// what is used once is taken once.
	GetDel(ctx context.Context, key string) ([]byte, error)
	// Del deletes keys; absent ones are no error.
	Del(ctx context.Context, keys ...string) error
}

// memoryKV is a KV in process memory, for one replica.
type memoryKV struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]memoryEntry
	ops int
}

type memoryEntry struct {
	value   []byte
	expires time.Time
}

// NewMemoryKV returns a KV in process memory; now is the clock (nil:
// time.Now).
func NewMemoryKV(now func() time.Time) KV {
	if now == nil {
		now = time.Now
	}
	return &memoryKV{now: now, m: map[string]memoryEntry{}}
}

// get returns key's live entry; the caller holds mu. Every 1024 operations
// it sweeps expired entries, so memory stays bounded by what is live.
func (k *memoryKV) get(key string) (memoryEntry, bool) {
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

func (k *memoryKV) Get(_ context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return e.value, nil
}

func (k *memoryKV) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.get(key)
	k.m[key] = memoryEntry{value: value, expires: k.now().Add(ttl)}
	return nil
}

func (k *memoryKV) SetNX(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.get(key); ok {
		return false, nil
	}
	k.m[key] = memoryEntry{value: value, expires: k.now().Add(ttl)}
	return true, nil
}

func (k *memoryKV) GetDel(_ context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.get(key)
	if !ok {
		return nil, ErrNotFound
	}
	delete(k.m, key)
	return e.value, nil
}

func (k *memoryKV) Del(_ context.Context, keys ...string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		delete(k.m, key)
	}
	return nil
}

// redisKV is a KV in Redis, shared by replicas.
type redisKV struct {
	c      redis.UniversalClient
	prefix string
}

// NewRedisKV returns a KV in Redis under keys starting with prefix.
func NewRedisKV(c redis.UniversalClient, prefix string) KV {
	return &redisKV{c: c, prefix: prefix}
}

func (k *redisKV) key(key string) string { return k.prefix + key }

// redisErr maps go-redis errors: Nil is ErrNotFound, anything else means
// Redis did not answer.
func redisErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, redis.Nil):
		return ErrNotFound
	default:
		return errors.Join(ErrUnavailable, err)
	}
}

func (k *redisKV) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := k.c.Get(ctx, k.key(key)).Bytes()
	return b, redisErr(err)
}

func (k *redisKV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return redisErr(k.c.Set(ctx, k.key(key), value, ttl).Err())
}

func (k *redisKV) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	ok, err := k.c.SetNX(ctx, k.key(key), value, ttl).Result()
	return ok, redisErr(err)
}

func (k *redisKV) GetDel(ctx context.Context, key string) ([]byte, error) {
	b, err := k.c.GetDel(ctx, k.key(key)).Bytes()
	return b, redisErr(err)
}

func (k *redisKV) Del(ctx context.Context, keys ...string) error {
	// One DEL per key, pipelined: on Redis Cluster the keys may live in
	// different slots, where one DEL of them all is refused (CROSSSLOT);
	// the cluster client sends each to its node.
	_, err := k.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, key := range keys {
			p.Del(ctx, k.key(key))
		}
		return nil
	})
	return redisErr(err)
}

// joinKey builds a key from parts; parts are ids and hashes, never raw
// tokens.
func joinKey(parts ...string) string { return strings.Join(parts, ":") }

func hashString(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}
