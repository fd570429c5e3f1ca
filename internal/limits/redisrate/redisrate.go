// Package redisrate keeps the per-principal rate limits of a
// [limits.Limiter] in Redis, so that a principal's rate holds across all
// replicas instead of per replica:
//
//	limiter.SetRateStore(redisrate.New(client, "portcullis:"), func(ctx context.Context, err error) {
//		logger.WarnContext(ctx, "rate limits: Redis failed; using this replica's own limits", "err", err)
//	})
//
// The algorithm is GCRA (the generic cell rate algorithm, a token bucket
// kept as one timestamp per principal), run as a Lua script inside Redis
// by github.com/go-redis/redis_rate, on Redis's clock: the replicas' clocks
// do not matter. A principal's state is one key, prefix+"rate:"+HASH,
// HASH being rediskit.Hash of the principal's key (which holds the issuer
// and subject: never written to Redis as it is); it expires once the
// bucket is full again. Its writes do not wait for replicas: a bucket a
// failover loses is full again, which is what it would be a moment later.
package redisrate

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/redis/go-redis/v9"
)

// Store is a [limits.RateStore] in Redis. Create it with [New]; it is safe
// for concurrent use.
type Store struct {
	limiter *redis_rate.Limiter
}

// New returns a Store keeping its keys in client under prefix (such as
// "portcullis:"). The client belongs to the caller, and its timeouts bound
// how long a request waits for Redis before the limiter falls back to its
// local bucket.
func New(client redis.UniversalClient, prefix string) *Store {
	return &Store{limiter: redis_rate.NewLimiter(prefixed{client, prefix})}
}

// Key returns the Redis key that holds principal's rate state, under
// prefix.
func Key(prefix, principal string) string {
	return prefix + "rate:" + rediskit.Hash(principal)
}

// Allow implements [limits.RateStore].
func (s *Store) Allow(ctx context.Context, key string, perSecond float64, burst int) (bool, time.Duration, error) {
	lim, err := limit(perSecond, burst)
	if err != nil {
		return false, 0, err
	}
	res, err := s.limiter.Allow(ctx, rediskit.Hash(key), lim)
	if err != nil {
		return false, 0, rediskit.Unavailable("rate limit", err)
	}
	if res.Allowed > 0 {
		return true, 0, nil
	}
	return false, max(res.RetryAfter, 0), nil
}

// limit converts a rate per second (perhaps fractional) and a burst into
// redis_rate's terms: a whole number of requests per period, whose
// quotient (the time between two requests) is what GCRA uses.
func limit(perSecond float64, burst int) (redis_rate.Limit, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return redis_rate.Limit{}, fmt.Errorf("redisrate: the rate must be a positive number of requests per second, got %v", perSecond)
	}
	if burst < 1 {
		return redis_rate.Limit{}, fmt.Errorf("redisrate: the burst must be at least 1, got %d", burst)
	}
	if perSecond == math.Trunc(perSecond) && perSecond <= math.MaxInt32 {
		return redis_rate.Limit{Rate: int(perSecond), Burst: burst, Period: time.Second}, nil
	}
	// A fractional rate: count in thousandths, over a period stretched to
	// match (0.25/s is 250 requests per 1000s, one every 4s).
	rate := max(1, int(math.Round(min(perSecond, math.MaxInt32)*1000)))
	period := time.Duration(float64(rate) / perSecond * float64(time.Second))
	return redis_rate.Limit{Rate: rate, Burst: burst, Period: period}, nil
}

// prefixed puts every key redis_rate uses (its own "rate:" prefix and our
// hash) under the configured prefix, which redis_rate cannot do itself.
type prefixed struct {
	redis.UniversalClient
	prefix string
}

func (p prefixed) keys(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = p.prefix + k
	}
	return out
}

// Eval runs a script with the keys under the prefix.
func (p prefixed) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.UniversalClient.Eval(ctx, script, p.keys(keys), args...)
}

// EvalSha runs a loaded script with the keys under the prefix.
func (p prefixed) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.UniversalClient.EvalSha(ctx, sha1, p.keys(keys), args...)
}

// EvalRO runs a read-only script with the keys under the prefix.
func (p prefixed) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return p.UniversalClient.EvalRO(ctx, script, p.keys(keys), args...)
}

// EvalShaRO runs a loaded read-only script with the keys under the prefix.
func (p prefixed) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return p.UniversalClient.EvalShaRO(ctx, sha1, p.keys(keys), args...)
}

// Del deletes the keys under the prefix.
func (p prefixed) Del(ctx context.Context, keys ...string) *redis.IntCmd {
	return p.UniversalClient.Del(ctx, p.keys(keys)...)
}

var _ limits.RateStore = (*Store)(nil)
