package mcp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/portcullis-mcp/portcullis/internal/curation"
)

// BenchmarkCuratedCall measures a 2026-07-28 tools/call on a server with
// a view (curate.go) against the same call on a server without one, the
// root (issue 34's goal: a call on a virtual server within 5 % of the
// CPU per call of the same call on /mcp). Each pair calls one tool: the
// core calculator through the SDK server (the view's "add", its
// operation fixed) and an upstream's tool on the direct path (the view's
// "find", its org fixed), with the arguments that make the tool's work
// the same; server=view-all serves every tool the root does (the cost of
// curation alone), server=view only those of the view. Compare ns/op and
// allocs/op:
//
//	go test -run '^$' -bench CuratedCall -count 10 ./mcp | benchstat -col /server -
func BenchmarkCuratedCall(b *testing.B) {
	cat := curatedCatalog(b, &spy{quiet: true})
	root := New(cat, Options{}, Deps{Version: "t"}).Handler()
	view := New(cat, Options{}, Deps{Version: "t", Exposure: curatedExposure()}).Handler()
	// A view that serves every tool the root serves, two of them curated:
	// the cost of curation alone, the server's tools being the same.
	all := curatedExposure()
	all.Tools = append(all.Tools, curation.ToolSelection{Source: "core"}, curation.ToolSelection{Source: "up"})
	viewAll := New(cat, Options{}, Deps{Version: "t", Exposure: all}).Handler()
	for _, tt := range []struct {
		name       string
		h          http.Handler
		tool, args string
	}{
		{name: "path=sdk/server=root", h: root, tool: "calculator", args: `{"operation":"add","a":1,"b":2}`},
		{name: "path=sdk/server=view", h: view, tool: "add", args: `{"a":1,"b":2}`},
		{name: "path=sdk/server=view-all", h: viewAll, tool: "add", args: `{"a":1,"b":2}`},
		{name: "path=direct/server=root", h: root, tool: "up_search", args: `{"q":"x","org":"acme"}`},
		{name: "path=direct/server=view", h: view, tool: "find", args: `{"q":"x"}`},
		{name: "path=direct/server=view-all", h: viewAll, tool: "find", args: `{"q":"x"}`},
	} {
		body := []byte(modernCall(tt.tool, tt.args))
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req, err := http.NewRequest(http.MethodPost, "http://example.test/mcp", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				req.Header = http.Header{
					"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
					"Mcp-Protocol-Version": {modernHdr}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {tt.tool},
				}
				w := httptest.NewRecorder()
				tt.h.ServeHTTP(w, req)
				if w.Code != http.StatusOK || bytes.Contains(w.Body.Bytes(), []byte(`"error"`)) || bytes.Contains(w.Body.Bytes(), []byte(`"isError":true`)) {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
