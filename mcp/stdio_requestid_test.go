package mcp

import (
	"context"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestStdioPassesRequestIDs checks that middleware sees the id of every
// stdio request, numbers and strings, under RequestIDHeader, and no
// Content-Type (telemetry's sign that the request did not come over HTTP).
func TestStdioPassesRequestIDs(t *testing.T) {
	server := newStdioServer(t, nil)
	var mu sync.Mutex
	ids := map[string]string{} // method -> id seen
	server.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if extra := req.GetExtra(); extra != nil && extra.Header != nil {
				if extra.Header.Get("Content-Type") != "" {
					t.Errorf("%s: stdio request with a Content-Type", method)
				}
				mu.Lock()
				ids[method] = extra.Header.Get(RequestIDHeader)
				mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	input := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":"req-7","method":"tools/list"}
{"jsonrpc":"2.0","id":42,"method":"ping"}
`
	o := serveInput(t, server, input, 0)
	wantResult(t, o, `42`, `{}`)
	mu.Lock()
	defer mu.Unlock()
	for method, want := range map[string]string{"initialize": "1", "tools/list": "req-7", "ping": "42"} {
		if ids[method] != want {
			t.Errorf("%s: middleware saw request id %q, want %q", method, ids[method], want)
		}
	}
	if id, ok := ids["notifications/initialized"]; ok && id != "" {
		t.Errorf("a notification has the request id %q", id)
	}
}
