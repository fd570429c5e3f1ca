package limits

import (
	"context"
	"sync/atomic"
	"time"
)

// RateStore keeps the principals' rate limits where every replica sees
// them, so that a principal's rate holds across replicas rather than per
// replica. Package internal/limits/redisrate implements it in Redis.
type RateStore interface {
	// Allow takes one request from key's allowance: burst requests at
	// once, refilled at perSecond. It reports whether the request may
	// proceed and, when not, how long until one may. key is the
	// principal's key as the [KeyFunc] returned it (issuer, subject and
	// client id): a store must not write it anywhere as it is (hash it).
	// An error means the store could not decide.
	Allow(ctx context.Context, key string, perSecond float64, burst int) (ok bool, retryAfter time.Duration, err error)
}

// RateStoreRetry is how long a [Limiter] leaves its [RateStore] alone
// after the store failed: requests in that time use the replica's own
// bucket at once, so that an outage of the store does not add its timeout
// to every request.
const RateStoreRetry = time.Second

// rateStore is what [Limiter.SetRateStore] set.
type rateStore struct {
	store   RateStore
	onError func(context.Context, error)
}

// rateStoreState is the Limiter's part for a [RateStore].
type rateStoreState struct {
	store     atomic.Pointer[rateStore]
	retryAt   atomic.Int64 // Unix ns before which the store is not asked
	fallbacks atomic.Int64
}

// SetRateStore makes l check each principal's rate in store, shared with
// the other replicas, instead of in this process alone: each request with
// a principal then costs one call to the store (a round trip to Redis),
// made before the in-flight checks. A nil store goes back to local
// buckets. Call it before serving.
//
// When the store fails, the request is checked against this replica's own
// bucket for the principal (the same limit, held per replica as without a
// store): a failing store neither lifts the limit nor refuses everyone.
// onError (nil: none) is then called with the store's error, for a log
// line or a metric; the store is not asked again for [RateStoreRetry], and
// [Limiter.RateStoreFallbacks] counts every request decided locally
// because of a failure. While the store works the local buckets are not
// used, so after a failure each principal starts with a full local burst.
func (l *Limiter) SetRateStore(store RateStore, onError func(context.Context, error)) {
	if store == nil {
		l.rs.store.Store(nil)
		return
	}
	if onError == nil {
		onError = func(context.Context, error) {}
	}
	l.rs.retryAt.Store(0)
	l.rs.store.Store(&rateStore{store: store, onError: onError})
}

// RateStoreFallbacks returns how many requests were checked against the
// local bucket because the [RateStore] had failed (for tests and
// counters).
func (l *Limiter) RateStoreFallbacks() int64 { return l.rs.fallbacks.Load() }

// allowRate takes one request from the rate of the principal key (whose
// local state is p). When it refuses, it says how long until a request
// may pass.
func (l *Limiter) allowRate(ctx context.Context, key string, p *principal) (bool, time.Duration) {
	if rs := l.rs.store.Load(); rs != nil {
		if l.now().UnixNano() >= l.rs.retryAt.Load() {
			ok, retry, err := rs.store.Allow(ctx, key, l.opts.RatePerPrincipal, l.opts.BurstPerPrincipal)
			if err == nil {
				return ok, retry
			}
			l.rs.retryAt.Store(l.now().Add(RateStoreRetry).UnixNano())
			rs.onError(ctx, err)
		}
		l.rs.fallbacks.Add(1)
	}
	now := l.now()
	res := p.rate.ReserveN(now, 1)
	if !res.OK() {
		return false, time.Second
	}
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return false, d
	}
	return true, 0
}
