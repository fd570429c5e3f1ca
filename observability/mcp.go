package observability

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/portcullis-mcp/portcullis/internal/mcpheader"
)

// ErrorTypeTool is the error_type of a tools/call whose result has isError
// set: the call worked, the tool reported a failure.
const ErrorTypeTool = "tool_error"

// maxNameLen bounds caller-supplied names (tool, prompt) in logs and span
// attributes.
const maxNameLen = 128

// MCPOptions configures [MCPMiddleware].
type MCPOptions struct {
	// Metrics records operations and sessions. Nil records nothing.
	Metrics *Metrics
	// Tracing supplies the tracer and propagator. Nil traces nothing.
	Tracing *Tracing
	// Logger receives the audit line of every tool call. Nil discards.
	Logger *slog.Logger
	// KnownTool reports whether a tool is registered; unregistered names
	// are labelled [Other]. Nil treats every tool as unregistered.
	KnownTool func(name string) bool
	// Identity names the caller of a request from its token info (nil when
	// auth is off). Nil means TokenInfo.UserID and no client id.
	Identity func(*sdkauth.TokenInfo) (subject, clientID string)
	// RequestIDHeader is the request header in which the HTTP layer passes
	// the JSON-RPC id of a single-request POST (the SDK does not expose it
	// to middleware). Empty means jsonrpc.request.id is not recorded.
	RequestIDHeader string
	// RecordEnduserID puts the caller's subject on every MCP span as
	// enduser.id (see [TelemetryOptions.RecordEnduserID]). False leaves it
	// off.
	RecordEnduserID bool
	// Now reads the clock. Nil means time.Now.
	Now func() time.Time
	// Server names the virtual server the middleware serves, for the
	// audit line (server), spans (portcullis.server) and metrics
	// (portcullis_server); empty for the root server at /mcp, which
	// metrics label [RootServer] and the others leave out.
	Server string
	// OriginalTool returns the name a virtual server's tool has on the
	// root server, when the server exposes it under another name, for the
	// audit line (tool_original), spans (portcullis.tool.original) and
	// metrics (portcullis_tool_original); empty when the name is the
	// same. Nil means never.
	OriginalTool func(exposed string) string
	// CalledAs returns, for a tools/call, the name the caller used when
	// the request names the tool by its listed name instead (an MCP
	// App's call by its upstream's name, which the server resolved
	// before this middleware), for the audit line (tool_called_as) and
	// spans (portcullis.tool.called_as); "" otherwise. Nil means never.
	CalledAs func(ctx context.Context) string
}

// TelemetryOptions is the `telemetry:` section of the configuration: what
// the server's telemetry may record about its callers.
type TelemetryOptions struct {
	// RecordEnduserID puts the caller's subject (the token's sub) on every
	// MCP span as enduser.id. A subject identifies a person, so it is
	// personal data, and spans leave the server for a collector and a
	// tracing backend that may keep them longer, and show them to more
	// people, than the server's own logs. False (the default) keeps it off
	// spans; the audit line of each tool call names the subject either way.
	RecordEnduserID bool `yaml:"record_enduser_id"`
}

// MCPMiddleware returns SDK receiving middleware that, for every MCP request
// and notification, starts a SERVER span named "{method} {target}", records
// mcp_server_operation_duration_seconds, and writes one audit line per tool
// call. It also measures legacy sessions. It belongs outermost, so that it
// sees what the client sees.
//
// The span's parent is the trace context in params._meta (traceparent,
// tracestate) when the client sent one, else the HTTP request's span, which
// the HTTP layer passes in the traceparent header. When both exist and
// differ, the span links to the HTTP span.
func MCPMiddleware(o MCPOptions) sdk.Middleware {
	t := &mcpTelemetry{MCPOptions: o, names: make(map[spanTarget]string)}
	if t.Now == nil {
		t.Now = time.Now
	}
	if t.Logger == nil {
		t.Logger = slog.New(slog.DiscardHandler)
	}
	if t.KnownTool == nil {
		t.KnownTool = func(string) bool { return false }
	}
	t.tracer = noop.NewTracerProvider().Tracer("")
	t.prop = propagation.TraceContext{}
	if o.Tracing != nil {
		t.tracer = o.Tracing.Provider.Tracer(tracerName)
		t.prop = o.Tracing.Propagator
	}
	return t.middleware
}

