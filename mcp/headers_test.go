package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/portcullis-mcp/portcullis/internal/toolsets"
)

// TestRequestIDHeader checks that the SDK's middleware sees the JSON-RPC id
// of a single request in RequestIDHeader, and never a value the client set.
func TestRequestIDHeader(t *testing.T) {
	cat, err := toolsets.New(toolsets.Options{Toolsets: []string{"core"}}, toolsets.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 1)
	record := func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method == "tools/call" {
				seen <- req.GetExtra().Header.Get(RequestIDHeader)
			}
			return next(ctx, method, req)
		}
	}
	ts := httptest.NewServer(New(cat, Options{}, Deps{Version: "test", Middleware: []sdk.Middleware{record}}).Handler())
	defer ts.Close()

	for _, tt := range []struct{ id, want string }{
		{`7`, "7"},
		{`"abc-1"`, "abc-1"},
		{`"line\nbreak"`, `"line\nbreak"`},
	} {
		body := `{"jsonrpc":"2.0","id":` + tt.id + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
		r := post(t, ts.URL, body, map[string]string{RequestIDHeader: "spoofed"})
		if r.status != http.StatusOK {
			t.Fatalf("id %s: status %d %s", tt.id, r.status, r.body)
		}
		if got := <-seen; got != tt.want {
			t.Errorf("id %s: middleware saw %q, want %q", tt.id, got, tt.want)
		}
	}
}
