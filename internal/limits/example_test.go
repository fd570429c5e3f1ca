package limits_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/portcullis-mcp/portcullis/internal/limits"
)

// A Limiter wraps a handler after authentication; the key function names
// the caller, and the hook counts refusals.
func ExampleLimiter_Middleware() {
	opts := limits.Options{RatePerPrincipal: 1, BurstPerPrincipal: 2}
	opts.Defaults()
	caller := func(r *http.Request) string { return r.Header.Get("X-Caller") }
	hook := func(_ context.Context, ev limits.Event) { fmt.Println("refused by", ev.Limit) }
	l, err := limits.New(opts, caller, hook, nil)
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