type mcpTelemetry struct {
	MCPOptions
	tracer trace.Tracer
	prop   propagation.TextMapPropagator

	namesMu sync.RWMutex
	names   map[spanTarget]string // span names made so far
}

// spanTarget is a method and the target that names its span.
type spanTarget struct{ method, target string }

// spanName is "{method} {target}", made once per pair. The pairs are
// bounded: a target names the span only when it is a registered tool or a
// prompt that exists.
func (t *mcpTelemetry) spanName(method, target string) string {
	k := spanTarget{method, target}
	t.namesMu.RLock()
	name, ok := t.names[k]
	t.namesMu.RUnlock()
	if ok {
		return name
	}
	name = method + " " + target
	t.namesMu.Lock()
	t.names[k] = name
	t.namesMu.Unlock()
	return name
}

func (t *mcpTelemetry) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		start := t.Now()
		c := t.describe(method, req)
		if t.CalledAs != nil && c.name != "" && method == "tools/call" {
			c.calledAs = truncate(t.CalledAs(ctx))
		}
		ctx, span := t.startSpan(ctx, c, req)
		defer span.End()
		// Attributes cost allocations; build them only for a span that
		// records (tracing on and sampled).
		recording := span.IsRecording()
		if recording {
			span.SetAttributes(t.attributes(method, c, req)...)
		}

		res, err := next(ctx, method, req)

		d := t.Now().Sub(start)
		errType, desc := classify(res, err)
		status := ""
		var jerr *jsonrpc.Error
		if err != nil && errors.As(err, &jerr) {
			status = errorTypeForCode(jerr.Code)
		}
		if errType != "" && recording {
			span.SetAttributes(semconv.ErrorTypeKey.String(errType))
			span.SetStatus(codes.Error, desc)
			if status != "" {
				span.SetAttributes(attrRPCResponseStatus.String(status))
			}
		}
		if c.spanTarget != "" && err == nil && recording {
			span.SetName(t.spanName(c.methodLabel, c.spanTarget))
		}
		markDispatched(ctx)
		if t.Metrics != nil {
			prompt := ""
			if method == "prompts/get" {
				prompt = Other
				if err == nil && c.name != "" {
					prompt = c.name // the prompt exists: the server served it
				}
			}
			t.Metrics.ObserveOperation(Operation{
				Method:          c.methodLabel,
				Tool:            c.toolLabel,
				Prompt:          prompt,
				ProtocolVersion: VersionLabel(protocolVersion(req)),
				Transport:       transport(req),
				ErrorType:       errType,
				StatusCode:      status,
				Duration:        d,
				Server:          t.Server,
				ToolOriginal:    c.toolOriginal,
			})
		}
		if method == "tools/call" {
			t.audit(ctx, c, req, errType, desc, d)
		}
		if method == "initialize" && err == nil {
			t.trackSession(req)
		}
		return res, err
	}
}

// call is what the middleware knows about a request before it runs.
type call struct {
	methodLabel string
	toolLabel   string // tools/call only: the name or Other
	// toolOriginal is the root server's name of a known tool the server
	// renamed; empty otherwise.
	toolOriginal string
	name         string // the tool or prompt name as sent, truncated
	calledAs     string // tools/call only: the name used, when not name (see MCPOptions.CalledAs)
	spanTarget   string // the span name's target, only for a known target
	subject      string // the caller, from the token; empty when auth is off
	clientID     string
}

