package observability

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// RefusalOptions configures [Refusals].
type RefusalOptions struct {
	// Metrics records refusals in mcp_server_operation_duration_seconds.
	// Nil records nothing.
	Metrics *Metrics
	// Tracing supplies the tracer. Nil traces nothing.
	Tracing *Tracing
	// KnownTool reports whether a tool is registered, as in [MCPOptions].
	// Nil treats every tool as unregistered.
	KnownTool func(name string) bool
	// Server and OriginalTool name the virtual server the endpoint serves
	// and the root server's names of the tools it renamed, as in
	// [MCPOptions]; empty and nil for the root server.
	Server       string
	OriginalTool func(exposed string) string
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
}

// Refusals returns middleware for the /mcp endpoint that makes the requests
// refused before the SDK dispatches them visible: a POST answered with an
// HTTP error status (a limit's 429 or 503, a body over the limit, a bad
// protocol header, an unknown session) or with a JSON-RPC error that the
// handler writes itself (a parse error, an unknown method, a tool the
// policy hides) is recorded in mcp_server_operation_duration_seconds and,
// when traced, gets a SERVER span with its error.type, as the MCP
// middleware records the requests the SDK dispatches. Put it after the
// auth middleware (a request without a valid token is the auth metrics'
// to count) and before everything that can refuse a request.
//
// The method and tool come from the Mcp-Method and Mcp-Name headers that
// clients of revision 2026-07-28 send; without them the method is [Other].
// error_type is the JSON-RPC error code when the reply carries one (the
// handler reports it through the response writer's RecordJSONRPCError
// method), else the HTTP status code.
func Refusals(o RefusalOptions) func(http.Handler) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.KnownTool == nil {
		o.KnownTool = func(string) bool { return false }
	}
	tracer := noop.NewTracerProvider().Tracer("")
	if o.Tracing != nil {
		tracer = o.Tracing.Provider.Tracer(tracerName)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPost {
				next.ServeHTTP(w, r)
				return
			}
			start := o.Now()
			rw := &refusalWriter{ResponseWriter: w}
			next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), dispatchedKey{}, &rw.dispatched)))
			if rw.dispatched.Load() {
				// The MCP middleware recorded the request, whatever the
				// status of its answer (on 2026-07-28 an invalid-params
				// error is a 400, SEP-2575).
				return
			}
			if rw.code == 0 && rw.status < http.StatusBadRequest && !rw.answered {
				return
			}
			op := refusedOperation(r.Header, rw, o.KnownTool)
			op.Duration = o.Now().Sub(start)
			op.Server = o.Server
			if op.Tool != "" && op.Tool != Other && o.OriginalTool != nil {
				if orig := o.OriginalTool(op.Tool); orig != op.Tool {
					op.ToolOriginal = orig
				}
			}
			if o.Metrics != nil {
				o.Metrics.ObserveOperation(op)
			}
			if o.Tracing != nil {
				recordRefusalSpan(tracer, r, op, start, rw)
			}
		})
	}
}

// refusedOperation describes a refused request for the operation metric.
func refusedOperation(h http.Header, rw *refusalWriter, knownTool func(string) bool) Operation {
	op := Operation{
		Method:          MethodLabel(h.Get(mcpheader.Method)),
		ProtocolVersion: VersionLabel(h.Get(mcpheader.ProtocolVersion)),
		Transport:       TransportTCP,
	}
	if !rw.answered || rw.status >= http.StatusBadRequest {
		op.ErrorType = strconv.Itoa(rw.status)
	}
	if op.Method == "tools/call" {
		op.Tool = Other
		if name := h.Get(mcpheader.Name); name != "" && knownTool(name) {
			op.Tool = name
		}
	}
	if op.Method == "prompts/get" {
		op.Prompt = Other
	}
	if rw.code != 0 {
		op.ErrorType = strconv.Itoa(rw.code)
		op.StatusCode = op.ErrorType
	}
	return op
}

// recordRefusalSpan records the span of a request answered before the SDK
// (refused, or a tasks extension method), from start to now, under the
// HTTP request's span, linked to the trace the answer names.
func recordRefusalSpan(tracer trace.Tracer, r *http.Request, op Operation, start time.Time, rw *refusalWriter) {
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start)}
	if rw.link != "" {
		linked := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": rw.link})
		if sc := trace.SpanContextFromContext(linked); sc.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
		}
	}
	_, span := tracer.Start(r.Context(), op.Method, opts...)
	defer span.End()
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attrMCPMethodName.String(op.Method),
		semconv.NetworkTransportKey.String(op.Transport),
		semconv.ErrorTypeKey.String(op.ErrorType),
	)
	if op.Server != "" {
		span.SetAttributes(attrServer.String(op.Server))
	}
	if op.Tool != "" {
		span.SetAttributes(attrGenAIToolName.String(op.Tool), attrGenAIOperationName.String(operationNameExecuteTool))
	}
	if op.ToolOriginal != "" {
		span.SetAttributes(attrToolOriginal.String(op.ToolOriginal))
	}
	if op.ProtocolVersion != "" {
		span.SetAttributes(attrMCPProtocolVersion.String(op.ProtocolVersion))
	}
	if op.StatusCode != "" {
		span.SetAttributes(attrRPCResponseStatus.String(op.StatusCode))
	}
	if op.ErrorType != "" {
		span.SetStatus(codes.Error, "refused before the MCP server handled it")
	}
}

// refusalWriter notes the status a handler writes and the JSON-RPC error
// code of a refusal the MCP handler writes itself.
type refusalWriter struct {
	http.ResponseWriter
	status   int    // 0 until WriteHeader or Write
	code     int    // the JSON-RPC error code of a refusal, 0 when none
	answered bool   // answered without error before the SDK
	link     string // traceparent of a related trace
	// dispatched is set by the MCP middleware (markDispatched) when it
	// records the request as an operation itself.
	dispatched atomic.Bool
}

// dispatchedKey holds, in a request's context, the flag that the MCP
// middleware sets for a request it records.
type dispatchedKey struct{}

// markDispatched tells the Refusals middleware around the request of ctx,
// if any, that the MCP middleware recorded it. A legacy session's requests
// carry the context of the request that opened the session, whose flag
// has long been read: setting it again changes nothing.
func markDispatched(ctx context.Context) {
	if d, ok := ctx.Value(dispatchedKey{}).(*atomic.Bool); ok {
		d.Store(true)
	}
}

// RecordAnswered is called by the MCP handler when it answers a request
// itself without error (the tasks extension's methods); link is the
// traceparent of the call that created the task, or "".
func (w *refusalWriter) RecordAnswered(link string) { w.answered, w.link = true, link }

// RecordJSONRPCError is called by the MCP handler when it answers a request
// itself, before the SDK sees it, with a JSON-RPC error of this code.
func (w *refusalWriter) RecordJSONRPCError(code int) { w.code = code }

func (w *refusalWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *refusalWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer, for event streams.
func (w *refusalWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets [http.ResponseController] reach the underlying writer.
func (w *refusalWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
