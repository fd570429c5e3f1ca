package observability

import (
	"context"
	"log/slog"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DurationBuckets are the bucket boundaries, in seconds, that the
// OpenTelemetry MCP semantic conventions recommend for
// mcp.server.operation.duration and mcp.server.session.duration.
var DurationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// OperationBuckets are the classic bucket boundaries of
// mcp_server_operation_duration_seconds: [DurationBuckets] with boundaries
// below 10 ms added, since most MCP requests are served in well under a
// millisecond and would otherwise all fall in the first bucket, whatever
// their real latency. Every boundary of DurationBuckets is kept, so queries
// written against the conventions' buckets still work.
var OperationBuckets = append([]float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005}, DurationBuckets...)

// Native histogram settings of the duration histograms. A scraper that asks
// for protobuf gets a native histogram next to the classic buckets: bucket
// boundaries grow by at most 10% (relative error of a quantile about 5%),
// from sub-microsecond to hours, at most 160 buckets per series before
// they are merged, and reset at most once an hour.
const (
	nativeBucketFactor = 1.1
	nativeMaxBuckets   = 160
	nativeMinReset     = time.Hour
)

// Labels naming the MCP server a series counts and, on series with a tool
// label, the original name of a tool a virtual server renamed. They are
// the Prometheus spelling of the span attributes portcullis.server and
// portcullis.tool.original: the MCP semantic conventions have no
// attribute for either (server.address names a network peer), and a bare
// "server" would sit in the conventions' server.* namespace once a
// collector turns labels back into attributes. Both are bounded by the
// configuration: a server's name, and a name a tool has on /mcp.
const (
	LabelServer       = "portcullis_server"
	LabelToolOriginal = "portcullis_tool_original"
)

// RootServer is the portcullis_server of the root server, /mcp (and
// stdio): a virtual server may not be named so.
const RootServer = "root"

// ServerLabel is the portcullis_server of the server named name: name
// itself, or [RootServer] when it is empty.
func ServerLabel(name string) string {
	if name == "" {
		return RootServer
	}
	return name
}

// BuildInfo labels portcullis_build_info.
type BuildInfo struct {
	Version  string
	Revision string
	// SDKPatches names the patches of patches/go-sdk the binary was built
	// with, comma-separated; empty for the SDK as released.
	SDKPatches string
	// FositePatches names the patches of patches/fosite the binary was
	// built with, comma-separated; empty for fosite as released.
	FositePatches string
}

// Metrics holds every Prometheus series Portcullis exports. It registers on
// the registry it is given, never on the global one, so tests and
// embedders get exactly these series.
type Metrics struct {
	reg *prometheus.Registry

	operation      *prometheus.HistogramVec
	session        *prometheus.HistogramVec
	sessionsActive *prometheus.GaugeVec
	sessionsAdopt  prometheus.Counter
	eventsReplayed prometheus.Counter
	answersFwd     prometheus.Counter
	// afterSessionEnd, when set (by tests), runs after a session's end is
	// recorded, which happens on a goroutine of its own.
	afterSessionEnd func()
	authRequests    *prometheus.CounterVec
	httpInFlight    prometheus.Gauge
	httpRequests    *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec
	spans           *prometheus.CounterVec
	spansExported   prometheus.Counter
	spansFailed     prometheus.Counter
	spansDropped    prometheus.Counter
	authAllowed     prometheus.Counter
	toolDenials     *prometheus.CounterVec
	authServerCounters
	connectedAccounts
	limitCounters
	connWatch
}