func (t *mcpTelemetry) describe(method string, req sdk.Request) call {
	c := call{methodLabel: MethodLabel(method)}
	switch r := req.(type) {
	case *sdk.CallToolRequest:
		if r.Params == nil {
			break
		}
		c.name = truncate(r.Params.Name)
		c.toolLabel = Other
		if t.KnownTool(r.Params.Name) {
			c.toolLabel = r.Params.Name
			c.spanTarget = r.Params.Name
			c.toolOriginal = t.original(r.Params.Name)
		}
	case *sdk.GetPromptRequest:
		if r.Params != nil {
			c.name = truncate(r.Params.Name)
			c.spanTarget = c.name // named only when the prompt exists (no error)
		}
	}
	if method == "tools/call" && c.toolLabel == "" {
		c.toolLabel = Other
	}
	if extra := req.GetExtra(); extra != nil && extra.TokenInfo != nil {
		c.subject, c.clientID = t.identity(extra.TokenInfo)
	}
	return c
}

// maxSpanAttrs is the most attributes [mcpTelemetry.attributes] sets.
const maxSpanAttrs = 12

// transport is the network.transport of a request. Requests that came
// over HTTP carry its header, which has a Content-Type: the SDK serves only
// POSTs of JSON. stdio requests carry no header, or one of the stdio
// transport's own, without a Content-Type, that holds the request id.
func transport(req sdk.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header.Get("Content-Type") != "" {
		return TransportTCP
	}
	return TransportPipe
}

// attributes returns the span attributes of a request described by c.
func (t *mcpTelemetry) attributes(method string, c call, req sdk.Request) []attribute.KeyValue {
	attrs := make([]attribute.KeyValue, 0, maxSpanAttrs)
	attrs = append(attrs, attrMCPMethodName.String(c.methodLabel), semconv.NetworkTransportKey.String(transport(req)))
	if t.Server != "" {
		attrs = append(attrs, attrServer.String(t.Server))
	}
	switch r := req.(type) {
	case *sdk.CallToolRequest:
		if r.Params != nil {
			attrs = append(attrs, attrGenAIToolName.String(c.name), attrGenAIOperationName.String("execute_tool"))
			if c.toolOriginal != "" {
				attrs = append(attrs, attrToolOriginal.String(c.toolOriginal))
			}
			if c.calledAs != "" {
				attrs = append(attrs, attrToolCalledAs.String(c.calledAs))
			}
		}
	case *sdk.GetPromptRequest:
		if r.Params != nil {
			attrs = append(attrs, attrGenAIPromptName.String(c.name))
		}
	case *sdk.ReadResourceRequest:
		if r.Params != nil {
			attrs = append(attrs, attrMCPResourceURI.String(truncate(r.Params.URI)))
		}
	}
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		if id := extra.Header.Get(t.RequestIDHeader); t.RequestIDHeader != "" && id != "" {
			attrs = append(attrs, semconv.JSONRPCRequestID(truncate(id)))
		}
		if sid := extra.Header.Get(mcpheader.SessionID); sid != "" {
			attrs = append(attrs, attrMCPSessionID.String(truncate(sid)))
		}
	}
	if v := protocolVersion(req); v != "" {
		attrs = append(attrs, attrMCPProtocolVersion.String(truncate(v)))
	}
	if c.subject != "" && t.RecordEnduserID {
		attrs = append(attrs, semconv.EnduserID(c.subject))
	}
	return attrs
}

func (t *mcpTelemetry) identity(ti *sdkauth.TokenInfo) (subject, clientID string) {
	if ti == nil {
		return "", ""
	}
	if t.Identity != nil {
		return t.Identity(ti)
	}
	return ti.UserID, ""
}

