// Package limits bounds the work one server takes on: requests in flight
// overall and per principal, a token-bucket rate per principal, and the
// time a request body may take to arrive ([BodyDeadline]).
//
// [Limiter.Middleware] wraps the /mcp handler after authentication, so it
// knows who is calling. An excess request is answered at once, never
// queued: 503 with Retry-After when the server as a whole is full, 429 with
// Retry-After when one principal is over its share or its rate. The body is
// a JSON-RPC error, so an MCP client can show it.
//
// By default each replica keeps its own rate buckets. With
// [Limiter.SetRateStore] the rates live in a [RateStore] shared by the
// replicas (internal/limits/redisrate keeps them in Redis), and a failing
// store falls back to the local bucket.
//
// The package imports no telemetry: it reports each refusal to a [Hook],
// which the observability layer turns into metrics, and each failure of a
// rate store to the function given to [Limiter.SetRateStore].
package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/portcullis-mcp/portcullis/internal/jsonrpcerr"
	"golang.org/x/time/rate"
)

// Options is the `limits:` section of the configuration. Zero values mean
// the documented defaults, chosen for one production replica on a couple of
// cores; raise them for bigger machines.
type Options struct {
	// MaxInFlight bounds requests being served at once, over all callers;
	// more get 503 with Retry-After. Long-lived GET streams are not counted
	// (mcp.max_sessions bounds them). Default 512.
	MaxInFlight int `yaml:"max_in_flight" schema:"min=0"`
	// MaxInFlightPerPrincipal bounds one caller's requests at once; more get
	// 429 with Retry-After. Default 32.
	MaxInFlightPerPrincipal int `yaml:"max_in_flight_per_principal" schema:"min=0"`
	// RatePerPrincipal is the sustained requests per second one caller may
	// make (a token bucket keyed on issuer, subject and client id); faster
	// callers get 429 with Retry-After. Default 50.
	RatePerPrincipal float64 `yaml:"rate_per_principal" schema:"min=0"`
	// BurstPerPrincipal is the bucket size: how many requests a caller may
	// make at once after a pause. Default 100.
	BurstPerPrincipal int `yaml:"burst_per_principal" schema:"min=0"`
	// MaxPrincipals bounds the callers whose state is kept; the least
	// recently seen is forgotten first. Default 10000.
	MaxPrincipals int `yaml:"max_principals" schema:"min=0"`
}

// Defaults for [Options].
const (
	DefaultMaxInFlight             = 512
	DefaultMaxInFlightPerPrincipal = 32
	DefaultRatePerPrincipal        = 50
	DefaultBurstPerPrincipal       = 100
	DefaultMaxPrincipals           = 10000
)

// Defaults fills in zero values.
func (o *Options) Defaults() {
	if o.MaxInFlight == 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxInFlightPerPrincipal == 0 {
		o.MaxInFlightPerPrincipal = DefaultMaxInFlightPerPrincipal
	}
	if o.RatePerPrincipal == 0 {
		o.RatePerPrincipal = DefaultRatePerPrincipal
	}
	if o.BurstPerPrincipal == 0 {
		o.BurstPerPrincipal = DefaultBurstPerPrincipal
	}
	if o.MaxPrincipals == 0 {
		o.MaxPrincipals = DefaultMaxPrincipals
	}
}

// Validate reports every problem with o, each prefixed with its key
// relative to the limits section.
func (o *Options) Validate() error {
	var errs []error
	for key, v := range map[string]int{
		"max_in_flight":               o.MaxInFlight,
		"max_in_flight_per_principal": o.MaxInFlightPerPrincipal,
		"burst_per_principal":         o.BurstPerPrincipal,
		"max_principals":              o.MaxPrincipals,
	} {
		if v < 0 {
			errs = append(errs, fmt.Errorf("%s: must not be negative, got %d", key, v))
		}
	}
	if o.RatePerPrincipal < 0 || math.IsNaN(o.RatePerPrincipal) || math.IsInf(o.RatePerPrincipal, 0) {
		errs = append(errs, fmt.Errorf("rate_per_principal: must be a positive number of requests per second, got %v", o.RatePerPrincipal))
	}
	if o.MaxInFlight > 0 && o.MaxInFlightPerPrincipal > o.MaxInFlight {
		errs = append(errs, fmt.Errorf("max_in_flight_per_principal: %d is more than max_in_flight %d", o.MaxInFlightPerPrincipal, o.MaxInFlight))
	}
	return errors.Join(errs...)
}

// Limit names what refused a request, as reported in an [Event].
type Limit string

// The limits [Limiter], the MCP layer and net/http enforce; [Table]
// describes each.
const (
	LimitInFlightTotal     Limit = "inflight_total"
	LimitInFlightPrincipal Limit = "inflight_principal"
	LimitRate              Limit = "rate"
	LimitSessions          Limit = "sessions"
	LimitSessionsPrincipal Limit = "sessions_principal"
	LimitBodySize          Limit = "body_size"
	LimitBodyReadTimeout   Limit = "body_read_timeout"
	LimitToolTimeout       Limit = "tool_timeout"
	LimitHeaderSize        Limit = "header_size"
	LimitReadHeaderTimeout Limit = "read_header_timeout"
)

