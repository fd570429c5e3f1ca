package upstream

import (
	"context"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkUpstreamCall measures a tools/call of a caller through
// Portcullis's upstream code to a stateless go-sdk server over loopback
// HTTP (the caller in memory, the upstream in process): "hop" by the
// direct hop, "sdk-client" by the SDK client (the same tool with an
// argument bound to a header, which the hop leaves to the SDK client).
// Both include the upstream's own handling.
func BenchmarkUpstreamCall(b *testing.B) {
	s := sdk.NewServer(&sdk.Implementation{Name: "bench"}, nil)
	echo := func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
	}
	s.AddTool(&sdk.Tool{Name: "echo", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"text": map[string]any{"type": "string"},
	}}}, echo)
	s.AddTool(&sdk.Tool{Name: "echo_bound", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"text": map[string]any{"type": "string", "x-mcp-header": "Text"},
	}}}, echo)
	f := newFront(b)
	srv := serveHTTP(b, s, nil, nil)
	m, err := New([]Options{{Name: "be", Transport: TransportHTTP, URL: srv.URL, Required: true}}, f.cat, Deps{Backoff: fastBackoff})
	if err != nil {
		b.Fatal(err)
	}
	m.Start(context.Background())
	defer m.Close()
	waitFor(b, "ready", func() bool { return m.Ready(context.Background()) == nil })
	cs := f.caller(b, &sdk.ClientOptions{}, "2026-07-28")
	for _, c := range []struct{ name, tool string }{{"hop", "be_echo"}, {"sdk-client", "be_echo_bound"}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: map[string]any{"text": "hi"}})
				if err != nil || res.IsError {
					b.Fatalf("%s: %v %v", c.tool, err, res)
				}
			}
		})
	}
}
