//lint:file-ignore SA1019 a legacy session's client answers sampling requests, which the 2026-07-28 revision deprecates

package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// byMethod routes a request to replica 1 when it is a GET or carries
// answers only (a POST whose body names no method), else to replica 0: a
// call runs on one replica, the client's stream and answers land on the
// other.
func byMethod(r *http.Request) int {
	if r.Method == http.MethodGet {
		return 1
	}
	if r.Method != http.MethodPost {
		return 0
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !bytes.Contains(body, []byte(`"method"`)) {
		return 1
	}
	return 0
}

// TestSharedSessionServerRequests: a call on replica 0 asks the client
// (elicitation, sampling); the client's answer lands on replica 1, and the
// call completes with it.
func TestSharedSessionServerRequests(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.route = byMethod
	ct := &sdk.StreamableClientTransport{Endpoint: rs.url, HTTPClient: &http.Client{Transport: headerTransport{"alice"}}, MaxRetries: -1}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "alice-from-replica-1"}}, nil
		},
		CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdk.TextContent{Text: "sampled-on-replica-1"}}, nil
		},
	})
	cs, err := c.Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tests := []struct {
		name, tool string
		args       map[string]any
		want       string
	}{
		{name: "elicitation", tool: "test_elicitation", args: map[string]any{"message": "who?"}, want: "alice-from-replica-1"},
		{name: "sampling", tool: "test_sampling", args: map[string]any{"prompt": "hi"}, want: "sampled-on-replica-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if got := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(got, tt.want) {
				t.Errorf("result %q, want it to hold the answer %q", got, tt.want)
			}
		})
	}
}

// TestSharedSessionListChanged: the client's stream is on replica 1, the
// tool list changes on replica 0; the notification reaches the client.
func TestSharedSessionListChanged(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.route = byMethod
	changed := make(chan struct{}, 10)
	ct := &sdk.StreamableClientTransport{Endpoint: rs.url, HTTPClient: &http.Client{Transport: headerTransport{"alice"}}, MaxRetries: -1}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// The GET stream is open once replica 1 watches the session.
	waitFor(t, func() bool { return watching(rs.hs[1], cs.ID()) })
	if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("tools/list_changed from replica 0 did not reach the stream on replica 1")
	}
}

