package authserver

import (
	"net"
	"net/http"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// addressLimiter keeps a token bucket per client address, the most
// recent 10,000 addresses.
type addressLimiter struct {
	o       RateOptions
	mu      sync.Mutex
	buckets *lru.Cache[string, *rate.Limiter]
	now     func() time.Time
}

func newAddressLimiter(o RateOptions, now func() time.Time) *addressLimiter {
	c, _ := lru.New[string, *rate.Limiter](10_000)
	return &addressLimiter{o: o, buckets: c, now: now}
}

// allow reports whether r's address may go on, or how long it should wait.
func (l *addressLimiter) allow(r *http.Request) (bool, time.Duration) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	l.mu.Lock()
	b, ok := l.buckets.Get(host)
	if !ok {
		b = rate.NewLimiter(rate.Limit(l.o.PerSecond), l.o.Burst)
		l.buckets.Add(host, b)
	}
	l.mu.Unlock()
	res := b.ReserveN(l.now(), 1)
	if d := res.DelayFrom(l.now()); d > 0 {
		res.CancelAt(l.now())
		return false, d
	}
	return true, 0
}
