package limits

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a manual clock for the rate limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// events records hook events.
type events struct {
	mu  sync.Mutex
	got []Limit
}

func (e *events) hook(_ context.Context, ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev.Limit)
}

func (e *events) list() []Limit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Limit(nil), e.got...)
}

func byHeader(r *http.Request) string { return r.Header.Get("X-Who") }

func newLimiter(t *testing.T, o Options, ev *events, c *clock) *Limiter {
	t.Helper()
	o.Defaults()
	l, err := New(o, Deps{Key: byHeader, Hook: ev.hook, Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func request(h http.Handler, method, who string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, "/mcp", strings.NewReader("{}"))
	r.Header.Set("X-Who", who)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkRefusal checks status, Retry-After and the JSON-RPC error body.
func checkRefusal(t *testing.T, w *httptest.ResponseRecorder, status int, retryAfter string) {
	t.Helper()
	if w.Code != status {
		t.Fatalf("status %d, want %d; body %s", w.Code, status, w.Body)
	}
	if got := w.Header().Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After %q, want %q", got, retryAfter)
	}
	var body struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.JSONRPC != "2.0" || body.Error.Code != -32000 || body.Error.Message == "" {
		t.Errorf("body %q is not a JSON-RPC error (%v)", w.Body, err)
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })

func TestRateLimit(t *testing.T) {
	tests := []struct {
		name       string
		rate       float64
		burst      int
		retryAfter string
	}{
		{name: "one per second", rate: 1, burst: 2, retryAfter: "1"},
		{name: "one per four seconds", rate: 0.25, burst: 1, retryAfter: "4"},
		{name: "fractional wait rounds up", rate: 0.4, burst: 3, retryAfter: "3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
			h := newLimiter(t, Options{RatePerPrincipal: tc.rate, BurstPerPrincipal: tc.burst}, ev, c).Middleware(ok)
			for i := range tc.burst {
				if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
					t.Fatalf("request %d within the burst: status %d", i+1, w.Code)
				}
			}
			checkRefusal(t, request(h, http.MethodPost, "alice"), http.StatusTooManyRequests, tc.retryAfter)
			// Another caller has its own bucket.
			if w := request(h, http.MethodPost, "bob"); w.Code != http.StatusOK {
				t.Errorf("bob: status %d, want 200 (own bucket)", w.Code)
			}
			// A refused request does not consume a token: after the
			// advertised wait, alice may call again.
			c.Add(time.Duration(float64(time.Second) / tc.rate))
			if w := request(h, http.MethodPost, "alice"); w.Code != http.StatusOK {
				t.Errorf("alice after the wait: status %d, want 200", w.Code)
			}
			if got := ev.list(); len(got) != 1 || got[0] != LimitRate {
				t.Errorf("events %v, want [rate]", got)
			}
		})
	}
}

// blocking is a handler that holds each request until release is closed,
// reporting on entered when one arrives.
type blocking struct {
	entered chan struct{}
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.entered <- struct{}{}
	<-b.release
	w.WriteHeader(http.StatusOK)
}