// watching reports whether h has a standalone stream of session id open.
func watching(h *Handler, id string) bool {
	h.shared.bus.mu.Lock()
	defer h.shared.bus.mu.Unlock()
	return len(h.shared.bus.watches[sharedsession.Key(id)]) > 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSharedStreamResumption: events appended to a session's standalone
// stream while its client was away are replayed on another replica from
// the Last-Event-ID the client names, and only to the session's principal.
func TestSharedStreamResumption(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	if id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	ev := rs.hs[0].shared.events
	for _, m := range []string{"a", "b", "c"} {
		if err := ev.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+m+`"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, principal, lastEventID string
		wantStatus                   int
		want                         []string // the data of the events replayed, in order
	}{
		{name: "after the first", principal: "alice", lastEventID: "_0", wantStatus: http.StatusOK, want: []string{`"b"`, `"c"`}},
		{name: "after none", principal: "alice", lastEventID: "", wantStatus: http.StatusOK},
		{name: "another principal", principal: "mallory", lastEventID: "_0", wantStatus: http.StatusForbidden},
		{name: "malformed", principal: "alice", lastEventID: "x_y_z", wantStatus: http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rs.url, nil)
			rs.pin.Store(1)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set(mcpheader.SessionID, id)
			req.Header.Set(principalHeader, tt.principal)
			if tt.lastEventID != "" {
				req.Header.Set("Last-Event-ID", tt.lastEventID)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, b)
			}
			if resp.StatusCode != http.StatusOK {
				return
			}
			sc := bufio.NewScanner(resp.Body)
			var got []string
			for len(got) < len(tt.want) && sc.Scan() {
				if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
					got = append(got, d)
				}
			}
			for i, w := range tt.want {
				if i >= len(got) || !strings.Contains(got[i], w) {
					t.Errorf("event %d: %q, want one holding %s (all: %q)", i, got, w, got)
				}
			}
		})
	}
}

// TestSharedSessionSubscriptions: the client subscribes through replica 0
// and holds its stream on replica 1; replica 1's copy follows the
// subscription, so that an update replica 1 observes reaches the client
// after replica 0's copy is gone.
func TestSharedSessionSubscriptions(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.route = byMethod
	const uri = "test://static-text"
	updated := make(chan string, 10)
	ct := &sdk.StreamableClientTransport{Endpoint: rs.url, HTTPClient: &http.Client{Transport: headerTransport{"alice"}}, MaxRetries: -1}
	c := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, &sdk.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	cs, err := c.Connect(t.Context(), ct, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	waitFor(t, func() bool { return watching(rs.hs[1], cs.ID()) })
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	copyOn := func(i int) *sessionCopy { return rs.hs[i].shared.copies.lookup(cs.ID()) }
	waitFor(t, func() bool {
		ls := copyOn(1)
		if ls == nil {
			return false
		}
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return ls.subscribed[uri]
	})
	copyOn(0).ss.Close()
	if err := rs.hs[1].shared.copies.server.ResourceUpdated(t.Context(), &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("update of %q, want %q", got, uri)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the update replica 1 observed did not reach the client")
	}
}

// TestSharedStreamResumedPastTheLog: a client that resumes from an event
// the log no longer keeps gets the stream from the newest event on, not an
// error that would end its session.
func TestSharedStreamResumedPastTheLog(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	for i := range 150 { // the log keeps 100
		if err := rs.hs[0].shared.events.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":`+strconv.Itoa(i)+`}}`)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rs.url, nil)
	rs.pin.Store(1)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcpheader.SessionID, id)
	req.Header.Set(principalHeader, "alice")
	req.Header.Set("Last-Event-ID", "_3")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, want 200: %s", resp.StatusCode, b)
	}
	if err := rs.hs[0].shared.events.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"next"}}`)); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "" {
			continue
		}
		if !strings.Contains(d, `"next"`) {
			t.Fatalf("first event %s, want the one appended after the client resumed", d)
		}
		return
	}
	t.Fatal("the stream ended without the next event")
}

// sseEvent is an event of an SSE stream: its id and data.
type sseEvent struct{ id, data string }

// readEvents reads the events of an SSE stream until stop says so of one
// or the stream ends, and returns them.
func readEvents(body io.Reader, stop func(sseEvent) bool) []sseEvent {
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev != (sseEvent{}) {
				out = append(out, ev)
				if stop(ev) {
					return out
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			ev.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

// TestSharedRequestStreamLost: a request's stream costs the shared log
// nothing when its client gets it whole, and when the client loses it
// mid-call the replica serving the call writes it there, so that the
// client resumes it on another replica. The call asks the client
// (elicitation); the client loses the stream after the request, answers
// through replica 1, and resumes the stream there from the request's
// event: the call's response, produced on replica 0 after the client
// went, reaches it.
func TestSharedRequestStreamLost(t *testing.T) {
	log := &countingLog{Log: sharedsession.NewMemoryLog(nil, 100)}
	rs := newReplicasOn(t, 2, sharedsession.Backend{Store: sharedsession.NewMemoryStore(nil), Log: log, Bus: sharedsession.NewMemoryBus()}, nil)
	rs.pin.Store(0)
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"t","version":"1"}}}`
	r := postTo(t, rs, initialize, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	if id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	session := map[string]string{principalHeader: "alice", mcpheader.SessionID: id, mcpheader.ProtocolVersion: "2025-11-25"}
	if r := postTo(t, rs, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); r.status != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", r.status, r.body)
	}
	if r := postTo(t, rs, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"whole"}}}`, session); r.status != http.StatusOK || !strings.Contains(r.body, "whole") {
		t.Fatalf("tools/call: %d %s", r.status, r.body)
	}
	if n := log.appends.Load(); n != 0 {
		t.Errorf("%d Appends to the log for an initialize and a call whose client got them whole, want 0", n)
	}

	// The call, read until it asks the client, then lost.
	ctx, lose := context.WithCancel(t.Context())
	resp, err := http.DefaultClient.Do(newPost(t, rs.url, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}`, session).WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	evs := readEvents(resp.Body, func(e sseEvent) bool { return strings.Contains(e.data, "elicitation/create") })
	lose()
	resp.Body.Close()
	// The stream opens with a priming event where the SDK writes one (the
	// shipped build's), then the request.
	if len(evs) == 0 || !strings.Contains(evs[len(evs)-1].data, "elicitation/create") {
		t.Fatalf("the call's stream %+v, want the elicitation request", evs)
	}
	asked := evs[len(evs)-1]
	var req struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal([]byte(asked.data), &req); err != nil {
		t.Fatal(err)
	}
	stream, n, ok := parseEventID(asked.id)
	if !ok {
		t.Fatalf("event id %q", asked.id)
	}
	// Replica 0 notices the client went, and writes what the stream
	// carried to the log.
	waitFor(t, func() bool {
		last, err := log.Last(t.Context(), sharedsession.Key(id), stream)
		return err == nil && last >= n
	})

	// resume resumes the stream on replica 1 after the event last and
	// returns what it carried.
	rs.pin.Store(1)
	resume := func(last string) []sseEvent {
		t.Helper()
		get, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, rs.url, nil)
		for k, v := range session {
			get.Header.Set(k, v)
		}
		get.Header.Set("Accept", "text/event-stream")
		get.Header.Set("Last-Event-ID", last)
		resp, err := http.DefaultClient.Do(get)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("resuming after %s: %d %s", last, resp.StatusCode, b)
		}
		return readEvents(resp.Body, func(sseEvent) bool { return false })
	}
	// Before the call answered, nothing is replayed after the request:
	// the stream ends naming the request's event again, from which the
	// client resumes next (not a stream naming none, which the TypeScript
	// SDK would take for a second standalone stream).
	if got := resume(asked.id); len(got) != 1 || got[0] != (sseEvent{id: asked.id}) {
		t.Errorf("resumed before the response: %+v, want one event naming %s, without data", got, asked.id)
	}
	if r := postTo(t, rs, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":{"action":"accept","content":{"username":"resumed-elsewhere"}}}`, session); r.status != http.StatusAccepted {
		t.Fatalf("the answer: %d %s", r.status, r.body)
	}
	// The client resumes the stream on replica 1 after the request, until
	// it carries the response.
	waitFor(t, func() bool {
		return slices.ContainsFunc(resume(asked.id), func(e sseEvent) bool { return strings.Contains(e.data, "resumed-elsewhere") })
	})
}

