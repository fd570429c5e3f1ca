package mcp

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

func TestOnlyResponse(t *testing.T) {
	meta := func(extra string) string {
		return `{"name":"echo","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"` + extra + `}}`
	}
	tests := []struct {
		name string
		msgs []envelope
		want bool
	}{
		{name: "a call", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(meta(""))}}, want: true},
		{name: "no params", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/list"}}, want: true},
		{name: "a progress token", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(meta(`,"progressToken":"p"`))}}},
		{name: "a null progress token", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(meta(`,"progressToken":null`))}}},
		{name: "a log level", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(meta(`,"io.modelcontextprotocol/logLevel":"debug"`))}}},
		// The SDK matches _meta keys exactly, so it sends no progress for
		// this request either.
		{name: "a progress token in another case", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(meta(`,"ProgressToken":"p"`))}}, want: true},
		{name: "subscriptions/listen", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "subscriptions/listen", Params: json.RawMessage(meta(""))}}},
		{name: "a notification", msgs: []envelope{{Method: "notifications/cancelled", Params: json.RawMessage(`{}`)}}},
		{name: "a response", msgs: []envelope{{ID: json.RawMessage(`1`), Result: json.RawMessage(`{}`)}}},
		{name: "a batch", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "ping"}, {ID: json.RawMessage(`2`), Method: "ping"}}},
		{name: "params not an object", msgs: []envelope{{ID: json.RawMessage(`1`), Method: "tools/call", Params: json.RawMessage(`[1]`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := onlyResponse(tt.msgs); got != tt.want {
				t.Errorf("onlyResponse = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIsStatelessEra(t *testing.T) {
	meta := func(v string) envelope {
		return envelope{Method: "tools/list", Params: json.RawMessage(`{"_meta":{"io.modelcontextprotocol/protocolVersion":` + v + `}}`)}
	}
	tests := []struct {
		name   string
		header string
		msgs   []envelope
		want   bool
	}{
		{name: "header of the stateless era", header: "2026-07-28", want: true},
		{name: "header of a later revision", header: "2027-01-01", want: true},
		{name: "legacy header", header: "2025-11-25"},
		{name: "the header wins over _meta", header: "2025-11-25", msgs: []envelope{meta(`"2026-07-28"`)}},
		{name: "no header, _meta of the stateless era", msgs: []envelope{meta(`"2026-07-28"`)}, want: true},
		{name: "no header, legacy _meta", msgs: []envelope{meta(`"2025-06-18"`)}},
		{name: "no header, _meta version not a string", msgs: []envelope{meta(`20260728`)}},
		{name: "no header, one message of a batch in _meta", msgs: []envelope{{Method: "ping"}, meta(`"2026-07-28"`)}, want: true},
		{name: "nothing", msgs: []envelope{{Method: "ping"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.header != "" {
				h.Set(mcpheader.ProtocolVersion, tt.header)
			}
			if got := isStatelessEra(h, tt.msgs); got != tt.want {
				t.Errorf("isStatelessEra = %v, want %v", got, tt.want)
			}
		})
	}
}
