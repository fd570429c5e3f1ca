package mcp

import (
	"net/http"
	"testing"
)

// BenchmarkRoute measures what the router reads from a POST before the SDK
// reads it: decoding the envelope, the protocol era, the per-tool policy
// input and the request id, for a 2026-07-28 tools/call with its headers
// and for a legacy one without.
func BenchmarkRoute(b *testing.B) {
	modern := http.Header{"Mcp-Protocol-Version": {modernHdr}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}}
	legacy := http.Header{"Mcp-Protocol-Version": {"2025-11-25"}}
	for _, tt := range []struct {
		name   string
		body   []byte
		header http.Header
	}{
		{name: "2026-07-28", body: []byte(modernCall("echo", `{"text":"hello"}`)), header: modern},
		{name: "2025-11-25", body: []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`), header: legacy},
	} {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				msgs, perr := parseMessages(tt.body)
				if perr != nil || isStatelessEra(tt.header, msgs) != (tt.name == "2026-07-28") {
					b.Fatal(perr)
				}
				if headerToolName(tt.header) == "" || len(msgs) != 1 {
					var p struct {
						Name string `json:"name"`
					}
					if decode(msgs[0].Params, &p) != nil || p.Name != "echo" {
						b.Fatal(p.Name)
					}
				}
				_ = idText(msgs[0].ID)
			}
		})
	}
}
