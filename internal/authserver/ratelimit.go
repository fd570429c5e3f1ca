package authserver

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

// RateOptions bound what one client address may ask of the endpoints that
// create state (authorize, token, register, revoke), before any client is
// known. Per replica.
type RateOptions struct {
	// PerSecond is the sustained rate per client address. Default 5.
	// Behind a load balancer that does not preserve client addresses,
	// every request comes from its address: raise this accordingly.
	PerSecond float64 `yaml:"per_second" schema:"min=0"`
	// Burst is how many requests an address may make at once. Default 20.
	Burst int `yaml:"burst" schema:"min=0"`
}

func (o *RateOptions) defaults() {
	if o.PerSecond == 0 {
		o.PerSecond = 5
	}
	if o.Burst == 0 {
		o.Burst = 20
	}
}

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

// limit wraps h with the address limiter: a refused request gets 429 with
// Retry-After, in the endpoint's format (OAuth JSON, or a page for a
// browser's authorize request).
func (s *Server) limit(endpoint string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ok, wait := s.rate.allow(r)
		if ok {
			h(w, r)
			return
		}
		s.observe(Event{Endpoint: endpoint, Outcome: "refused", Reason: "rate_limited"})
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		if endpoint == "authorize" {
			s.page(w, http.StatusTooManyRequests, "Too many requests", "Too many sign-ins from this address; try again in a moment.")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "slow_down", "error_description": "Too many requests from this address; retry after the Retry-After delay."})
	}
}