// Event is one refusal (or, for [LimitToolTimeout], one call cut off).
type Event struct {
	Limit Limit
	// Tool is the tool's name for LimitToolTimeout, else empty.
	Tool string
}

// Hook receives limit events. It must be fast and must not block.
type Hook func(context.Context, Event)

// KeyFunc returns the key a request's principal is limited under, e.g.
// issuer, subject and client id of its verified token. An empty key means
// the request has no principal (auth is off): only the overall cap applies,
// since every caller behind one proxy would otherwise share one share.
type KeyFunc func(*http.Request) string

// Limiter enforces [Options] on HTTP requests. Create it with [New].
type Limiter struct {
	opts  Options
	key   KeyFunc
	hook  Hook
	now   func() time.Time
	total atomic.Int64
	rs    rateStoreState

	mu         sync.Mutex // guards principals' Get-or-Add
	principals *lru.Cache[string, *principal]
}

// principal is one caller's state.
type principal struct {
	inFlight atomic.Int64
	rate     *rate.Limiter
}

// Deps are what a [Limiter] needs besides its [Options].
type Deps struct {
	// Key names the caller a request is counted under; required.
	Key KeyFunc
	// Hook receives every refusal. Nil means none.
	Hook Hook
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
}

// New returns a Limiter for opts. Zero fields of opts take their defaults
// (see [Options.Defaults]).
func New(opts Options, deps Deps) (*Limiter, error) {
	key, hook, now := deps.Key, deps.Hook, deps.Now
	opts.Defaults()
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	if key == nil {
		return nil, errors.New("limits: no key function")
	}
	if hook == nil {
		hook = func(context.Context, Event) {}
	}
	if now == nil {
		now = time.Now
	}
	size := opts.MaxPrincipals
	if size <= 0 {
		size = DefaultMaxPrincipals
	}
	cache, err := lru.New[string, *principal](size)
	if err != nil {
		return nil, fmt.Errorf("limits: %w", err)
	}
	return &Limiter{opts: opts, key: key, hook: hook, now: now, principals: cache}, nil
}

func (l *Limiter) principal(key string) *principal {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.principals.Get(key); ok {
		return p
	}
	p := &principal{rate: rate.NewLimiter(rate.Limit(l.opts.RatePerPrincipal), l.opts.BurstPerPrincipal)}
	l.principals.Add(key, p)
	return p
}

// InFlight returns the number of requests being served now (for tests and
// gauges).
func (l *Limiter) InFlight() int64 { return l.total.Load() }

// Middleware returns next guarded by the limits. The order of checks is
// the cheapest refusal first: the caller's rate, then the caller's share of
// requests in flight, then the server's total. GET requests (long-lived SSE
// streams) are not counted in flight, but are rate limited. Requests without
// a principal (an empty key) see only the server's total.
func (l *Limiter) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := l.key(r)
		if key == "" {
			if r.Method == http.MethodGet {
				next.ServeHTTP(w, r)
				return
			}
			if !l.enter() {
				l.refuseTotal(w, r)
				return
			}
			defer l.total.Add(-1)
			next.ServeHTTP(w, r)
			return
		}
		p := l.principal(key)
		if ok, retry := l.allowRate(r.Context(), key, p); !ok {
			l.refuse(w, r, LimitRate, http.StatusTooManyRequests, retry, "Too many requests: this caller's request rate is over its limit.")
			return
		}
		if r.Method == http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		if p.inFlight.Add(1) > int64(l.opts.MaxInFlightPerPrincipal) {
			p.inFlight.Add(-1)
			l.refuse(w, r, LimitInFlightPrincipal, http.StatusTooManyRequests, time.Second,
				fmt.Sprintf("Too many requests: this caller already has %d requests in progress.", l.opts.MaxInFlightPerPrincipal))
			return
		}
		defer p.inFlight.Add(-1)
		if !l.enter() {
			l.refuseTotal(w, r)
			return
		}
		defer l.total.Add(-1)
		next.ServeHTTP(w, r)
	})
}

// enter takes one of the server's in-flight slots, if one is free.
func (l *Limiter) enter() bool {
	if l.total.Add(1) > int64(l.opts.MaxInFlight) {
		l.total.Add(-1)
		return false
	}
	return true
}

func (l *Limiter) refuseTotal(w http.ResponseWriter, r *http.Request) {
	l.refuse(w, r, LimitInFlightTotal, http.StatusServiceUnavailable, time.Second,
		"Service unavailable: the server is at capacity.")
}

func (l *Limiter) refuse(w http.ResponseWriter, r *http.Request, limit Limit, status int, retry time.Duration, msg string) {
	l.hook(r.Context(), Event{Limit: limit})
	WriteRefusal(w, status, retry, msg+" Retry later.")
}

// WriteRefusal writes status with a Retry-After of retry (whole seconds,
// rounded up, at least 1) and a JSON-RPC error body (id null, code -32000)
// carrying msg. The MCP layer uses it for its own limits too.
func WriteRefusal(w http.ResponseWriter, status int, retry time.Duration, msg string) {
	secs := int64(math.Ceil(retry.Seconds()))
	if secs < 1 {
		secs = 1
	}
	h := w.Header()
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	h.Set("Cache-Control", "no-store")
	jsonrpcerr.Write(w, status, nil, jsonrpcerr.ServerError, msg)
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
