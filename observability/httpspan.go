package observability

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// serverSpans gives every request to next an HTTP SERVER span with the
// attributes of the OpenTelemetry HTTP semantic conventions, as otelhttp's
// handler does (the same name, kind, parent, attributes and status:
// TestServerSpansAsOtelhttp compares them), named by name for the
// request's method. It is what the MCP endpoint's requests pay for on
// every call, so it does no more: otelhttp's handler also computes the
// attributes of its HTTP metrics on every request, for a meter provider
// that is off here (Portcullis's metrics are Prometheus's), and wraps the
// writer and the body in several layers; this takes one allocation for
// both.
func serverSpans(tracer trace.Tracer, prop propagation.TextMapPropagator, name func(method string) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), headerCarrier(r.Header))
		ctx, span := tracer.Start(ctx, name(r.Method), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(requestAttrs(r)...))
		defer span.End()
		st := &spanState{spanWriter: spanWriter{ResponseWriter: w}}
		if r.Body != nil && r.Body != http.NoBody {
			st.body.ReadCloser = r.Body
			orig, body := r, r.Body
			r.Body = &st.body
			// net/http checks the type of the body it made once the
			// handler returns.
			defer func() { orig.Body = body }()
		}
		next.ServeHTTP(&st.spanWriter, r.WithContext(ctx))

		status := st.status
		if status == 0 {
			status = http.StatusOK // as net/http answers a handler that wrote nothing
		}
		if status < 100 || status >= 600 {
			span.SetStatus(codes.Error, "Invalid HTTP status code "+strconv.Itoa(status))
		} else if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		attrs := make([]attribute.KeyValue, 0, 3)
		if st.body.n > 0 {
			attrs = append(attrs, semconv.HTTPRequestBodySize(int(st.body.n)))
		}
		if st.n > 0 {
			attrs = append(attrs, semconv.HTTPResponseBodySize(int(st.n)))
		}
		attrs = append(attrs, semconv.HTTPResponseStatusCode(status))
		span.SetAttributes(attrs...)
	})
}

// spanState is what a request's span counts: the body read and the
// response written.
type spanState struct {
	spanWriter
	body spanBody
}

// spanBody counts the bytes of a request body read.
type spanBody struct {
	io.ReadCloser
	n int64
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}

// spanWriter records a response's status and counts its bytes.
type spanWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (s *spanWriter) WriteHeader(code int) {
	// Informational answers (1xx) are not the response's status; the
	// first other one is.
	if s.status == 0 && (code < 100 || code > 199 || code == http.StatusSwitchingProtocols) {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *spanWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(b)
	s.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the writer underneath
// (deadlines, Flush for event streams).
func (s *spanWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Flush forwards to the underlying writer when it can flush.
func (s *spanWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// requestAttrs are a request's span attributes, as otelhttp's
// RequestTraceAttrs makes them for a server with no configured name.
func requestAttrs(r *http.Request) []attribute.KeyValue {
	host, port := splitHostPort(r.Host)
	https := r.TLS != nil
	attrs := make([]attribute.KeyValue, 0, 12)
	method, original := methodAttrs(r.Method)
	scheme := "http"
	if https {
		scheme = "https"
	}
	attrs = append(attrs, semconv.ServerAddress(host), method, semconv.URLScheme(scheme))
	if port > 0 && (https && port != 443 || !https && port != 80) {
		attrs = append(attrs, semconv.ServerPort(port))
	}
	if original.Valid() {
		attrs = append(attrs, original)
	}
	peer, peerPort := splitHostPort(r.RemoteAddr)
	if peer != "" {
		attrs = append(attrs, semconv.NetworkPeerAddress(peer))
		if peerPort > 0 {
			attrs = append(attrs, semconv.NetworkPeerPort(peerPort))
		}
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	client := r.Header.Get("X-Forwarded-For")
	if i := strings.IndexByte(client, ','); i >= 0 {
		client = client[:i]
	}
	if client == "" {
		client = peer
	}
	if client != "" {
		attrs = append(attrs, semconv.ClientAddress(client))
	}
	if r.URL != nil && r.URL.Path != "" {
		attrs = append(attrs, semconv.URLPath(r.URL.Path))
	}
	protoName, protoVersion, _ := strings.Cut(r.Proto, "/")
	switch protoName {
	case "HTTP":
		protoName = "http"
	case "QUIC":
		protoName = "quic"
	case "SPDY":
		protoName = "spdy"
	default:
		protoName = strings.ToLower(protoName)
	}
	if protoName != "" && protoName != "http" {
		attrs = append(attrs, semconv.NetworkProtocolName(protoName))
	}
	if protoVersion != "" {
		attrs = append(attrs, semconv.NetworkProtocolVersion(protoVersion))
	}
	if i := strings.IndexByte(r.Pattern, '/'); i >= 0 {
		attrs = append(attrs, semconv.HTTPRoute(r.Pattern[i:]))
	}
	return attrs
}

// methodAttrs is a method's http.request.method, and its
// http.request.method_original when that is not the method's own name.
func methodAttrs(method string) (attr, original attribute.KeyValue) {
	if a, ok := knownMethod(method); ok {
		return a, attribute.KeyValue{}
	}
	if method == "" {
		return semconv.HTTPRequestMethodOther, attribute.KeyValue{}
	}
	original = semconv.HTTPRequestMethodOriginal(method)
	if a, ok := knownMethod(strings.ToUpper(method)); ok {
		return a, original
	}
	return semconv.HTTPRequestMethodOther, original
}

func knownMethod(method string) (attribute.KeyValue, bool) {
	switch method {
	case http.MethodConnect:
		return semconv.HTTPRequestMethodConnect, true
	case http.MethodDelete:
		return semconv.HTTPRequestMethodDelete, true
	case http.MethodGet:
		return semconv.HTTPRequestMethodGet, true
	case http.MethodHead:
		return semconv.HTTPRequestMethodHead, true
	case http.MethodOptions:
		return semconv.HTTPRequestMethodOptions, true
	case http.MethodPatch:
		return semconv.HTTPRequestMethodPatch, true
	case http.MethodPost:
		return semconv.HTTPRequestMethodPost, true
	case http.MethodPut:
		return semconv.HTTPRequestMethodPut, true
	case http.MethodTrace:
		return semconv.HTTPRequestMethodTrace, true
	}
	return attribute.KeyValue{}, false
}

// splitHostPort splits "host:port" as otelhttp does: a missing or invalid
// port is -1, and the host is kept.
func splitHostPort(hostport string) (host string, port int) {
	port = -1
	if strings.HasPrefix(hostport, "[") {
		end := strings.LastIndexByte(hostport, ']')
		if end < 0 {
			return "", port
		}
		if strings.LastIndexByte(hostport[end:], ':') < 0 {
			return hostport[1:end], port
		}
	} else if !strings.Contains(hostport, ":") {
		return hostport, port
	}
	host, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return host, port
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil {
		return host, port
	}
	return host, int(n)
}

// tracerName is the instrumentation scope of the spans this package makes.
const tracerName = "github.com/portcullis-mcp/portcullis/observability"
