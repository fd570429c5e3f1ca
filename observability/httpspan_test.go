package observability

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The MCP endpoint's HTTP span is the one otelhttp's handler made for it
// before: the same name, kind, parent, status and attributes, for every
// kind of request and answer. Only the instrumentation scope differs.
func TestServerSpansAsOtelhttp(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	name := func(method string) string { return method + " /mcp" }
	type answer struct {
		status int // 0: the handler writes no header
		body   string
		flush  bool // flush before writing
		early  bool // 103 Early Hints first
	}
	handler := func(a answer) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil {
				io.Copy(io.Discard, r.Body)
			}
			if a.early {
				w.WriteHeader(http.StatusEarlyHints)
			}
			if a.flush {
				w.(http.Flusher).Flush()
			}
			if a.status != 0 {
				w.WriteHeader(a.status)
			}
			io.WriteString(w, a.body)
		})
	}
	spans := func(h func(tp *sdktrace.TracerProvider) http.Handler, req func() *http.Request) tracetest.SpanStub {
		t.Helper()
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		h(tp).ServeHTTP(httptest.NewRecorder(), req())
		got := exp.GetSpans()
		if len(got) != 1 {
			t.Fatalf("%d spans, want 1", len(got))
		}
		return got[0]
	}
	for _, tt := range []struct {
		name   string
		method string
		target string
		host   string
		body   string
		header map[string]string
		tls    bool
		proto  string
		mux    bool // served by a ServeMux (a pattern)
		answer answer
	}{
		{name: "a POST with a body and a parent", method: "POST", target: "/mcp", host: "127.0.0.1:8080", body: `{"jsonrpc":"2.0"}`,
			header: map[string]string{"Traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "User-Agent": "t/1"},
			answer: answer{status: 200, body: `{"ok":true}`}},
		{name: "nothing written", method: "GET", target: "/mcp", host: "localhost:8080"},
		{name: "a server error", method: "POST", target: "/mcp", host: "127.0.0.1:8080", body: "x", answer: answer{status: 500, body: "boom"}},
		{name: "a client error", method: "DELETE", target: "/mcp", host: "127.0.0.1:8080", answer: answer{status: 404}},
		{name: "an unknown method", method: "PURGE", target: "/mcp", host: "127.0.0.1:8080"},
		{name: "a lower-case method", method: "post", target: "/mcp", host: "127.0.0.1:8080"},
		{name: "forwarded", method: "POST", target: "/mcp", host: "mcp.example.com", header: map[string]string{"X-Forwarded-For": "203.0.113.7, 10.0.0.1"}},
		{name: "TLS on the default port", method: "POST", target: "/mcp", host: "[::1]:443", tls: true},
		{name: "TLS on another port", method: "POST", target: "/mcp", host: "mcp.example.com:8443", tls: true},
		{name: "plain HTTP on port 80", method: "POST", target: "/mcp", host: "mcp.example.com:80"},
		{name: "HTTP/2", method: "POST", target: "/mcp", host: "127.0.0.1:8080", proto: "HTTP/2.0"},
		{name: "an event stream", method: "POST", target: "/mcp", host: "127.0.0.1:8080", answer: answer{flush: true, body: "data: x\n\n"}},
		{name: "early hints", method: "POST", target: "/mcp", host: "127.0.0.1:8080", answer: answer{early: true, status: 200, body: "x"}},
		{name: "a route pattern", method: "POST", target: "/mcp/team", host: "127.0.0.1:8080", mux: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := func() *http.Request {
				var body io.Reader
				if tt.body != "" {
					body = strings.NewReader(tt.body)
				}
				r := httptest.NewRequest(tt.method, "http://"+tt.host+tt.target, body)
				r.Host = tt.host
				r.RemoteAddr = "192.0.2.1:54321"
				for k, v := range tt.header {
					r.Header.Set(k, v)
				}
				if tt.tls {
					r.TLS = &tls.ConnectionState{}
				}
				if tt.proto != "" {
					r.Proto = tt.proto
				}
				return r
			}
			wrap := func(h http.Handler) http.Handler {
				if !tt.mux {
					return h
				}
				mux := http.NewServeMux()
				mux.Handle("POST /mcp/team", h)
				return mux
			}
			want := spans(func(tp *sdktrace.TracerProvider) http.Handler {
				return wrap(otelhttp.NewHandler(handler(tt.answer), "mcp",
					otelhttp.WithTracerProvider(tp),
					otelhttp.WithPropagators(headerPropagator{prop}),
					otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
					otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return name(r.Method) })))
			}, req)
			got := spans(func(tp *sdktrace.TracerProvider) http.Handler {
				return wrap(serverSpans(tp.Tracer(tracerName), prop, name, handler(tt.answer)))
			}, req)
			if got.Name != want.Name || got.SpanKind != want.SpanKind || got.Status != want.Status || !got.Parent.Equal(want.Parent) {
				t.Errorf("span %q %v %v parent %v, want %q %v %v parent %v", got.Name, got.SpanKind, got.Status, got.Parent, want.Name, want.SpanKind, want.Status, want.Parent)
			}
			if g, w := attrMap(got.Attributes), attrMap(want.Attributes); !reflect.DeepEqual(g, w) {
				t.Errorf("attributes\n%v\nwant (otelhttp)\n%v", g, w)
			}
		})
	}
}

func attrMap(attrs []attribute.KeyValue) map[attribute.Key]any {
	m := make(map[attribute.Key]any, len(attrs))
	for _, a := range attrs {
		m[a.Key] = a.Value.AsInterface()
	}
	return m
}
