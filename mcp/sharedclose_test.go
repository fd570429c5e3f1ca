package mcp

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// subscriptionCount is a bus that counts its open subscriptions.
type subscriptionCount struct {
	sharedsession.Bus
	mu   sync.Mutex
	open int
}

func (b *subscriptionCount) Subscribe(ctx context.Context, deliver func([]byte), lost func()) (sharedsession.Subscription, error) {
	sub, err := b.Bus.Subscribe(ctx, deliver, lost)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open++
	return &countedSubscription{Subscription: sub, bus: b}, nil
}

func (b *subscriptionCount) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open
}

type countedSubscription struct {
	sharedsession.Subscription
	bus  *subscriptionCount
	once sync.Once
}

func (s *countedSubscription) Close() error {
	s.once.Do(func() {
		s.bus.mu.Lock()
		s.bus.open--
		s.bus.mu.Unlock()
	})
	return s.Subscription.Close()
}

// downBus is a bus that never answers a subscription, as Redis down at
// start.
type downBus struct{ *sharedsession.MemoryBus }

func (downBus) Subscribe(context.Context, func([]byte), func()) (sharedsession.Subscription, error) {
	return nil, errors.New("the bus is down")
}

// TestSharedHandlerCloseLeavesNothing closes a handler that shares
// sessions after it served them: a session made here and one adopted
// (each a copy connected to the SDK server), a client's answer handed to
// a copy, a standalone stream that the drain ended; or after its bus did
// not answer at Start, so that it was still trying again. Once Close
// returns no goroutine of the handler is left, nor a subscription to its
// bus, and requests of sessions are refused. The bubble fails the test,
// too, if a goroutine is left blocked.
func TestSharedHandlerCloseLeavesNothing(t *testing.T) {
	tests := []struct {
		name     string
		bus      sharedsession.Bus
		sessions bool // the bus answers, and sessions are served
	}{
		{name: "after serving sessions", bus: sharedsession.NewMemoryBus(), sessions: true},
		{name: "while subscribing again", bus: downBus{sharedsession.NewMemoryBus()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				before, _ := bubbleGoroutines()
				store := sharedsession.NewMemoryStore(nil)
				bus := &subscriptionCount{Bus: tt.bus}
				h := endpoint{deps: Deps{
					SharedSessions: sharedsession.Backend{Store: store, Bus: bus},
					PrincipalKey:   func(r *http.Request) string { return r.Header.Get(principalHeader) },
				}}.handler(t)
				if tt.sessions {
					if n := bus.count(); n != 1 {
						t.Fatalf("%d subscriptions once started, want 1", n)
					}
					serveSessions(t, h, store)
				}
				if err := h.Close(); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if n, stacks := bubbleGoroutines(); n != before {
					t.Errorf("%d goroutines after Close, %d before the handler was made:\n%s", n, before, stacks)
				}
				if n := bus.count(); n != 0 {
					t.Errorf("%d subscriptions to the bus after Close, want 0", n)
				}
				r := postTo(t, h, legacyInit, map[string]string{principalHeader: "alice"})
				if r.status != http.StatusServiceUnavailable {
					t.Errorf("an initialize after Close: status %d, want 503: %s", r.status, r.body)
				}
			})
		})
	}
}

// bubbleGoroutines returns the goroutines of the synctest bubble of the
// caller, and the stacks of every goroutine.
func bubbleGoroutines() (int, string) {
	buf := make([]byte, 1<<20)
	self := string(buf[:runtime.Stack(buf, false)])
	_, bubble, ok := strings.Cut(strings.SplitN(self, "\n", 2)[0], ", synctest bubble ")
	if !ok {
		panic("not in a synctest bubble: " + self)
	}
	all := string(buf[:runtime.Stack(buf, true)])
	return strings.Count(all, ", synctest bubble "+bubble+"\n"), all
}

