//go:build e2e

//lint:file-ignore SA1019 a legacy session's client answers sampling requests, which the 2026-07-28 revision deprecates

package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestSessionStreamsAcrossReplicas: three replicas of the binary sharing
// Redis behind HAProxy (round robin, no affinity) and a go-sdk client of
// 2025-11-25 holding its GET stream. Whichever replica each request, the
// stream and the client's answers reach: an elicitation and a sampling
// request complete their calls, a list change and a subscribed resource's
// update reach the client, and Last-Event-ID replays the stream's events on
// any replica, to the session's principal only.
func TestSessionStreamsAcrossReplicas(t *testing.T) {
	idp := startIdP(t)
	rdb := redistest.Start(t)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{"url": "redis://" + rdb.Addr + "/0"}, map[string]any{
		"server": map[string]any{"drain_delay": "0s"},
		"limits": map[string]any{"rate_per_principal": 100000, "burst_per_principal": 100000},
	})
	rs := startReplicaSet(t, cfg, 3)
	lb := startHAProxy(t, rs.addrs)
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")
	endpoint := lb.URL + "/mcp"

	changed := make(chan struct{}, 100)
	updated := make(chan string, 100)
	c := sdk.NewClient(&sdk.Implementation{Name: "portcullis-e2e", Version: "0.0.1"}, &sdk.ClientOptions{
		ElicitationHandler: func(context.Context, *sdk.ElicitRequest) (*sdk.ElicitResult, error) {
			return &sdk.ElicitResult{Action: "accept", Content: map[string]any{"username": "answered-elsewhere"}}, nil
		},
		CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Model: "m", Role: "assistant", Content: &sdk.TextContent{Text: "sampled-elsewhere"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
		ResourceUpdatedHandler: func(_ context.Context, r *sdk.ResourceUpdatedNotificationRequest) { updated <- r.Params.URI },
	})
	tr := &sdk.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}
	cs, err := c.Connect(t.Context(), tr, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	// Server→client requests: each call and its answer take two requests
	// through round robin, so over several calls answers land on other
	// replicas than their calls.
	for i := range 6 {
		for _, tc := range []struct{ tool, arg, want string }{
			{"test_elicitation", "message", "answered-elsewhere"},
			{"test_sampling", "prompt", "sampled-elsewhere"},
		} {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: tc.tool, Arguments: map[string]any{tc.arg: "x"}})
			cancel()
			if err != nil {
				t.Fatalf("%s #%d: %v", tc.tool, i, err)
			}
			if got := res.Content[0].(*sdk.TextContent).Text; !strings.Contains(got, tc.want) {
				t.Errorf("%s #%d: result %q, want the client's answer %q", tc.tool, i, got, tc.want)
			}
		}
	}
	if forwarded := rs.total("portcullis_mcp_session_answers_forwarded_total"); forwarded < 12 {
		t.Errorf("answers forwarded = %v, want 12", forwarded)
	}

	// A list change made on whichever replica the call reaches.
	for i := range 3 {
		if _, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "test_trigger_tool_change"}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-changed:
		case <-time.After(15 * time.Second):
			t.Fatalf("list change %d did not reach the client's stream", i)
		}
	}

	// A resource subscribed through one replica; every replica reports it
	// updated every 3 s.
	const uri = "test://watched-resource"
	if err := cs.Subscribe(t.Context(), &sdk.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-updated:
		if got != uri {
			t.Errorf("update of %q, want %q", got, uri)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no update of the subscribed resource reached the client")
	}

	// Last-Event-ID from the start of the standalone stream, three times:
	// round robin takes it to each replica, and each replays the same
	// events. Another principal is refused.
	var first []sseEvent
	for i := range 3 {
		evs := replay(t, endpoint, token, cs.ID(), "_-1", http.StatusOK)
		if len(evs) < 3 {
			t.Fatalf("replay %d: %d events, want at least the 3 list changes", i, len(evs))
		}
		if i == 0 {
			first = evs
			continue
		}
		if !slices.Equal(evs[:len(first)], first) {
			t.Errorf("replay %d differs from the first:\n%q\n%q", i, evs, first)
		}
	}
	other := idp.ClientCredentialsToken(t, idpLimitedClient, idpLimitedClientSecret, resource, idpLimitedScope)
	for range 3 {
		replay(t, endpoint, other, cs.ID(), "_-1", http.StatusForbidden)
	}
	if replayed := rs.total("portcullis_mcp_session_events_replayed_total"); replayed < 9 {
		t.Errorf("events replayed = %v, want at least 9", replayed)
	}
}

// replay opens the standalone stream of session id with Last-Event-ID
// lastEventID as token's caller, checks the status, and returns the
// events with data it replays (those that arrive within a second).
func replay(t *testing.T, endpoint, token, id, lastEventID string, wantStatus int) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", id)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	req.Header.Set("Last-Event-ID", lastEventID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != wantStatus {
		t.Fatalf("GET with Last-Event-ID %s: status %d, want %d", lastEventID, resp.StatusCode, wantStatus)
	}
	// The body until the second is up: its events but a last one cut short.
	body, _ := io.ReadAll(resp.Body)
	body = body[:bytes.LastIndex(body, []byte("\n\n"))+1]
	var out []sseEvent
	for _, ev := range sseEvents(string(body)) {
		if ev.data != "" {
			out = append(out, ev)
		}
	}
	return out
}
