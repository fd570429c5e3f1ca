//go:build e2e

package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestSharedSessionProtocolVersion: two replicas sharing Redis serve a
// legacy session's POSTs with the version it negotiated, as a replica
// without a shared session store does (the SDK patch
// transport-protocol-version-header). On 2025-11-25, a tools/call
// answered as SSE starts with a priming event (an id, empty data): a
// client that lost the stream after it resumes it with Last-Event-ID on
// the other replica and gets the response. On 2025-06-18 a JSON-RPC batch
// is refused with 400 on a shared session as on one that is not shared;
// on 2025-03-26, which allows batches, it is served. A version the SDK
// does not know is refused with 400 on both, not trusted.
//
// It runs the shipped build (shippedBinary): the binary built as `go
// install` builds it lacks the patch and serves those POSTs as 2025-03-26.
func TestSharedSessionProtocolVersion(t *testing.T) {
	bin := shippedBinary(t)
	idp := startIdP(t)
	rdb := redistest.Start(t)
	const resource = "https://portcullis.example.test/mcp"
	cfg := taskReplicaConfigWith(t, idp, resource, map[string]any{"url": "redis://" + rdb.Addr + "/0"}, map[string]any{
		"server": map[string]any{"drain_delay": "0s"},
	})
	rs := startReplicaSetOf(t, bin, cfg, 2)
	a, b := rs.procs[0].MCPURL(), rs.procs[1].MCPURL()
	alone := runBinary(t, bin, []string{noDrainDelay}, "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--config", writeConfigFile(t, map[string]any{
		"auth": map[string]any{
			"resource":         resource,
			"issuers":          []map[string]any{{"issuer": idp.Issuer()}},
			"scopes_supported": []string{"mcp:tools"},
			"required_scopes":  []string{"mcp:tools"},
		},
		"tools": map[string]any{"toolsets": []string{"core"}},
	})).MCPURL()
	token := idp.ClientCredentialsToken(t, idpClient, idpClientSecret, resource, "mcp:tools")

	t.Run("2025-11-25 POST stream primed and resumed on the other replica", func(t *testing.T) {
		h := legacySession(t, a, token, "2025-11-25")
		// The call is served by b, which adopts the session. The whole
		// stream is read, so that the response is known to be in the
		// session's log, but only its first event is kept: the client
		// lost the stream after it.
		const call = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"primed"}}}`
		resp, body := postMCP(t, http.DefaultClient, b, call, h)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			t.Fatalf("tools/call: status %d, Content-Type %q, want 200 and an SSE stream: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		evs := sseEvents(string(body))
		if len(evs) < 2 {
			t.Fatalf("tools/call stream: %d events, want a priming event and the response:\n%s", len(evs), body)
		}
		prime := evs[0]
		if prime.id == "" || prime.data != "" {
			t.Fatalf("first event of the stream %+v, want a priming event (an id, empty data):\n%s", prime, body)
		}

		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a, nil)
		req.Header = withHeaders(h, "Accept", "text/event-stream", "Last-Event-ID", prime.id)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		replayed, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET with Last-Event-ID %s: status %d, want 200: %s", prime.id, res.StatusCode, replayed)
		}
		var got []string
		for _, e := range sseEvents(string(replayed)) {
			if e.data != "" {
				got = append(got, e.data)
			}
		}
		if len(got) != 1 {
			t.Fatalf("resumed stream: %d messages, want the response only:\n%s", len(got), replayed)
		}
		checkToolText(t, rpcResult(t, rpcMessages(t, "application/json", []byte(got[0])), "2"), "primed")
	})

	const batch = `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":3,"method":"ping"}]`
	for _, tc := range []struct {
		name       string
		version    string
		header     string // MCP-Protocol-Version of the batch; empty: version
		wantStatus int
	}{
		{name: "2025-06-18 batch refused", version: "2025-06-18", wantStatus: http.StatusBadRequest},
		{name: "2025-11-25 batch refused", version: "2025-11-25", wantStatus: http.StatusBadRequest},
		{name: "2025-03-26 batch served", version: "2025-03-26", wantStatus: http.StatusOK},
		{name: "batch of an unknown version refused", version: "2025-03-26", header: "2025-13-01", wantStatus: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The session that is not shared first: the shared one must
			// answer as it does.
			h := legacySession(t, alone, token, tc.version)
			if tc.header != "" {
				h.Set("MCP-Protocol-Version", tc.header)
			}
			resp, body := postMCP(t, http.DefaultClient, alone, batch, h)
			if resp.StatusCode != tc.wantStatus {
				t.Fatalf("batch on a session that is not shared: status %d, want %d: %s", resp.StatusCode, tc.wantStatus, body)
			}
			h = legacySession(t, a, token, tc.version)
			if tc.header != "" {
				h.Set("MCP-Protocol-Version", tc.header)
			}
			for _, replica := range []string{a, b} {
				resp, body := postMCP(t, http.DefaultClient, replica, batch, h)
				if resp.StatusCode != tc.wantStatus {
					t.Errorf("batch on a shared session at %s: status %d, want %d: %s", replica, resp.StatusCode, tc.wantStatus, body)
				}
			}
		})
	}
}

// sseEvent is one event of a text/event-stream body.
type sseEvent struct{ id, data string }

// sseEvents splits a text/event-stream body into its events, comments
// left out.
func sseEvents(body string) []sseEvent {
	var evs []sseEvent
	for block := range strings.SplitSeq(strings.ReplaceAll(body, "\r\n", "\n"), "\n\n") {
		var e sseEvent
		event := false
		for line := range strings.SplitSeq(block, "\n") {
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "id":
				e.id, event = value, true
			case "data":
				if e.data != "" {
					e.data += "\n"
				}
				e.data += value
				event = true
			case "event", "retry":
				event = true
			}
		}
		if event {
			evs = append(evs, e)
		}
	}
	return evs
}
