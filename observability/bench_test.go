package observability

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// discardExporter drops spans, so the benchmark measures making and
// batching them, not shipping them.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// BenchmarkMCPMiddleware measures the telemetry middleware around one
// successful tools/call whose handler does nothing: metrics alone, then
// with a span per call (batched, always sampled), then with the audit line
// written as JSON, as in production.
func BenchmarkMCPMiddleware(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discardExporter{}))
	b.Cleanup(func() { tp.Shutdown(context.Background()) })
	tracing := &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, Enabled: true}
	audit := slog.New(slog.NewJSONHandler(discardWriter{}, nil))
	for _, tt := range []struct {
		name    string
		tracing *Tracing
		logger  *slog.Logger
	}{
		{name: "metrics"},
		{name: "metrics+spans", tracing: tracing},
		{name: "metrics+spans+audit", tracing: tracing, logger: audit},
	} {
		b.Run(tt.name, func(b *testing.B) {
			m := NewMetrics(prometheus.NewRegistry(), BuildInfo{Version: "bench"})
			mw := MCPMiddleware(MCPOptions{
				Metrics: m, Tracing: tt.tracing, Logger: tt.logger,
				KnownTool:       func(name string) bool { return name == "echo" },
				RequestIDHeader: "Portcullis-Request-Id",
			})
			result := &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "hi"}}}
			h := mw(func(context.Context, string, sdk.Request) (sdk.Result, error) { return result, nil })
			req := &sdk.CallToolRequest{
				Params: &sdk.CallToolParamsRaw{Name: "echo", Arguments: json.RawMessage(`{"text":"hi"}`)},
				Extra: &sdk.RequestExtra{
					TokenInfo: &sdkauth.TokenInfo{UserID: "https://idp.example.com|alice", Expiration: time.Now().Add(time.Hour)},
					Header: http.Header{
						"Mcp-Protocol-Version":  {"2026-07-28"},
						"Portcullis-Request-Id": {"7"},
						"Traceparent":           {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
					},
				},
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(ctx, "tools/call", req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }
