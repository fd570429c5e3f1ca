package limits

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// fakeStore is a RateStore that answers what it is told and records its
// calls.
type fakeStore struct {
	mu    sync.Mutex
	ok    bool
	retry time.Duration
	err   error
	calls []storeCall
}

type storeCall struct {
	key       string
	perSecond float64
	burst     int
}

func (f *fakeStore) Allow(_ context.Context, key string, perSecond float64, burst int) (bool, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, storeCall{key, perSecond, burst})
	return f.ok, f.retry, f.err
}

func (f *fakeStore) set(ok bool, retry time.Duration, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ok, f.retry, f.err = ok, retry, err
}

func (f *fakeStore) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// errorLog records the errors a Limiter reports for its store.
type errorLog struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorLog) record(_ context.Context, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errorLog) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.errs)
}

func TestRateStoreDecides(t *testing.T) {
	tests := []struct {
		name       string
		ok         bool
		retry      time.Duration
		wantStatus int
		retryAfter string
	}{
		{name: "allowed", ok: true, retry: -1, wantStatus: http.StatusOK},
		{name: "refused, wait from the store rounded up", ok: false, retry: 3200 * time.Millisecond, wantStatus: http.StatusTooManyRequests, retryAfter: "4"},
		{name: "refused without a wait", ok: false, retry: 0, wantStatus: http.StatusTooManyRequests, retryAfter: "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
			l := newLimiter(t, Options{RatePerPrincipal: 2.5, BurstPerPrincipal: 1}, ev, c)
			store, errs := &fakeStore{ok: tt.ok, retry: tt.retry}, &errorLog{}
			l.SetRateStore(store, errs.record)
			h := l.Middleware(ok)
			// More requests than the local burst of 1: the store decides
			// alone while it works.
			for i := range 3 {
				w := request(h, http.MethodPost, "alice")
				if tt.wantStatus == http.StatusOK {
					if w.Code != http.StatusOK {
						t.Fatalf("request %d: status %d, want 200 (the store allows)", i+1, w.Code)
					}
					continue
				}
				checkRefusal(t, w, tt.wantStatus, tt.retryAfter)
			}
			if got := store.callCount(); got != 3 {
				t.Fatalf("store asked %d times, want 3", got)
			}
			if c := store.calls[0]; c.key != "alice" || c.perSecond != 2.5 || c.burst != 1 {
				t.Fatalf("store asked %+v, want alice's key with the configured rate and burst", c)
			}
			if errs.count() != 0 || l.RateStoreFallbacks() != 0 {
				t.Fatalf("%d errors, %d fallbacks with a working store", errs.count(), l.RateStoreFallbacks())
			}
			if tt.wantStatus != http.StatusOK {
				if got := ev.list(); len(got) != 3 || got[0] != LimitRate {
					t.Fatalf("events %v, want three rate refusals", got)
				}
			}
		})
	}
}

// A failing store leaves the local limit in force: not no limit, not a
// refusal for everyone. The store is left alone for RateStoreRetry.
func TestRateStoreFailureFallsBackToLocalBucket(t *testing.T) {
	ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
	l := newLimiter(t, Options{RatePerPrincipal: 1, BurstPerPrincipal: 2}, ev, c)
	down := errors.New("redis: connection refused")
	store, errs := &fakeStore{err: down}, &errorLog{}
	l.SetRateStore(store, errs.record)
	h := l.Middleware(ok)

	for i := range 2 {
		if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
			t.Fatalf("request %d within the local burst: status %d, want 200", i+1, w.Code)
		}
	}
	checkRefusal(t, request(h, http.MethodPost, "alice"), http.StatusTooManyRequests, "1")
	if w := request(h, http.MethodPost, "bob"); w.Code != http.StatusOK {
		t.Fatalf("bob: status %d, want 200 (own local bucket)", w.Code)
	}
	if got := store.callCount(); got != 1 {
		t.Fatalf("store asked %d times within RateStoreRetry of its failure, want 1", got)
	}
	if errs.count() != 1 || !errors.Is(errs.errs[0], down) {
		t.Fatalf("errors reported %v, want the store's one", errs.errs)
	}
	if got := l.RateStoreFallbacks(); got != 4 {
		t.Fatalf("RateStoreFallbacks() = %d, want 4", got)
	}

	// After RateStoreRetry the store is asked again; still down, it is
	// reported again.
	c.Add(RateStoreRetry)
	if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
		t.Fatalf("alice after a refill: status %d", w.Code)
	}
	if store.callCount() != 2 || errs.count() != 2 {
		t.Fatalf("after RateStoreRetry: %d calls, %d errors, want 2 and 2", store.callCount(), errs.count())
	}

	// Back up: the store decides again, the local bucket is not consulted.
	c.Add(RateStoreRetry)
	store.set(true, -1, nil)
	for i := range 5 {
		if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
			t.Fatalf("request %d with the store back: status %d", i+1, w.Code)
		}
	}
	if got := l.RateStoreFallbacks(); got != 5 {
		t.Fatalf("RateStoreFallbacks() = %d after recovery, want still 5", got)
	}
}

// Requests without a principal never reach the store; removing the store
// goes back to local buckets.
func TestRateStoreScope(t *testing.T) {
	ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
	l := newLimiter(t, Options{RatePerPrincipal: 1, BurstPerPrincipal: 1}, ev, c)
	store := &fakeStore{ok: true}
	l.SetRateStore(store, nil)
	h := l.Middleware(ok)
	if w := request(h, http.MethodPost, ""); w.Code != http.StatusOK {
		t.Fatalf("anonymous: status %d", w.Code)
	}
	if store.callCount() != 0 {
		t.Fatal("the store was asked about a request without a principal")
	}
	l.SetRateStore(nil, nil)
	if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
		t.Fatalf("alice: status %d", w.Code)
	}
	checkRefusal(t, request(h, http.MethodPost, "alice"), http.StatusTooManyRequests, "1")
	if store.callCount() != 0 {
		t.Fatal("the store was asked after it was removed")
	}
}