// startSpan starts the request's span under the client's trace context from
// _meta, or else the HTTP span's from the header.
func (t *mcpTelemetry) startSpan(ctx context.Context, c call, req sdk.Request) (context.Context, trace.Span) {
	var httpSC trace.SpanContext
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		httpSC = trace.SpanContextFromContext(t.prop.Extract(context.Background(), headerCarrier(extra.Header)))
	}
	opts := serverSpan
	// ctx may already carry a span: a legacy session's context descends
	// from the HTTP request that created it. Never parent on that.
	var parent context.Context
	carrier := metaCarrier(req)
	var metaSC trace.SpanContext
	if carrier != nil {
		metaSC = trace.SpanContextFromContext(t.prop.Extract(context.Background(), carrier))
	}
	switch {
	case metaSC.IsValid():
		parent = t.prop.Extract(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), carrier) // with its baggage
		if httpSC.IsValid() && !metaSC.Equal(httpSC) {
			opts = []trace.SpanStartOption{opts[0], trace.WithLinks(trace.Link{SpanContext: httpSC})}
		}
	case httpSC.IsValid():
		parent = trace.ContextWithRemoteSpanContext(ctx, httpSC)
	default:
		parent = trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	}
	return t.tracer.Start(parent, c.methodLabel, opts...)
}

// serverSpan are the start options of every MCP span. Its attributes are
// set after the start, and only when the span records.
var serverSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// metaCarrier reads trace context from params._meta, or returns nil when
// the request has none.
func metaCarrier(req sdk.Request) propagation.TextMapCarrier {
	meta := requestMeta(req)
	tp, ok := meta["traceparent"].(string)
	if !ok || tp == "" {
		return nil
	}
	c := propagation.MapCarrier{"traceparent": tp}
	if ts, ok := meta["tracestate"].(string); ok {
		c["tracestate"] = ts
	}
	if b, ok := meta["baggage"].(string); ok {
		c["baggage"] = b
	}
	return c
}

