package mcp

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// codeRecorder is a response writer that notes the JSON-RPC error code the
// handler reports, as observability.Refusals does.
type codeRecorder struct {
	*httptest.ResponseRecorder
	code int
}

func (r *codeRecorder) RecordJSONRPCError(code int) { r.code = code }

// TestRefusalsAreReported checks that every JSON-RPC error the handler
// writes itself, before the SDK, is reported to the response writer, and
// that a request the SDK serves is not.
func TestRefusalsAreReported(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "t", Version: "v0"}, nil)
	h := handlerFor(server, Options{MaxBodyBytes: 256})
	tests := []struct {
		name string
		body string
		want int // 0: not a refusal
	}{
		{"parse error", `{"jsonrpc":`, -32700},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, -32600},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"no/such"}`, -32601},
		{"body over the limit", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("x", 300) + `"}}`, -32600},
		{"served by the SDK", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			w := &codeRecorder{ResponseRecorder: httptest.NewRecorder()}
			h.ServeHTTP(w, req)
			if w.code != tt.want {
				t.Errorf("reported code %d, want %d (status %d: %s)", w.code, tt.want, w.Code, w.Body)
			}
		})
	}
}
