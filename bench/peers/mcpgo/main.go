// Command mcpgo is one of the load harness's peers: a bare
// github.com/mark3labs/mcp-go StreamableHTTPServer, stateless, with default
// settings and one tool, echo. It is never shipped.
//
// It serves MCP at /mcp on -listen and, on -metrics-listen, a /metrics page
// with the Go runtime's allocation counters under the names the Prometheus
// Go collector gives them, as bench/loadtest/refserver does.
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

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8082", "MCP listen address")
	metricsListen := flag.String("metrics-listen", "127.0.0.1:9092", "metrics listen address")
	flag.Parse()

	s := server.NewMCPServer("mcpgo-peer", "v1.2.1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Returns the given text unchanged."),
		mcp.WithString("text", mcp.Required(), mcp.Description("The text to send back unchanged.")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := req.RequireString("text")
		if err != nil {
			return mcp.NewToolResultError(err.Error()), nil
		}
		return mcp.NewToolResultText(text), nil
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", server.NewStreamableHTTPServer(s, server.WithStateLess(true)))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		if err := http.ListenAndServe(*metricsListen, http.HandlerFunc(serveMetrics)); err != nil {
			log.Fatalf("mcpgo: metrics: %v", err)
		}
	}()
	srv := &http.Server{Addr: *listen, Handler: mux}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatalf("mcpgo: %v", err)
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
