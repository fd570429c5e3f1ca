package limits_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/limits"
)

// A Limiter wraps a handler after authentication; the key function names
// the caller, and the hook counts refusals.
func ExampleLimiter_Middleware() {
	opts := limits.Options{RatePerPrincipal: 1, BurstPerPrincipal: 2}
	opts.Defaults()
	caller := func(r *http.Request) string { return r.Header.Get("X-Caller") }
	hook := func(_ context.Context, ev limits.Event) { fmt.Println("refused by", ev.Limit) }
	l, err := limits.New(opts, limits.Deps{Key: caller, Hook: hook})
	if err != nil {
		panic(err)
	}
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("X-Caller", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Printf("%d Retry-After=%q\n", w.Code, w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 Retry-After=""
	// 200 Retry-After=""
	// refused by rate
	// 429 Retry-After="1"
}

// downStore is a RateStore whose backend is unreachable.
type downStore struct{}

func (downStore) Allow(context.Context, string, float64, int) (bool, time.Duration, error) {
	return false, 0, errors.New("redis: connection refused")
}

// With a shared RateStore the replicas share each caller's rate. When the
// store fails, the limiter says so and holds the caller to this replica's
// own bucket: the limit stays, and nobody is refused for the outage alone.
func ExampleLimiter_SetRateStore() {
	opts := limits.Options{RatePerPrincipal: 1, BurstPerPrincipal: 2}
	caller := func(r *http.Request) string { return r.Header.Get("X-Caller") }
	l, err := limits.New(opts, limits.Deps{Key: caller})
	if err != nil {
		panic(err)
	}
	l.SetRateStore(downStore{}, func(_ context.Context, err error) {
		fmt.Println("rate store failed, using local limits:", err)
	})
	h := l.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 3 {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("X-Caller", "alice")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	fmt.Println("decided locally:", l.RateStoreFallbacks())
	// Output:
	// rate store failed, using local limits: redis: connection refused
	// 200
	// 200
	// 429
	// decided locally: 3
}
