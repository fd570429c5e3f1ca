//lint:file-ignore SA1019 a legacy session keeps the log level a client of a revision before 2026-07-28 set, which that revision deprecates

package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// principalHeader names the caller in these tests: their PrincipalKey.
const principalHeader = "X-Test-Principal"

// replicas are handlers built on one catalog that share a session store,
// served behind one URL that sends each request to the next replica.
type replicas struct {
	hs      []*Handler
	next    atomic.Int64
	adopted atomic.Int64
	url     string
	// pin, when set, sends every request to that replica.
	pin atomic.Int64
	// route, when set, picks the replica of each request, pin or not.
	route func(*http.Request) int
}

func newReplicas(t *testing.T, n int, store sharedsession.Store, edit func(*Options)) *replicas {
	t.Helper()
	return newReplicasOn(t, n, sharedsession.Backend{Store: store, Log: sharedsession.NewMemoryLog(nil, 100), Bus: sharedsession.NewMemoryBus()}, edit)
}

// newReplicasOn is newReplicas sharing sessions through shared.
func newReplicasOn(t *testing.T, n int, shared sharedsession.Backend, edit func(*Options)) *replicas {
	t.Helper()
	rs := &replicas{}
	rs.pin.Store(-1)
	// The server first, so that its Close comes after the handlers':
	// closing a handler ends the calls in flight on it, for which the
	// server's Close would wait.
	ts := httptest.NewServer(rs)
	t.Cleanup(ts.Close)
	rs.url = ts.URL
	for range n {
		rs.hs = append(rs.hs, endpoint{sets: []string{"core", "conformance"}, edit: edit, deps: Deps{
			SharedSessions:   shared,
			OnSessionAdopted: func(context.Context) { rs.adopted.Add(1) },
			PrincipalKey:     func(r *http.Request) string { return r.Header.Get(principalHeader) },
		}}.handler(t))
	}
	return rs
}

// setClock sets the clock every replica trusts its copies by.
func (rs *replicas) setClock(now func() time.Time) {
	for _, h := range rs.hs {
		h.shared.copies.now = now
	}
}

func (rs *replicas) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	i := rs.pin.Load()
	if rs.route != nil {
		i = int64(rs.route(r))
	}
	if i < 0 {
		i = rs.next.Add(1) % int64(len(rs.hs))
	}
	rs.hs[i].ServeHTTP(w, r)
}

// headerTransport adds a principal to every request.
type headerTransport struct{ principal string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(principalHeader, h.principal)
	return http.DefaultTransport.RoundTrip(r)
}

// connectLegacy connects an SDK client of protocol 2025-11-25 to url as
// principal.
func connectLegacy(t *testing.T, url, principal string, logs func(*sdk.LoggingMessageRequest)) (*sdk.ClientSession, error) {
	t.Helper()
	var opts *sdk.ClientOptions
	if logs != nil {
		opts = &sdk.ClientOptions{LoggingMessageHandler: func(_ context.Context, r *sdk.LoggingMessageRequest) { logs(r) }}
	}
	ct := &sdk.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: headerTransport{principal}}, MaxRetries: -1}
	return sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, opts).
		Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
}