// TestSharedStreamFollowsSubscriptionsWithoutRepeating: a standalone
// stream that follows a change of the session's subscriptions goes on
// from the event it last wrote: it writes no event twice, and skips none.
func TestSharedStreamFollowsSubscriptionsWithoutRepeating(t *testing.T) {
	rs := newReplicas(t, 2, sharedsession.NewMemoryStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	if id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, rs.url, nil)
	rs.pin.Store(1)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(mcpheader.SessionID, id)
	req.Header.Set(principalHeader, "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	waitFor(t, func() bool { return watching(rs.hs[1], id) })
	events := rs.hs[0].shared.events
	notify := func(data string) {
		t.Helper()
		if err := events.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`+data+`"}}`)); err != nil {
			t.Fatal(err)
		}
	}
	evs := make(chan sseEvent, 10)
	go func() {
		defer close(evs)
		readEvents(resp.Body, func(e sseEvent) bool {
			if e.data != "" {
				evs <- e
			}
			return strings.Contains(e.data, `"c"`)
		})
	}()
	notify("a")
	if e := <-evs; !strings.Contains(e.data, `"a"`) || e.id != "_0" {
		t.Fatalf("first event %+v, want a, _0", e)
	}
	// The subscriptions changed (on whichever replica): the stream's copy
	// follows them.
	if err := rs.hs[0].shared.bus.publish(t.Context(), busMessage{Kind: busSubscriptions, Key: sharedsession.Key(id)}); err != nil {
		t.Fatal(err)
	}
	notify("b")
	notify("c")
	var got []sseEvent
	for e := range evs {
		got = append(got, e)
	}
	want := []struct{ id, data string }{{"_1", `"b"`}, {"_2", `"c"`}}
	if len(got) != len(want) {
		t.Fatalf("events after the first: %+v, want b (_1) and c (_2)", got)
	}
	for i, w := range want {
		if got[i].id != w.id || !strings.Contains(got[i].data, w.data) {
			t.Errorf("event %d: %+v, want %s with id %s", i+2, got[i], w.data, w.id)
		}
	}
}
