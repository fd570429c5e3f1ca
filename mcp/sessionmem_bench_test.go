package mcp

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// idleBatch is how many idle sessions BenchmarkIdleSessionMemory holds
// open at most: it measures and deletes them in batches of this many.
const idleBatch = 200

// BenchmarkIdleSessionMemory measures what an idle 2025-11-25 session
// costs the replica that holds it: the live heap and goroutine stacks it
// adds, after a collection, per session (live-B/session), and its
// goroutines (goroutines/session). An iteration opens one session
// (initialize, then notifications/initialized, as the load harness does);
// every idleBatch sessions, and at the end, the open ones are measured
// and deleted. It compares
//
//   - memory: no session store, as one replica runs without Redis;
//   - shared/made: a shared store, the session made on this replica;
//   - shared/adopted: a shared store, a copy this replica adopted from the
//     record when a request of a session made elsewhere reached it (its
//     first request here, a ping).
//
// The store is remoteRecords: the records live outside the process, as
// in Redis, so that what is measured is the replica's own memory. The load
// harness (bench/loadtest) measures the real binary with a real Redis.
//
//	go test -run '^$' -bench IdleSessionMemory -benchtime 1000x ./mcp/
func BenchmarkIdleSessionMemory(b *testing.B) {
	for _, bc := range []struct {
		name    string
		store   bool
		adopted bool
	}{
		{name: "memory"},
		{name: "shared/made", store: true},
		{name: "shared/adopted", store: true, adopted: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			deps := Deps{}
			if bc.store {
				deps.SharedSessions.Store = newRemoteRecords(b)
			}
			h := endpoint{deps: deps, edit: func(o *Options) {
				o.MaxSessions, o.MaxSessionsPerPrincipal = idleBatch, idleBatch
			}}.handler(b)
			var (
				bytes, goroutines float64
				measured          int
				open              []string
			)
			// A first batch, deleted, so that what is allocated once for
			// all (the first session's, the maps' growth) is not counted.
			warm := make([]string, idleBatch)
			for i := range warm {
				warm[i] = openSession(b, h)
			}
			for _, id := range warm {
				deleteSession(b, h, id)
			}
			heap0, g0 := liveMemory()
			flush := func() {
				b.StopTimer()
				defer b.StartTimer()
				heap1, g1 := liveMemory()
				bytes += float64(heap1) - float64(heap0)
				goroutines += float64(g1 - g0)
				measured += len(open)
				for _, id := range open {
					deleteSession(b, h, id)
				}
				open = open[:0]
				waitGoroutines(b, g0)
				heap0, g0 = liveMemory()
			}
			for b.Loop() {
				if !bc.adopted {
					open = append(open, openSession(b, h))
				} else {
					id := "adopted-" + strconv.Itoa(measured+len(open))
					sessionPost(b, h, id, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.StatusOK)
					open = append(open, id)
				}
				if len(open) == idleBatch {
					flush()
				}
			}
			if len(open) > 0 {
				flush()
			}
			b.ReportMetric(bytes/float64(measured), "live-B/session")
			b.ReportMetric(goroutines/float64(measured), "goroutines/session")
		})
	}
}

// liveMemory collects garbage and returns the live heap plus goroutine
// stacks, and the number of goroutines.
func liveMemory() (bytes uint64, goroutines int) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse, runtime.NumGoroutine()
}

// waitGoroutines waits until the goroutines of the sessions just closed
// have ended, so that the next batch starts from what this one started
// from; it fails the benchmark if they outlive a closed session by long.
func waitGoroutines(b testing.TB, want int) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			b.Fatalf("%d goroutines 10s after the sessions were deleted, %d before they were opened", runtime.NumGoroutine(), want)
		}
		runtime.Gosched()
	}
}