// TestSessionsAcrossReplicas is a legacy session whose requests alternate
// between two replicas. With a shared store every request succeeds; without
// one (each replica keeps its own sessions, as before the store) the
// replica that did not make the session answers 404.
func TestSessionsAcrossReplicas(t *testing.T) {
	tests := []struct {
		name    string
		store   sharedsession.Store
		wantErr string
	}{
		{name: "shared store", store: sharedsession.NewMemoryStore(nil)},
		{name: "no store", wantErr: "session not found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicas(t, 2, tt.store, nil)
			cs, err := connectLegacy(t, rs.url, "alice", nil)
			if err != nil {
				if tt.wantErr != "" && strings.Contains(err.Error(), tt.wantErr) {
					return
				}
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			ctx := t.Context()
			calls := []struct {
				name string
				call func() error
			}{
				{"tools/list", func() error { _, err := cs.ListTools(ctx, nil); return err }},
				{"tools/call", func() error {
					res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
					if err == nil && res.IsError {
						t.Errorf("echo: error result %v", res.Content)
					}
					return err
				}},
				{"prompts/list", func() error { _, err := cs.ListPrompts(ctx, nil); return err }},
				{"prompts/get", func() error {
					_, err := cs.GetPrompt(ctx, &sdk.GetPromptParams{Name: "test_simple_prompt"})
					return err
				}},
				{"resources/list", func() error { _, err := cs.ListResources(ctx, nil); return err }},
				{"resources/read", func() error {
					_, err := cs.ReadResource(ctx, &sdk.ReadResourceParams{URI: "test://static-text"})
					return err
				}},
				{"completion/complete", func() error {
					_, err := cs.Complete(ctx, &sdk.CompleteParams{
						Ref:      &sdk.CompleteReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
						Argument: sdk.CompleteParamsArgument{Name: "arg1", Value: "a"},
					})
					return err
				}},
				{"ping", func() error { return cs.Ping(ctx, nil) }},
				{"logging/setLevel", func() error { return cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}) }},
			}
			var failed error
			for i := range 20 {
				c := calls[i%len(calls)]
				if err := c.call(); err != nil {
					failed = err
					if tt.wantErr == "" {
						t.Errorf("request %d (%s): %v", i+1, c.name, err)
					}
				}
			}
			if tt.wantErr != "" {
				if failed == nil || !strings.Contains(failed.Error(), tt.wantErr) {
					t.Fatalf("without a store: error %v, want one with %q", failed, tt.wantErr)
				}
				return
			}
			if rs.adopted.Load() == 0 {
				t.Errorf("no replica adopted the session")
			}
		})
	}
}

// TestSharedSessionLogLevel sets a level on one replica after the other
// adopted the session: the other logs at the new level.
func TestSharedSessionLogLevel(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	logged := make(chan sdk.LoggingLevel, 100)
	rs.pin.Store(0)
	cs, err := connectLegacy(t, rs.url, "alice", func(r *sdk.LoggingMessageRequest) { logged <- r.Params.Level })
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ctx := t.Context()
	rs.pin.Store(1)
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("ping on replica 1: %v", err)
	}
	rs.pin.Store(0)
	if err := cs.SetLoggingLevel(ctx, &sdk.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatalf("setLevel on replica 0: %v", err)
	}
	rs.pin.Store(1)
	if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "test_tool_with_logging"}); err != nil {
		t.Fatalf("logging tool on replica 1: %v", err)
	}
	// The client handles notifications apart from responses.
	for i := range 3 {
		select {
		case level := <-logged:
			if level != "info" {
				t.Errorf("log message %d at level %q, want info", i+1, level)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d log messages arrived from replica 1, want 3", i)
		}
	}
	if n := rs.adopted.Load(); n != 1 {
		t.Errorf("adoptions = %d, want 1: the copy follows the level, it is not adopted again", n)
	}
}