// NewMetrics creates the series on reg, with the Go runtime and process
// collectors, and sets portcullis_build_info.
func NewMetrics(reg *prometheus.Registry, b BuildInfo) *Metrics {
	m := &Metrics{
		reg: reg,
		operation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:                            "mcp_server_operation_duration_seconds",
			Help:                            "Duration of MCP requests handled by the server, refusals before the SDK included (OpenTelemetry MCP semantic conventions).",
			Buckets:                         OperationBuckets,
			NativeHistogramBucketFactor:     nativeBucketFactor,
			NativeHistogramMaxBucketNumber:  nativeMaxBuckets,
			NativeHistogramMinResetDuration: nativeMinReset,
		}, operationLabels),
		session: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_session_duration_seconds",
			Help:    "Duration of legacy (stateful) MCP sessions, from initialize to close.",
			Buckets: DurationBuckets,
		}, []string{"mcp_protocol_version", LabelServer}),
		sessionsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_mcp_sessions_active",
			Help: "Legacy (stateful) MCP sessions open now, initialized or not, by MCP server.",
		}, []string{LabelServer}),
		sessionsAdopt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_mcp_sessions_rebuilt_total",
			Help: "Legacy (stateful) MCP sessions this replica rebuilt from the shared session store to serve a request, because another replica made them or its own copy had ended.",
		}),
		eventsReplayed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_mcp_session_events_replayed_total",
			Help: "Events of legacy sessions' streams this replica replayed from the shared event log to a client resuming a stream with Last-Event-ID.",
		}),
		answersFwd: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_mcp_session_answers_forwarded_total",
			Help: "Clients' answers to server-to-client requests of legacy sessions (sampling, elicitation, roots) posted to this replica and handed to the replica whose call waits for them, itself included.",
		}),
		authRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_auth_requests_total",
			Help: "Requests to /mcp seen by the bearer-token middleware, by outcome and, for denials, reason.",
		}, []string{"outcome", "reason"}),
		httpInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portcullis_http_requests_in_flight",
			Help: "HTTP requests being served now (streams included).",
		}),
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_http_requests_total",
			Help: "HTTP requests served, by route name, method and status code, and for the route mcp by MCP server.",
		}, []string{"route", "method", "code", LabelServer}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portcullis_http_request_duration_seconds",
			Help:    "HTTP request duration until the handler returned, by route name and method, and for the route mcp by MCP server.",
			Buckets: DurationBuckets,
		}, []string{"route", "method", LabelServer}),
		toolDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tool_calls_denied_total",
			Help: "tools/call requests answered as a call of an unknown tool or with the step-up 403, by server, reason and tool: insufficient_scope (the caller sees the tool but lacks a scope), policy (the per-tool policy refused the caller a registered tool, named by tool) or unknown_tool (no tool of that name; tool is _OTHER).",
		}, []string{"reason", "tool", LabelServer, LabelToolOriginal}),
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_otel_spans_total",
			Help: "Spans that left the trace pipeline: exported, failed (the exporter returned an error) or dropped (the export queue was full).",
		}, []string{"outcome"}),
	}
	m.spansExported = m.spans.WithLabelValues("exported")
	m.spansFailed = m.spans.WithLabelValues("failed")
	m.spansDropped = m.spans.WithLabelValues("dropped")
	m.authAllowed = m.authRequests.WithLabelValues("allowed", "")
	m.authServer = newAuthServerRequests()
	m.accounts = newConnectedAccounts()
	m.DeclareServer("")

	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "portcullis_build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "go_version": runtime.Version(), "sdk_patches": b.SDKPatches, "fosite_patches": b.FositePatches},
	})
	build.Set(1)

	m.limitCounters = newLimitCounters()
	m.conns = m.limitCounters.forConns()
	reg.MustRegister(m.rateLimited, m.limitRejections, m.idleClosed)
	reg.MustRegister(
		m.operation, m.session, m.sessionsActive, m.sessionsAdopt, m.eventsReplayed, m.answersFwd, m.authRequests, m.toolDenials, m.authServer, m.accounts,
		m.httpInFlight, m.httpRequests, m.httpDuration, m.spans, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// SessionRebuilt counts one legacy session this replica rebuilt from the
// shared session store (see mcp.Deps.OnSessionAdopted).
func (m *Metrics) SessionRebuilt(context.Context) { m.sessionsAdopt.Inc() }

// EventsReplayed counts n events of a legacy session's stream replayed
// from the shared event log (see mcp.Deps.OnEventsReplayed).
func (m *Metrics) EventsReplayed(_ context.Context, n int) { m.eventsReplayed.Add(float64(n)) }

// AnswerForwarded counts one client's answer to a server-to-client request
// handed to the replica whose call waits for it (see
// mcp.Deps.OnAnswerForwarded).
func (m *Metrics) AnswerForwarded(context.Context) { m.answersFwd.Inc() }

// Handler serves the registry in the Prometheus exposition formats, with
// gzip when the scraper asks for it (at gzip.BestSpeed, see gzipWriters).
// Errors gathering are logged and counted in
// promhttp_metric_handler_errors_total.
func (m *Metrics) Handler(logger *slog.Logger) http.Handler {
	return gzipped(promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:           slog.NewLogLogger(logger.Handler(), slog.LevelError),
		Registry:           m.reg,
		EnableOpenMetrics:  true,
		DisableCompression: true,
	}))
}

