//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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
// client that lost the stream after it (here, once the call asked it for
// an elicitation) resumes it with Last-Event-ID on the other replica,
// from the priming event and from the request, and gets the response the
// call gave after the client went. On 2025-06-18 a JSON-RPC batch
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

	t.Run("2025-11-25 POST stream primed, lost and resumed on the other replica", func(t *testing.T) {
		// A session whose client answers elicitations, made on a.
		resp, body := postMCP(t, http.DefaultClient, a, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"portcullis-e2e","version":"0.0.1"}}}`, bearer(token))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize: status %d: %s", resp.StatusCode, body)
		}
		h := withHeaders(bearer(token), "MCP-Protocol-Version", "2025-11-25", "Mcp-Session-Id", resp.Header.Get("Mcp-Session-Id"))
		if resp, body := postMCP(t, http.DefaultClient, a, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, h); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notifications/initialized: status %d: %s", resp.StatusCode, body)
		}

		// The call is served by b, which adopts the session; it asks the
		// client, and the client loses the stream once it has the request.
		ctx, lose := context.WithCancel(t.Context())
		defer lose()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, b, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_elicitation","arguments":{"message":"who?"}}}`))
		req.Header = withHeaders(h, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
			b, _ := io.ReadAll(res.Body)
			t.Fatalf("tools/call: status %d, Content-Type %q, want 200 and an SSE stream: %s", res.StatusCode, res.Header.Get("Content-Type"), b)
		}
		evs := readSSEUntil(res.Body, func(e sseEvent) bool { return strings.Contains(e.data, "elicitation/create") })
		lose()
		res.Body.Close()
		if len(evs) != 2 || evs[0].id == "" || evs[0].data != "" || !strings.Contains(evs[1].data, "elicitation/create") {
			t.Fatalf("the call's stream began %+v, want a priming event (an id, empty data), then the elicitation request", evs)
		}
		prime, asked := evs[0], evs[1]
		var request struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal([]byte(asked.data), &request); err != nil {
			t.Fatal(err)
		}

		// resumed reads the call's stream on a with Last-Event-ID last: the
		// messages replayed after it.
		resumed := func(last string) []string {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a, nil)
			req.Header = withHeaders(h, "Accept", "text/event-stream", "Last-Event-ID", last)
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
				t.Fatalf("GET with Last-Event-ID %s: status %d, want 200: %s", last, res.StatusCode, replayed)
			}
			var got []string
			for _, e := range sseEvents(string(replayed)) {
				if e.data != "" {
					got = append(got, e.data)
				}
			}
			return got
		}
		// b noticed that the client went and wrote the stream to the log:
		// on a, it replays from the priming event.
		pollUntil(t, 10*time.Second, func() string {
			if got := resumed(prime.id); len(got) != 1 || !strings.Contains(got[0], "elicitation/create") {
				return fmt.Sprintf("resumed from the priming event: %q, want the elicitation request", got)
			}
			return ""
		})
		// The answer goes to a; the call on b completes, and its response
		// reaches the client resuming on a.
		if resp, body := postMCP(t, http.DefaultClient, a, `{"jsonrpc":"2.0","id":`+string(request.ID)+`,"result":{"action":"accept","content":{"username":"resumed-on-a"}}}`, h); resp.StatusCode != http.StatusAccepted {
			t.Fatalf("the answer: status %d: %s", resp.StatusCode, body)
		}
		var got []string
		pollUntil(t, 10*time.Second, func() string {
			if got = resumed(asked.id); len(got) == 0 {
				return "resumed after the request: no response yet"
			}
			return ""
		})
		if len(got) != 1 {
			t.Fatalf("resumed stream: %d messages, want the response only: %q", len(got), got)
		}
		checkToolText(t, rpcResult(t, rpcMessages(t, "application/json", []byte(got[0])), "2"), "resumed-on-a")
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

// readSSEUntil reads the events of a text/event-stream body as they come,
// until stop says so of one or the body ends, and returns them.
func readSSEUntil(body io.Reader, stop func(sseEvent) bool) []sseEvent {
	var evs []sseEvent
	var block strings.Builder
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if sc.Text() != "" {
			block.WriteString(sc.Text() + "\n")
			continue
		}
		for _, e := range sseEvents(block.String()) {
			evs = append(evs, e)
			if stop(e) {
				return evs
			}
		}
		block.Reset()
	}
	return evs
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