// TestSharedSessionRefusals presents session ids a caller may not use;
// every replica refuses each of them the same way, the one that made the
// session too, though it trusts its copy: when the bus told it the
// session ended, or once the bus missed that and the copy's trust ended
// (a gap in what the bus heard, or a tenth of the idle timeout).
func TestSharedSessionRefusals(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	tick := func() time.Time { return time.Unix(0, clock.Load()) }
	store := sharedsession.NewMemoryStore(tick)
	const idle = time.Minute
	bus := &faultyBus{MemoryBus: sharedsession.NewMemoryBus()}
	rs := newReplicasOn(t, 2, sharedsession.Backend{Store: store, Log: sharedsession.NewMemoryLog(tick, 100), Bus: bus}, func(o *Options) { o.SessionIdleTimeout = idle })
	rs.setClock(tick)
	// deleteOn1 deletes session id on replica 1.
	deleteOn1 := func(t *testing.T, id string) {
		t.Helper()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodDelete, "/mcp", nil)
		req.Header.Set(mcpheader.SessionID, id)
		req.Header.Set(principalHeader, "alice")
		if r := serve(rs.hs[1], req); r.status != http.StatusNoContent {
			t.Fatalf("DELETE on replica 1: status %d: %s", r.status, r.body)
		}
	}

	// initialize makes a session of principal on replica 0.
	initialize := func(t *testing.T, principal string) string {
		t.Helper()
		rs.pin.Store(0)
		defer rs.pin.Store(-1)
		r := postTo(t, rs, legacyInit, map[string]string{principalHeader: principal})
		id := r.header.Get(mcpheader.SessionID)
		if r.status != http.StatusOK || id == "" {
			t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
		}
		return id
	}
	tests := []struct {
		name       string
		session    func(t *testing.T) string // the id presented, as alice
		wantStatus int
	}{
		{name: "random id", session: func(*testing.T) string { return "4Mx9mT2qQpL7vZ0aR8sN1cB6" }, wantStatus: http.StatusNotFound},
		{name: "another principal's", session: func(t *testing.T) string { return initialize(t, "mallory") }, wantStatus: http.StatusForbidden},
		{name: "tampered", session: func(t *testing.T) string {
			id := []byte(initialize(t, "alice"))
			id[len(id)/2] ^= 1 // one bit of a real id
			return string(id)
		}, wantStatus: http.StatusNotFound},
		{name: "deleted on the other replica", session: func(t *testing.T) string {
			id := initialize(t, "alice")
			deleteOn1(t, id)
			return id
		}, wantStatus: http.StatusNotFound},
		{name: "deleted while the bus was down, then a gap reported", session: func(t *testing.T) string {
			id := initialize(t, "alice")
			bus.mute.Store(true)
			deleteOn1(t, id)
			bus.mute.Store(false)
			bus.gap()
			return id
		}, wantStatus: http.StatusNotFound},
		{name: "deleted while the bus was down, a tenth of the idle timeout later", session: func(t *testing.T) string {
			id := initialize(t, "alice")
			bus.mute.Store(true)
			deleteOn1(t, id)
			bus.mute.Store(false)
			clock.Add(int64(idle / 10))
			return id
		}, wantStatus: http.StatusNotFound},
		{name: "idle past the timeout", session: func(t *testing.T) string {
			id := initialize(t, "alice")
			clock.Add(int64(idle + time.Second))
			return id
		}, wantStatus: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.session(t)
			for i, h := range rs.hs {
				// What a caller can do with a session: a request, an answer
				// to a server→client request, the stream, its replay, the
				// end.
				for _, k := range []struct{ what, method, body, lastEventID string }{
					{what: "request", method: http.MethodPost, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`},
					{what: "answer", method: http.MethodPost, body: `{"jsonrpc":"2.0","id":1,"result":{"action":"accept","content":{"username":"mallory"}}}`},
					{what: "stream", method: http.MethodGet},
					{what: "replay", method: http.MethodGet, lastEventID: "_-1"},
					{what: "delete", method: http.MethodDelete},
				} {
					var req *http.Request
					if k.method == http.MethodPost {
						req = newPost(t, "http://example.test/mcp", k.body, nil)
					} else {
						req = httptest.NewRequestWithContext(t.Context(), k.method, "/mcp", nil)
						req.Header.Set("Accept", "text/event-stream")
					}
					if k.lastEventID != "" {
						req.Header.Set("Last-Event-ID", k.lastEventID)
					}
					req.Header.Set(mcpheader.SessionID, id)
					req.Header.Set(mcpheader.ProtocolVersion, "2025-11-25")
					req.Header.Set(principalHeader, "alice")
					if r := serve(h, req); r.status != tt.wantStatus {
						t.Errorf("replica %d, %s: status %d, want %d: %s", i, k.what, r.status, tt.wantStatus, r.body)
					}
				}
			}
		})
	}
}

// A session store outage is logged once per storeFailureLogEvery, with
// the failures counted since the last line, not once per request.
func TestSessionStoreFailuresLoggedSparingly(t *testing.T) {
	s := &sharedSessions{}
	t0 := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name    string
		at      time.Duration
		wantN   int
		wantLog bool
	}{
		{name: "the first failure", at: 0, wantN: 1, wantLog: true},
		{name: "soon after", at: time.Second, wantN: 1, wantLog: false},
		{name: "still within", at: 29 * time.Second, wantN: 2, wantLog: false},
		{name: "once the interval passed", at: 30 * time.Second, wantN: 3, wantLog: true},
		{name: "the next one", at: 31 * time.Second, wantN: 1, wantLog: false},
	}
	for _, tt := range tests {
		n, log := s.storeFailed(t0.Add(tt.at))
		if n != tt.wantN || log != tt.wantLog {
			t.Errorf("%s: storeFailed = %d, %v; want %d, %v", tt.name, n, log, tt.wantN, tt.wantLog)
		}
	}
}

// faultyBus is a bus that can miss messages: while mute is set, what is
// published reaches no listener, and gap tells every listener it missed
// some, as a Redis subscription made again does.
type faultyBus struct {
	*sharedsession.MemoryBus
	mute atomic.Bool

	mu   sync.Mutex
	lost []func()
}

func (b *faultyBus) Publish(ctx context.Context, msg []byte) error {
	if b.mute.Load() {
		return nil
	}
	return b.MemoryBus.Publish(ctx, msg)
}

func (b *faultyBus) Subscribe(ctx context.Context, deliver func([]byte), lost func()) (sharedsession.Subscription, error) {
	b.mu.Lock()
	b.lost = append(b.lost, lost)
	b.mu.Unlock()
	return b.MemoryBus.Subscribe(ctx, deliver, lost)
}

func (b *faultyBus) gap() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, lost := range b.lost {
		lost()
	}
}

// countingStore counts the reads of its records.
type countingStore struct {
	sharedsession.Store
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string, ttl time.Duration) (sharedsession.Record, bool, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, key, ttl)
}

// TestSharedSessionTrustedCopies follows the reads of a session's record
// as its requests alternate between two replicas: a replica reads it to
// adopt the session, then trusts its copy until a tenth of the idle
// timeout has passed, the bus says the record changed, or the bus had a
// gap.
func TestSharedSessionTrustedCopies(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	tick := func() time.Time { return time.Unix(0, clock.Load()) }
	store := &countingStore{Store: sharedsession.NewMemoryStore(tick)}
	const idle = 10 * time.Minute
	bus := &faultyBus{MemoryBus: sharedsession.NewMemoryBus()}
	rs := newReplicasOn(t, 2, sharedsession.Backend{Store: store, Log: sharedsession.NewMemoryLog(tick, 100), Bus: bus}, func(o *Options) { o.SessionIdleTimeout = idle })
	rs.setClock(tick)

	r := postTo(t, rs.hs[0], legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
	}
	const (
		call     = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`
		setLevel = `{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"info"}}`
	)
	tests := []struct {
		name     string
		before   func() // what happens before the request
		replica  int
		body     string
		wantGets int64 // reads of the record the request costs
	}{
		{name: "initialized on the replica that made it", replica: 0, body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		{name: "a call there", replica: 0, body: call},
		{name: "the other replica adopts it", replica: 1, body: call, wantGets: 1},
		{name: "and trusts its copy", replica: 1, body: call},
		{name: "the first replica still trusts its own", replica: 0, body: call},
		{name: "a tenth of the idle timeout later", before: func() { clock.Add(int64(idle / 10)) }, replica: 0, body: call, wantGets: 1},
		{name: "trusted again after that read", replica: 0, body: call},
		{name: "the other replica reads it too", replica: 1, body: call, wantGets: 1},
		{name: "a level set on the first replica", replica: 0, body: setLevel, wantGets: 1},    // the level is kept in the record
		{name: "makes the other replica read the record", replica: 1, body: call, wantGets: 2}, // and its copy follows the level with a setLevel of its own
		{name: "and the first", replica: 0, body: call, wantGets: 1},
		{name: "a gap in the bus", before: bus.gap, replica: 1, body: call, wantGets: 1},
		{name: "on every replica", replica: 0, body: call, wantGets: 1},
		{name: "and then trusted again", replica: 0, body: call},
		{name: "bus messages lost, no gap yet: trusted for a tenth of the idle timeout", before: func() { bus.mute.Store(true) }, replica: 1, body: call},
	}
	for _, tt := range tests {
		if tt.before != nil {
			tt.before()
		}
		before := store.gets.Load()
		r := postTo(t, rs.hs[tt.replica], tt.body, map[string]string{principalHeader: "alice", mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-06-18"})
		if r.status != http.StatusOK && r.status != http.StatusAccepted {
			t.Fatalf("%s: status %d: %s", tt.name, r.status, r.body)
		}
		if got := store.gets.Load() - before; got != tt.wantGets {
			t.Errorf("%s: %d reads of the record, want %d", tt.name, got, tt.wantGets)
		}
	}
}

// TestSharedCopyForgottenAtItsEnd ends a replica's copy of a session each
// way a copy ends: the replica stops holding it (no goroutine per copy
// waits for that; the SDK tells the copy's event store), and a session
// that still exists is adopted again by its next request there.
func TestSharedCopyForgottenAtItsEnd(t *testing.T) {
	tests := []struct {
		name     string
		end      func(t *testing.T, rs *replicas, cs *sdk.ClientSession)
		wantLive bool // the session goes on
	}{
		{
			// As when a write to the client fails: the SDK closes the
			// session itself.
			name: "closed by the SDK",
			end: func(t *testing.T, rs *replicas, cs *sdk.ClientSession) {
				rs.hs[0].shared.copies.lookup(cs.ID()).ss.Close()
			},
			wantLive: true,
		},
		{
			name: "the bus says it ended",
			end: func(t *testing.T, rs *replicas, cs *sdk.ClientSession) {
				rs.pin.Store(1)
				if err := cs.Close(); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "DELETE on this replica",
			end: func(t *testing.T, rs *replicas, cs *sdk.ClientSession) {
				if err := cs.Close(); err != nil {
					t.Fatal(err)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
			rs.pin.Store(0)
			cs, err := connectLegacy(t, rs.url, "alice", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			id := cs.ID()
			if rs.hs[0].shared.copies.lookup(id) == nil {
				t.Fatal("replica 0 holds no copy of the session it made")
			}
			tt.end(t, rs, cs)
			waitFor(t, func() bool { return rs.hs[0].shared.copies.lookup(id) == nil })
			if !tt.wantLive {
				return
			}
			rs.pin.Store(0)
			if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "again"}}); err != nil {
				t.Fatalf("a call after the copy ended: %v", err)
			}
			if rs.hs[0].shared.copies.lookup(id) == nil {
				t.Error("replica 0 did not adopt the session again")
			}
		})
	}
}

// A shared session refuses an MCP-Protocol-Version the SDK does not know
// with 400, on every replica and for every method, as the SDK handler
// refuses it on a session that is not shared; an initialize too.
func TestSharedSessionUnknownVersionRefused(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	rs.pin.Store(-1)
	id := r.header.Get(mcpheader.SessionID)
	if r.status != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", r.status, id, r.body)
	}
	tests := []struct {
		name    string
		method  string
		body    string
		session bool // names the session
	}{
		{name: "initialize", method: http.MethodPost, body: legacyInit},
		{name: "request", method: http.MethodPost, body: `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, session: true},
		{name: "stream", method: http.MethodGet, session: true},
		{name: "delete", method: http.MethodDelete, session: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, h := range rs.hs {
				var req *http.Request
				if tt.method == http.MethodPost {
					req = newPost(t, "http://example.test/mcp", tt.body, nil)
				} else {
					// A stream served in spite of the version would be
					// open until the deadline.
					ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
					defer cancel()
					req = httptest.NewRequestWithContext(ctx, tt.method, "/mcp", nil)
					req.Header.Set("Accept", "text/event-stream")
				}
				if tt.session {
					req.Header.Set(mcpheader.SessionID, id)
				}
				req.Header.Set(mcpheader.ProtocolVersion, "2025-13-01")
				req.Header.Set(principalHeader, "alice")
				if r := serve(h, req); r.status != http.StatusBadRequest || !strings.Contains(r.body, "Unsupported protocol version") {
					t.Errorf("replica %d: status %d, want 400 for an unsupported version: %s", i, r.status, r.body)
				}
			}
		})
	}
}
