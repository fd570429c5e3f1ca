// Command refserver is the load harness's reference: a bare MCP Go SDK
// StreamableHTTPHandler, stateless, with default settings and one tool,
// echo. It is what Portcullis is measured against; it is never shipped.
//
// It serves MCP at /mcp on -listen and, on -metrics-listen, a /metrics page
// with the two Go runtime counters the harness reads, under the names the
// Prometheus Go collector gives them (go_memstats_alloc_bytes_total and
// go_memstats_mallocs_total), so both servers are measured the same way.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"runtime/metrics"
	"syscall"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoInput struct {
	Text string `json:"text" jsonschema:"The text to send back unchanged."`
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "MCP listen address")
	metricsListen := flag.String("metrics-listen", "127.0.0.1:9091", "metrics listen address")
	flag.Parse()

	server := sdk.NewServer(&sdk.Implementation{Name: "refserver", Version: "v1.8.0"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "echo", Description: "Returns the given text unchanged."},
		func(_ context.Context, _ *sdk.CallToolRequest, in echoInput) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil, nil
		})
	mux := http.NewServeMux()
	mux.Handle("/mcp", sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server },
		&sdk.StreamableHTTPOptions{Stateless: true}))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := http.ListenAndServe(*metricsListen, http.HandlerFunc(serveMetrics)); err != nil {
			log.Fatalf("refserver: metrics: %v", err)
		}
	}()
	srv := &http.Server{Addr: *listen, Handler: mux}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatalf("refserver: %v", err)
	}
}

// serveMetrics writes the allocation counters in the Prometheus text format,
// computed as client_golang's Go collector computes them.
func serveMetrics(w http.ResponseWriter, _ *http.Request) {
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/allocs:objects"},
		{Name: "/gc/heap/tiny/allocs:objects"},
	}
	metrics.Read(s)
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "go_memstats_alloc_bytes_total %d\n", s[0].Value.Uint64())
	fmt.Fprintf(w, "go_memstats_mallocs_total %d\n", s[1].Value.Uint64()+s[2].Value.Uint64())
}
