package observability

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// HTTP instruments the server's routes. Metrics and Tracing may be nil.
type HTTP struct {
	Metrics *Metrics
	Tracing *Tracing
}

// Route counts requests to h under the fixed route name (never a raw path).
// Use it for probes and other routes not worth a span.
func (i HTTP) Route(route string, h http.Handler) http.Handler {
	return i.route(route, "", h)
}

func (i HTTP) route(route, server string, h http.Handler) http.Handler {
	if i.Metrics == nil {
		return h
	}
	return i.Metrics.InstrumentHTTP(route, server, h)
}

// MCPRoute counts the requests to the MCP endpoint of the server named
// server (empty for the root server, /mcp) under the route name "mcp" and
// that server's portcullis_server, and gives each an HTTP server span
// named "METHOD pattern", whose parent is the W3C trace context of the
// request's headers. Inside the span, the request's traceparent header is
// rewritten to name the span, for the MCP middleware (see
// [InjectTraceContext]).
//
// Every MCP endpoint shares the route name, so a query of route="mcp"
// sums them all, as it did before virtual servers, and one by
// portcullis_server tells them apart.
func (i HTTP) MCPRoute(server, pattern string, h http.Handler) http.Handler {
	const route = "mcp"
	if i.Tracing != nil {
		// The names of the usual methods' spans are made once.
		names := make(map[string]string)
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			names[m] = m + " " + pattern
		}
		name := func(method string) string {
			if n, ok := names[method]; ok {
				return n
			}
			return method + " " + pattern
		}
		h = serverSpans(i.Tracing.Provider.Tracer(tracerName), i.Tracing.Propagator, name, InjectTraceContext(i.Tracing.Propagator, h))
	}
	return i.route(route, ServerLabel(server), h)
}

// Transport wraps rt so that outgoing requests get a CLIENT span and carry
// the caller's trace context (traceparent), for tools that call upstream
// services. It adds nothing else: no credentials, no headers of the caller.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(t.Provider),
		otelhttp.WithPropagators(t.Propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	)
}