// operationLabels are the labels of mcp_server_operation_duration_seconds,
// the attributes the MCP semantic conventions give the metric, in the
// order of [Operation.labels].
var operationLabels = []string{
	"mcp_method_name", "gen_ai_tool_name", "gen_ai_prompt_name", "gen_ai_operation_name",
	"mcp_protocol_version", "network_transport", "error_type", "rpc_response_status_code",
	LabelServer, LabelToolOriginal,
}

// Operation is one MCP request or notification as the operation metric
// records it. Every field is a bounded label value.
type Operation struct {
	// Method is the mcp.method.name, bounded by [MethodLabel].
	Method string
	// Tool is empty except for tools/call, where it is a registered tool's
	// name or [Other].
	Tool string
	// Prompt is empty except for prompts/get, where it is the name of a
	// prompt the server served or [Other].
	Prompt string
	// ProtocolVersion is the MCP revision, bounded by [VersionLabel];
	// empty when the request names none.
	ProtocolVersion string
	// Transport is the network.transport: [TransportTCP] or [TransportPipe].
	Transport string
	// ErrorType is empty on success.
	ErrorType string
	// StatusCode is the JSON-RPC error code of the response, empty when it
	// has none.
	StatusCode string
	// Duration is how long the server took.
	Duration time.Duration
	// Server names the virtual server that served the request; empty for
	// the root server (labelled [RootServer]).
	Server string
	// ToolOriginal is, on a tools/call of a tool a virtual server renamed,
	// its name on the root server; empty otherwise, and whenever Tool is
	// [Other].
	ToolOriginal string
}

// Values of network.transport: Streamable HTTP runs on TCP, stdio on a
// pipe.
const (
	TransportTCP  = "tcp"
	TransportPipe = "pipe"
)

// operationNameExecuteTool is the gen_ai.operation.name of a tools/call;
// the conventions set it on no other method.
const operationNameExecuteTool = "execute_tool"

func (o Operation) labels() []string {
	opName := ""
	if o.Method == "tools/call" {
		opName = operationNameExecuteTool
	}
	return []string{o.Method, o.Tool, o.Prompt, opName, o.ProtocolVersion, o.Transport, o.ErrorType, o.StatusCode, ServerLabel(o.Server), o.ToolOriginal}
}

// ObserveOperation records one MCP request or notification.
func (m *Metrics) ObserveOperation(o Operation) {
	m.operation.WithLabelValues(o.labels()...).Observe(o.Duration.Seconds())
}

// VersionLabel is the mcp_protocol_version of v: itself when it is a
// revision of the protocol this server knows, [Other] otherwise, and empty
// when v is.
func VersionLabel(v string) string {
	switch v {
	case "", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28":
		return v
	}
	return Other
}

