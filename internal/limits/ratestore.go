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