func TestInFlight(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		hold       []string // callers whose requests are held in flight
		next       string   // the caller of the request checked
		method     string
		status     int
		wantEvent  Limit
		retryAfter string
	}{
		{name: "per principal cap", opts: Options{MaxInFlight: 10, MaxInFlightPerPrincipal: 2},
			hold: []string{"alice", "alice"}, next: "alice", method: http.MethodPost,
			status: http.StatusTooManyRequests, wantEvent: LimitInFlightPrincipal, retryAfter: "1"},
		{name: "another principal is not affected", opts: Options{MaxInFlight: 10, MaxInFlightPerPrincipal: 2},
			hold: []string{"alice", "alice"}, next: "bob", method: http.MethodPost, status: http.StatusOK},
		{name: "total cap", opts: Options{MaxInFlight: 2, MaxInFlightPerPrincipal: 2},
			hold: []string{"alice", "bob"}, next: "carol", method: http.MethodPost,
			status: http.StatusServiceUnavailable, wantEvent: LimitInFlightTotal, retryAfter: "1"},
		{name: "GET streams are not counted", opts: Options{MaxInFlight: 2, MaxInFlightPerPrincipal: 2},
			hold: []string{"alice", "bob"}, next: "alice", method: http.MethodGet, status: http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
			l := newLimiter(t, tc.opts, ev, c)
			b := newBlocking()
			held := l.Middleware(b)
			var wg sync.WaitGroup
			for _, who := range tc.hold {
				wg.Go(func() {
					if w := request(held, http.MethodPost, who); w.Code != http.StatusOK {
						t.Errorf("held request of %s: status %d", who, w.Code)
					}
				})
				<-b.entered
			}
			if got := l.InFlight(); got != int64(len(tc.hold)) {
				t.Errorf("InFlight = %d, want %d", got, len(tc.hold))
			}
			w := request(l.Middleware(ok), tc.method, tc.next)
			if tc.status == http.StatusOK {
				if w.Code != http.StatusOK {
					t.Errorf("status %d, want 200", w.Code)
				}
			} else {
				checkRefusal(t, w, tc.status, tc.retryAfter)
			}
			close(b.release)
			wg.Wait()
			if got := l.InFlight(); got != 0 {
				t.Errorf("InFlight after all returned = %d, want 0", got)
			}
			// Slots are released: the same request now passes.
			if w := request(l.Middleware(ok), tc.method, tc.next); w.Code != http.StatusOK {
				t.Errorf("after release: status %d, want 200", w.Code)
			}
			got := ev.list()
			if tc.wantEvent == "" && len(got) != 0 || tc.wantEvent != "" && (len(got) != 1 || got[0] != tc.wantEvent) {
				t.Errorf("events %v, want [%s]", got, tc.wantEvent)
			}
		})
	}
}

func TestPrincipalsAreBounded(t *testing.T) {
	ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
	l := newLimiter(t, Options{MaxPrincipals: 2, RatePerPrincipal: 1, BurstPerPrincipal: 1}, ev, c)
	h := l.Middleware(ok)
	for _, who := range []string{"a", "b", "c", "d", "a"} {
		if w := request(h, http.MethodPost, who); w.Code != http.StatusOK {
			t.Errorf("%s: status %d, want 200", who, w.Code)
		}
	}
	if n := l.principals.Len(); n != 2 {
		t.Errorf("principals kept = %d, want 2 (MaxPrincipals)", n)
	}
	// "a" was forgotten and came back with a fresh bucket; "d" is still
	// known and has used its only token.
	checkRefusal(t, request(h, http.MethodPost, "d"), http.StatusTooManyRequests, "1")
}

func TestValidateNamesKeys(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{name: "defaults are valid", opts: Options{}},
		{name: "negatives", opts: Options{MaxInFlight: -1, MaxInFlightPerPrincipal: -1, BurstPerPrincipal: -1, MaxPrincipals: -1, RatePerPrincipal: -1},
			want: []string{"max_in_flight:", "max_in_flight_per_principal:", "burst_per_principal:", "max_principals:", "rate_per_principal:"}},
		{name: "per principal above total", opts: Options{MaxInFlight: 4, MaxInFlightPerPrincipal: 8},
			want: []string{"max_in_flight_per_principal: 8 is more than max_in_flight 4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Defaults()
			err := tc.opts.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %v\nwant it to mention %q", err, w)
				}
			}
		})
	}
}

// TestNoPrincipal: requests without a principal are not rate limited or
// capped per principal, but count toward the server's total.
func TestNoPrincipal(t *testing.T) {
	ev, c := &events{}, &clock{t: time.Unix(1e9, 0)}
	l := newLimiter(t, Options{MaxInFlight: 1, MaxInFlightPerPrincipal: 1, RatePerPrincipal: 1, BurstPerPrincipal: 1}, ev, c)
	h := l.Middleware(ok)
	for i := range 5 {
		if w := request(h, http.MethodPost, ""); w.Code != http.StatusOK {
			t.Fatalf("request %d without a principal: status %d, want 200 (no per-principal limits)", i+1, w.Code)
		}
	}
	b := newBlocking()
	done := make(chan struct{})
	go func() { defer close(done); request(l.Middleware(b), http.MethodPost, "") }()
	<-b.entered
	checkRefusal(t, request(h, http.MethodPost, ""), http.StatusServiceUnavailable, "1")
	close(b.release)
	<-done
}
