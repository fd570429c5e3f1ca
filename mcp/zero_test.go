package mcp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// TestZeroOptions serves with the zero Options, as a library caller who
// sets nothing would: an initialize request is answered, not refused as
// too large.
func TestZeroOptions(t *testing.T) {
	cat, err := toolsets.New(toolsets.Options{}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(New(cat, Options{}, Deps{}).Handler())
	t.Cleanup(ts.Close)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"protocolVersion"`) {
		t.Fatalf("initialize with zero Options: %d %s", resp.StatusCode, b)
	}
}
