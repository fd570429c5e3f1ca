//go:build e2e

package redisrate_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/portcullis-mcp/portcullis/internal/limits/redisrate"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// replica is one server's Limiter in front of a handler that answers 200.
type replica struct {
	l *limits.Limiter
	h http.Handler

	mu     sync.Mutex
	errors []error
}

func newReplica(t *testing.T, client redis.UniversalClient, opts limits.Options, now func() time.Time) *replica {
	t.Helper()
	l, err := limits.New(opts, limits.Deps{Key: func(r *http.Request) string { return r.Header.Get("X-Who") }, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{l: l, h: l.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))}
	l.SetRateStore(redisrate.New(client, "test:"), func(_ context.Context, err error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.errors = append(r.errors, err)
	})
	return r
}

func (r *replica) call(who string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	req.Header.Set("X-Who", who)
	w := httptest.NewRecorder()
	r.h.ServeHTTP(w, req)
	return w
}

func (r *replica) errorCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errors)
}

// A burst of 3 shared by two replicas: the 4th request is refused on
// either, and the principal's state in Redis is one hashed key.
func TestLimitHoldsAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	// One request per 1000 seconds: no refill during the test.
	opts := limits.Options{RatePerPrincipal: 0.001, BurstPerPrincipal: 3}
	a := newReplica(t, srv.Client(t), opts, nil)
	b := newReplica(t, srv.Client(t), opts, nil)

	for i, r := range []*replica{a, b, a} {
		if w := r.call("alice"); w.Code != http.StatusOK {
			t.Fatalf("request %d within the shared burst: status %d", i+1, w.Code)
		}
	}
	for name, r := range map[string]*replica{"a": a, "b": b} {
		w := r.call("alice")
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("4th request on replica %s: status %d, want 429", name, w.Code)
		}
		// The next request is 1000s away (less the test's time so far).
		if ra := w.Header().Get("Retry-After"); ra != "1000" && ra != "999" {
			t.Errorf("Retry-After on replica %s = %q, want about 1000", name, ra)
		}
	}
	// Another principal has its own allowance.
	if w := b.call("bob"); w.Code != http.StatusOK {
		t.Fatalf("bob: status %d", w.Code)
	}
	if a.errorCount()+b.errorCount() != 0 || a.l.RateStoreFallbacks()+b.l.RateStoreFallbacks() != 0 {
		t.Fatalf("store errors %v %v with Redis up", a.errors, b.errors)
	}

	keys, err := srv.Client(t).Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{redisrate.Key("test:", "alice"): true, redisrate.Key("test:", "bob"): true}
	if len(keys) != 2 || !want[keys[0]] || !want[keys[1]] {
		t.Fatalf("keys in Redis = %q, want the two hashed principal keys %v", keys, want)
	}
}

// With Redis down each replica holds the limit locally (no request goes
// unlimited, none is refused for the outage alone); once Redis is back
// the shared limit applies again.
func TestRedisOutageFallsBackToLocalLimit(t *testing.T) {
	srv := redistest.Start(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	opts := limits.Options{RatePerPrincipal: 0.001, BurstPerPrincipal: 2}
	a := newReplica(t, srv.Client(t), opts, clock)

	srv.Stop()

	start := time.Now()
	for i := range 2 {
		if w := a.call("alice"); w.Code != http.StatusOK {
			t.Fatalf("request %d within the local burst with Redis down: status %d", i+1, w.Code)
		}
	}
	if w := a.call("alice"); w.Code != http.StatusTooManyRequests {
		t.Fatalf("3rd request with Redis down: status %d, want 429 from the local bucket", w.Code)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("three requests with Redis down took %v", took)
	}
	if a.errorCount() != 1 || a.l.RateStoreFallbacks() != 3 {
		t.Fatalf("%d errors reported, %d fallbacks; want 1 (then RateStoreRetry) and 3", a.errorCount(), a.l.RateStoreFallbacks())
	}
	t.Logf("reported: %v", a.errors[0])

	srv.Restart()
	advance(limits.RateStoreRetry)
	// The pool meets its dead connections first: poll until Redis decides.
	deadline := time.Now().Add(10 * time.Second)
	for {
		before := a.l.RateStoreFallbacks()
		w := a.call("bob")
		if w.Code != http.StatusOK {
			t.Fatalf("bob after the restart: status %d", w.Code)
		}
		if a.l.RateStoreFallbacks() == before {
			break // Redis decided
		}
		if time.Now().After(deadline) {
			t.Fatal("the limiter did not use the restarted Redis within 10s")
		}
		advance(limits.RateStoreRetry)
		time.Sleep(50 * time.Millisecond) // waiting on a real process
	}
	// Redis (empty after the restart) holds bob's shared allowance now.
	if n, err := srv.Client(t).Exists(context.Background(), redisrate.Key("test:", "bob")).Result(); err != nil || n != 1 {
		t.Fatalf("bob's key in Redis after the restart: %d, %v", n, err)
	}
}

// TestLimitHoldsOnCluster: on a Redis Cluster each principal's bucket is
// one key in its own slot, and the shared burst holds across replicas.
func TestLimitHoldsOnCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	opts := limits.Options{RatePerPrincipal: 0.001, BurstPerPrincipal: 2}
	a := newReplica(t, c.Client(t, ""), opts, nil)
	b := newReplica(t, c.Client(t, ""), opts, nil)
	for _, who := range []string{"alice", "bob", "carol", "dave", "erin"} {
		for i, r := range []*replica{a, b} {
			if w := r.call(who); w.Code != http.StatusOK {
				t.Fatalf("%s's request %d within the burst: status %d", who, i+1, w.Code)
			}
		}
		if w := a.call(who); w.Code != http.StatusTooManyRequests {
			t.Fatalf("%s's 3rd request: status %d, want 429", who, w.Code)
		}
	}
	if a.errorCount()+b.errorCount() != 0 {
		t.Fatalf("store errors %v %v on the cluster", a.errors, b.errors)
	}
}