// sessionPost sends body to h as a 2025-11-25 request of session id (none
// when empty) and wants status; it returns the response.
func sessionPost(b testing.TB, h http.Handler, id, body string, status int) *httptest.ResponseRecorder {
	b.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	if id != "" {
		r.Header.Set("Mcp-Session-Id", id)
		r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != status {
		b.Fatalf("%.60s: status %d, want %d: %.200s", body, w.Code, status, w.Body)
	}
	return w
}

// openSession initializes a 2025-11-25 session on h, as the load harness
// does, and returns its id.
func openSession(b testing.TB, h http.Handler) string {
	b.Helper()
	w := sessionPost(b, h, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`, http.StatusOK)
	id := w.Header().Get("Mcp-Session-Id")
	if id == "" {
		b.Fatal("initialize: no Mcp-Session-Id")
	}
	sessionPost(b, h, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, http.StatusAccepted)
	return id
}

// deleteSession ends session id on h.
func deleteSession(b testing.TB, h http.Handler, id string) {
	b.Helper()
	r := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	r.Header.Set("Mcp-Session-Id", id)
	r.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code/100 != 2 {
		b.Fatalf("DELETE: status %d: %.200s", w.Code, w.Body)
	}
}

// remoteRecords is a [sharedsession.Store] whose records live outside the
// process, as Redis keeps them: it holds one encoded record, the one
// openSession's initialize makes, and answers every Get with a fresh
// decoding of it, for any id, as Redis answers with the bytes it holds.
// Put and Delete keep nothing. What else a store may offer comes from the
// embedded memory store.
type remoteRecords struct {
	*sharedsession.MemoryStore
	record []byte
}

func newRemoteRecords(b testing.TB) *remoteRecords {
	rec, err := json.Marshal(sharedsession.Record{ProtocolVersion: "2025-11-25", Initialize: &sdk.InitializeParams{
		ProtocolVersion: "2025-11-25",
		Capabilities:    &sdk.ClientCapabilities{},
		ClientInfo:      &sdk.Implementation{Name: "bench", Version: "1"},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return &remoteRecords{MemoryStore: sharedsession.NewMemoryStore(nil), record: rec}
}

// Put implements [sharedsession.Store]: the record is the one it holds.
func (s *remoteRecords) Put(context.Context, string, sharedsession.Record, time.Duration) error {
	return nil
}

// Get implements [sharedsession.Store].
func (s *remoteRecords) Get(context.Context, string, time.Duration) (sharedsession.Record, bool, error) {
	var rec sharedsession.Record
	err := json.Unmarshal(s.record, &rec)
	return rec, err == nil, err
}

// Delete implements [sharedsession.Store].
func (s *remoteRecords) Delete(context.Context, string) error { return nil }

// TestIdleSessionGoroutines opens idle 2025-11-25 sessions on one replica:
// a session costs the same goroutines whether the replica keeps sessions
// in memory or shares them (made here or adopted), the measure of
// BenchmarkIdleSessionMemory that does not depend on the machine.
func TestIdleSessionGoroutines(t *testing.T) {
	const n = 50
	perSession := func(t *testing.T, store, adopted bool) float64 {
		deps := Deps{}
		if store {
			deps.SharedSessions.Store = newRemoteRecords(t)
		}
		h := endpoint{deps: deps, edit: func(o *Options) {
			o.MaxSessions, o.MaxSessionsPerPrincipal = n, n
		}}.handler(t)
		_, g0 := liveMemory()
		open := make([]string, n)
		for i := range open {
			if adopted {
				open[i] = "adopted-" + strconv.Itoa(i)
				sessionPost(t, h, open[i], `{"jsonrpc":"2.0","id":1,"method":"ping"}`, http.StatusOK)
			} else {
				open[i] = openSession(t, h)
			}
		}
		_, g1 := liveMemory()
		for _, id := range open {
			deleteSession(t, h, id)
		}
		waitGoroutines(t, g0)
		return math.Round(float64(g1-g0) / n)
	}
	want := perSession(t, false, false)
	tests := []struct {
		name    string
		adopted bool
	}{
		{name: "shared, made here"},
		{name: "shared, adopted", adopted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := perSession(t, true, tt.adopted); got != want {
				t.Errorf("%v goroutines per idle session, want %v as with sessions in memory", got, want)
			}
		})
	}
}

// BenchmarkSessionCall measures a 2025-11-25 tools/call (the core echo)
// on an open legacy session through the whole handler: memory, kept by
// the SDK's handler as one replica runs without Redis, against shared, a
// copy of a session shared through a store, its streams' log in process
// memory (so that what is measured is the replica's own path, not
// Redis's). It reports the log's appends per call (appends/op): a call
// whose client gets its response costs the log none.
//
//	go test -run '^$' -bench SessionCall -count 10 ./mcp | benchstat -col /store -
func BenchmarkSessionCall(b *testing.B) {
	for _, bc := range []struct {
		name   string
		shared bool
	}{
		{name: "store=memory"},
		{name: "store=shared", shared: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			log := &countingLog{Log: sharedsession.NewMemoryLog(nil, defaultEventsKept)}
			deps := Deps{}
			if bc.shared {
				deps.SharedSessions = sharedsession.Backend{Store: sharedsession.NewMemoryStore(nil), Log: log}
			}
			h := endpoint{deps: deps}.handler(b)
			id := openSession(b, h)
			const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"bench"}}}`
			b.ReportAllocs()
			for b.Loop() {
				w := sessionPost(b, h, id, call, http.StatusOK)
				if !strings.Contains(w.Body.String(), `"text":"bench"`) {
					b.Fatalf("tools/call: %s", w.Body)
				}
			}
			b.ReportMetric(float64(log.appends.Load())/float64(b.N), "appends/op")
		})
	}
}
