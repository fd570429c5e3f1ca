package mcp

import (
	"context"
	"io"
	"net/http"
	"testing"
)

func TestDrainEndsStreams(t *testing.T) {
	ts, h := newTestEndpoint(t, nil)
	init := post(t, ts.URL, legacyInit, nil)
	sid := init.header.Get("Mcp-Session-Id")
	post(t, ts.URL, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, map[string]string{"Mcp-Session-Id": sid})

	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, ts.URL, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream status %d", resp.StatusCode)
	}
	h.Drain()
	// The stream must end: ReadAll returns once the server closes it.
	if _, err := io.ReadAll(resp.Body); err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		t.Logf("stream ended with %v", err)
	}
	r := do(t, req.Clone(context.Background()))
	if r.status != http.StatusServiceUnavailable {
		t.Fatalf("GET while draining: status %d, want 503", r.status)
	}
}
