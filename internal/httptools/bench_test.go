package httptools

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkCall measures a declared tool's call against an API on
// loopback that answers a small JSON object: "bare" is the same request
// made with a plain keep-alive client, so the difference between the two
// is what the tool adds on top of the API's own response (checking the
// arguments, building the request, the credential, reading and mapping
// the response). The MCP layers around it are measured by the root
// package's benchmarks.
func BenchmarkCall(b *testing.B) {
	api := newTestAPI(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"42","name":"Rex","tags":["a","b"]}`)
	})
	b.Run("bare", func(b *testing.B) {
		c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, api.srv.URL+"/v1/pets/42?verbose=true", nil)
			req.Header.Set("X-Api-Key", "s3cret-key")
			resp, err := c.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v map[string]any
			if err := json.Unmarshal(body, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tool", func(b *testing.B) {
		o := petsAPI(api.srv.URL)
		list := []Options{o}
		list[0].Defaults()
		cat := &fakeCatalog{}
		if err := Register(context.Background(), list, cat, Deps{}); err != nil {
			b.Fatal(err)
		}
		h := cat.sets["http_api pets"].Tools[0].Handler
		req := &sdk.CallToolRequest{Params: &sdk.CallToolParamsRaw{Name: "pets_get_pet", Arguments: json.RawMessage(`{"petId":"42","verbose":true}`)}}
		b.ReportAllocs()
		for b.Loop() {
			res, err := h(context.Background(), req)
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*sdk.TextContent).Text, "Rex") {
				b.Fatalf("%v %+v", err, res)
			}
		}
	})
}