// requestMeta returns the request's params._meta, or nil. Requests without
// params (an initialized notification) hold a typed nil pointer, whose
// GetMeta would panic.
func requestMeta(req sdk.Request) map[string]any {
	p := req.GetParams()
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// protocolVersion is the request's protocol revision: the HTTP header, the
// per-request _meta of 2026-07-28, or what the session negotiated.
func protocolVersion(req sdk.Request) string {
	if extra := req.GetExtra(); extra != nil && extra.Header != nil {
		if v := extra.Header.Get(mcpheader.ProtocolVersion); v != "" {
			return v
		}
	}
	if v, ok := requestMeta(req)[sdk.MetaKeyProtocolVersion].(string); ok && v != "" {
		return v
	}
	// A server receives initialize as a ServerRequest: the SDK's
	// InitializeRequest is the client's type.
	if r, ok := req.(*sdk.ServerRequest[*sdk.InitializeParams]); ok && r.Params != nil {
		return r.Params.ProtocolVersion
	}
	if ss, ok := req.GetSession().(*sdk.ServerSession); ok && ss != nil {
		if ip := ss.InitializeParams(); ip != nil {
			return ip.ProtocolVersion
		}
	}
	return ""
}

// Classify returns the error_type of a request's outcome as the
// metrics label it (empty on success, [ErrorTypeTool] for a tool's error
// result) and a description of it.
func Classify(res sdk.Result, err error) (errType, desc string) { return classify(res, err) }

// classify returns the error_type of an outcome (empty on success) and a
// description for the span status.
func classify(res sdk.Result, err error) (errType, desc string) {
	if err == nil {
		if r, ok := res.(*sdk.CallToolResult); ok && r != nil && r.IsError {
			return ErrorTypeTool, "the tool returned an error result"
		}
		// A result passed on as another server sent it (a direct call's,
		// see catalog.RawToolResult) says so itself.
		if r, ok := res.(interface{ ToolError() bool }); ok && r.ToolError() {
			return ErrorTypeTool, "the tool returned an error result"
		}
		return "", ""
	}
	var jerr *jsonrpc.Error // escapes: allocated only on the error path
	switch {
	case errors.As(err, &jerr):
		return errorTypeForCode(jerr.Code), jerr.Message
	case errors.Is(err, context.Canceled):
		return "cancelled", "the request was cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout", "the request timed out"
	default:
		return Other, err.Error()
	}
}

// original returns the root server's name of a curated tool exposed as
// name; empty when it has none other.
func (t *mcpTelemetry) original(name string) string {
	if t.OriginalTool == nil || name == "" {
		return ""
	}
	if orig := t.OriginalTool(name); orig != name {
		return orig
	}
	return ""
}

func (t *mcpTelemetry) audit(ctx context.Context, c call, req sdk.Request, errType, desc string, d time.Duration) {
	argBytes := 0
	if r, ok := req.(*sdk.CallToolRequest); ok && r.Params != nil {
		argBytes = len(r.Params.Arguments)
	}
	outcome := "ok"
	switch errType {
	case "":
	case ErrorTypeTool:
		outcome = "tool_error"
	default:
		outcome = "error"
	}
	attrs := []slog.Attr{
		slog.Bool("audit", true),
		slog.String("subject", c.subject),
		slog.String("client_id", c.clientID),
		slog.String("tool", c.name),
		slog.String("outcome", outcome),
		// An integer: slog writes a float through encoding/json, which
		// grows the stack of the SDK's fresh per-request goroutine.
		slog.Int64("duration_us", d.Microseconds()),
		slog.Int("arguments_bytes", argBytes),
	}
	if t.Server != "" {
		attrs = append(attrs, slog.String("server", t.Server))
	}
	if c.toolOriginal != "" {
		attrs = append(attrs, slog.String("tool_original", c.toolOriginal))
	}
	if c.calledAs != "" {
		attrs = append(attrs, slog.String("tool_called_as", c.calledAs))
	}
	if errType != "" {
		attrs = append(attrs, slog.String("error_type", errType))
	}
	if outcome == "error" {
		attrs = append(attrs, slog.String("error", truncate(desc)))
	}
	logAttrs(ctx, t.Logger, slog.LevelInfo, "tool call", attrs...)
}

// trackSession counts a legacy session from its initialize until it
// closes, whether or not the client goes on to send initialized: a session
// that never does holds the server's memory all the same. Stateless
// requests have no session id and are not sessions in this sense. It runs
// once per session: only a successful initialize is tracked, and the SDK
// refuses a second one.
func (t *mcpTelemetry) trackSession(req sdk.Request) {
	ss, ok := req.GetSession().(*sdk.ServerSession)
	if t.Metrics == nil || !ok || ss == nil || ss.ID() == "" {
		return
	}

	version := ""
	if ip := ss.InitializeParams(); ip != nil {
		version = ip.ProtocolVersion
	}
	if !knownVersion(version) {
		version = Other
	}
	start := t.Now()
	t.Metrics.sessionStarted(t.Server)
	go func() {
		_ = ss.Wait()
		t.Metrics.sessionEnded(t.Server, version, t.Now().Sub(start))
	}()
}

// knownVersion bounds mcp_protocol_version to the revisions that have
// sessions.
func knownVersion(v string) bool {
	switch v {
	case "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25":
		return true
	}
	return false
}

func truncate(s string) string {
	if len(s) <= maxNameLen {
		return s
	}
	return strings.ToValidUTF8(s[:maxNameLen], "") + "…"
}

// InjectTraceContext writes the current span's context into the request's
// traceparent header before next runs, so that the MCP middleware, which
// sees headers but not the HTTP request's context, can parent its span on
// the HTTP span. Use it inside the HTTP span.
func InjectTraceContext(prop propagation.TextMapPropagator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sc := trace.SpanContextFromContext(r.Context()); sc.IsValid() {
			prop.Inject(r.Context(), headerCarrier(r.Header))
		}
		next.ServeHTTP(w, r)
	})
}