// serveSessions serves on h what makes a handler's shared sessions run
// goroutines and hold copies: a session made on h and initialized, one
// made elsewhere (its record in store) adopted by a request, a client's
// answer, and a standalone stream, ended by a drain.
func serveSessions(t *testing.T, h *Handler, store sharedsession.Store) {
	t.Helper()
	alice := map[string]string{principalHeader: "alice"}
	r := postTo(t, h, legacyInit, alice)
	id := r.header.Get(mcpheader.SessionID)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
	}
	session := map[string]string{principalHeader: "alice", mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-06-18"}
	if r := postTo(t, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); r.status != http.StatusAccepted {
		t.Fatalf("initialized: status %d: %s", r.status, r.body)
	}
	const elsewhere = "made-on-another-replica"
	rec := sharedsession.Record{Principal: sharedsession.PrincipalHash("alice"), ProtocolVersion: "2025-06-18",
		Initialize: &sdk.InitializeParams{ProtocolVersion: "2025-06-18", Capabilities: &sdk.ClientCapabilities{}, ClientInfo: &sdk.Implementation{Name: "t", Version: "1"}}}
	if err := store.Put(t.Context(), sharedsession.Key(elsewhere), rec, time.Hour); err != nil {
		t.Fatal(err)
	}
	adopted := map[string]string{principalHeader: "alice", mcpheader.SessionID: elsewhere, mcpheader.ProtocolVersion: "2025-06-18"}
	if r := postTo(t, h, `{"jsonrpc":"2.0","id":2,"method":"ping"}`, adopted); r.status != http.StatusOK {
		t.Fatalf("a request of a session made elsewhere: status %d: %s", r.status, r.body)
	}
	if r := postTo(t, h, `{"jsonrpc":"2.0","id":"asked","result":{}}`, session); r.status != http.StatusAccepted {
		t.Fatalf("an answer: status %d: %s", r.status, r.body)
	}
	get := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/mcp", nil)
	for k, v := range session {
		get.Header.Set(k, v)
	}
	get.Header.Set("Accept", "text/event-stream")
	streamed := make(chan response)
	go func() { streamed <- serve(h, get) }()
	synctest.Wait() // the stream is open
	h.Drain()
	if r := <-streamed; r.status != http.StatusOK {
		t.Fatalf("the standalone stream: status %d: %s", r.status, r.body)
	}
}

// TestSharedHandlerCloseEndsCallsInFlight closes a handler while a call
// of a shared session waits for its client's answer, which never comes
// (the client went, and the server stopped serving): Close ends the call
// at once rather than wait for the tool's timeout, and leaves nothing.
func TestSharedHandlerCloseEndsCallsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		before, _ := bubbleGoroutines()
		h := endpoint{sets: []string{"core", "conformance"}, deps: Deps{
			SharedSessions: sharedsession.Backend{Store: sharedsession.NewMemoryStore(nil)},
		}}.handler(t)
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
		r := postTo(t, h, initialize, nil)
		id := r.header.Get(mcpheader.SessionID)
		if r.status != http.StatusOK || id == "" {
			t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
		}
		session := map[string]string{mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-11-25"}
		postTo(t, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
		ctx, leave := context.WithCancel(t.Context())
		call := newPost(t, "http://example.test/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}`, session).WithContext(ctx)
		served := make(chan struct{})
		go func() {
			defer close(served)
			serve(h, call)
		}()
		synctest.Wait() // the call waits for the client's answer
		leave()
		<-served
		start := time.Now()
		if err := h.Close(); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > 0 {
			t.Errorf("Close took %v: it waited for the call instead of ending it", took)
		}
		// The worker that ran the call is the server's, not the
		// handler's: it ends once idle (toolworkers.go).
		time.Sleep(toolWorkerIdle)
		synctest.Wait()
		if n, stacks := bubbleGoroutines(); n != before {
			t.Errorf("%d goroutines after Close, %d before the handler was made:\n%s", n, before, stacks)
		}
	})
}

// TestSharedSessionEndedWhileCalled deletes a session on one replica
// while a call of it waits, on another, for its client's answer: the
// other replica's copy is distrusted at once, and the bus goes on
// delivering (here, the DELETE that published on it returns) without
// waiting for that call to end.
func TestSharedSessionEndedWhileCalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := sharedsession.NewMemoryStore(nil)
		shared := sharedsession.Backend{Store: store, Log: sharedsession.NewMemoryLog(nil, 100), Bus: sharedsession.NewMemoryBus()}
		var hs []*Handler
		for range 2 {
			hs = append(hs, endpoint{sets: []string{"core", "conformance"}, deps: Deps{SharedSessions: shared}}.handler(t))
		}
		const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
		r := postTo(t, hs[0], initialize, nil)
		id := r.header.Get(mcpheader.SessionID)
		if r.status != http.StatusOK || id == "" {
			t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
		}
		session := map[string]string{mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-11-25"}
		postTo(t, hs[0], `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
		call := newPost(t, "http://example.test/mcp", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}`, session)
		called := make(chan response)
		go func() { called <- serve(hs[0], call) }()
		synctest.Wait() // the call waits for the client's answer
		start := time.Now()
		del := httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/mcp", nil)
		for k, v := range session {
			del.Header.Set(k, v)
		}
		if r := serve(hs[1], del); r.status != http.StatusNoContent {
			t.Fatalf("DELETE on replica 1: status %d: %s", r.status, r.body)
		}
		if took := time.Since(start); took > 0 {
			t.Errorf("the DELETE took %v: the bus waited for the call on replica 0", took)
		}
		if c := hs[0].shared.copies.lookup(id); c != nil && hs[0].shared.copies.trusts(c) {
			t.Error("replica 0 trusts its copy of the deleted session")
		}
		<-called
		time.Sleep(toolWorkerIdle) // the worker that ran the call ends
	})
}