// AuthEvent counts one decision of the bearer-token middleware. reason is
// empty when allowed; the middleware's reasons are a fixed set.
func (m *Metrics) AuthEvent(outcome, reason string) {
	if outcome == "allowed" && reason == "" {
		m.authAllowed.Inc()
		return
	}
	m.authRequests.WithLabelValues(outcome, reason).Inc()
}

// Reasons of portcullis_tool_calls_denied_total.
const (
	ToolDenialPolicy      = "policy"
	ToolDenialUnknownTool = "unknown_tool"
	ToolDenialStepUp      = "insufficient_scope"
	ToolDenialRule        = "policy_rule"
)

// ToolDenial is one tools/call the per-tool policy refused, as
// portcullis_tool_calls_denied_total counts it. Every field is a bounded
// label value.
type ToolDenial struct {
	// Server names the virtual server that refused the call; empty for
	// the root server.
	Server string
	// Reason is [ToolDenialPolicy], [ToolDenialUnknownTool],
	// [ToolDenialStepUp] or [ToolDenialRule]; any other is counted as
	// [Other].
	Reason string
	// Tool is the name the caller called, when the server has a tool of
	// that name, else [Other] (as for [Metrics.ObserveOperation]).
	Tool string
	// ToolOriginal is the tool's name on the root server when the virtual
	// server renamed it; empty otherwise.
	ToolOriginal string
}

// ToolDenied counts one tools/call the per-tool policy refused: answered
// as a call of an unknown tool (reason [ToolDenialPolicy] or
// [ToolDenialUnknownTool]), with the step-up 403 ([ToolDenialStepUp]), or
// naming the expression rule that refused it ([ToolDenialRule]).
func (m *Metrics) ToolDenied(d ToolDenial) {
	if d.Reason != ToolDenialPolicy && d.Reason != ToolDenialUnknownTool && d.Reason != ToolDenialStepUp && d.Reason != ToolDenialRule {
		d.Reason = Other
	}
	m.toolDenials.WithLabelValues(d.Reason, d.Tool, ServerLabel(d.Server), d.ToolOriginal).Inc()
}

// DeclareServer creates the series of the server named name (empty for
// the root server) that a panel or alert reads before its first event:
// the calls of unknown tools it refused and its open legacy sessions, at
// zero.
func (m *Metrics) DeclareServer(name string) {
	m.toolDenials.WithLabelValues(ToolDenialUnknownTool, Other, ServerLabel(name), "")
	m.sessionsActive.WithLabelValues(ServerLabel(name))
}

// sessionStarted and sessionEnded track the legacy sessions of the server
// named server (empty for the root server).
func (m *Metrics) sessionStarted(server string) {
	m.sessionsActive.WithLabelValues(ServerLabel(server)).Inc()
}

func (m *Metrics) sessionEnded(server, protocolVersion string, d time.Duration) {
	m.sessionsActive.WithLabelValues(ServerLabel(server)).Dec()
	m.session.WithLabelValues(protocolVersion, ServerLabel(server)).Observe(d.Seconds())
	if m.afterSessionEnd != nil {
		m.afterSessionEnd()
	}
}

// InstrumentHTTP counts requests to h under the fixed route name, which
// must never be a raw path: paths are caller-controlled, and under server,
// the portcullis_server of the MCP server that serves the route (see
// [ServerLabel]) or empty for a route that is not an MCP endpoint.
// promhttp folds unknown HTTP methods into "unknown" and codes into the
// registered set.
func (m *Metrics) InstrumentHTTP(route, server string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route, LabelServer: server}
	counter := m.httpRequests.MustCurryWith(labels)
	duration := m.httpDuration.MustCurryWith(labels)
	return promhttp.InstrumentHandlerInFlight(m.httpInFlight,
		promhttp.InstrumentHandlerDuration(duration,
			promhttp.InstrumentHandlerCounter(counter, h)),
	)
}

// errorTypeForCode is the error_type label of a JSON-RPC error code.
func errorTypeForCode(code int64) string { return strconv.FormatInt(code, 10) }
