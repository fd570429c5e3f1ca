//lint:file-ignore SA1019 a legacy session's client answers sampling requests, which the 2026-07-28 revision deprecates

package mcp

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
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
	rs := newReplicas(t, 2, NewMemorySessionStore(nil), nil)
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
	rs := newReplicas(t, 2, NewMemorySessionStore(nil), nil)
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
	h.shared.mu.Lock()
	defer h.shared.mu.Unlock()
	return len(h.shared.watches[SessionKey(id)]) > 0
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
	rs := newReplicas(t, 2, NewMemorySessionStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	if id == "" {
		t.Fatalf("initialize: %d %s", r.status, r.body)
	}
	ev := rs.hs[0].shared.sdkStore
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
	rs := newReplicas(t, 2, NewMemorySessionStore(nil), nil)
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
	copyOn := func(i int) *localSession { return rs.hs[i].shared.lookup(cs.ID()) }
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
	if err := rs.hs[1].shared.server.ResourceUpdated(t.Context(), &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
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
	rs := newReplicas(t, 2, NewMemorySessionStore(nil), nil)
	rs.pin.Store(0)
	r := postTo(t, rs, legacyInit, map[string]string{principalHeader: "alice"})
	id := r.header.Get(mcpheader.SessionID)
	for i := range 150 { // the log keeps 100
		if err := rs.hs[0].shared.sdkStore.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":`+strconv.Itoa(i)+`}}`)); err != nil {
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
	if err := rs.hs[0].shared.sdkStore.Append(t.Context(), id, "", []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"next"}}`)); err != nil {
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
