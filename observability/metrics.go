package observability

import (
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

// Other is the value a label takes when the real value is not one the
// server knows (an unregistered tool, an unknown method): a caller cannot
// create series by sending new names. It is the OpenTelemetry convention's
// spelling.
const Other = "_OTHER"

// BuildInfo labels portcullis_build_info.
type BuildInfo struct {
	Version  string
	Revision string
}

// Metrics holds every Prometheus series Portcullis exports. It registers on
// the registry it is given, never on the global one, so tests and
// embedders get exactly these series.
type Metrics struct {
	reg *prometheus.Registry

	operation      *prometheus.HistogramVec
	session        *prometheus.HistogramVec
	sessionsActive prometheus.Gauge
	authRequests   *prometheus.CounterVec
	httpInFlight   prometheus.Gauge
	httpRequests   *prometheus.CounterVec
	httpDuration   *prometheus.HistogramVec
	spans          *prometheus.CounterVec
	spansExported  prometheus.Counter
	spansFailed    prometheus.Counter
	spansDropped   prometheus.Counter
	authAllowed    prometheus.Counter
	toolDenials    *prometheus.CounterVec
	limitCounters
	conns connCounters
}

// NewMetrics creates the series on reg, with the Go runtime and process
// collectors, and sets portcullis_build_info.
func NewMetrics(reg *prometheus.Registry, b BuildInfo) *Metrics {
	m := &Metrics{
		reg: reg,
		operation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_operation_duration_seconds",
			Help:    "Duration of MCP requests handled by the server, by method, tool and error type (OpenTelemetry MCP semantic conventions).",
			Buckets: DurationBuckets,
		}, []string{"mcp_method_name", "gen_ai_tool_name", "error_type"}),
		session: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcp_server_session_duration_seconds",
			Help:    "Duration of legacy (stateful) MCP sessions, from initialize to close.",
			Buckets: DurationBuckets,
		}, []string{"mcp_protocol_version"}),
		sessionsActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "portcullis_mcp_sessions_active",
			Help: "Legacy (stateful) MCP sessions open now, initialized or not.",
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
			Help: "HTTP requests served, by route name, method and status code.",
		}, []string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portcullis_http_request_duration_seconds",
			Help:    "HTTP request duration until the handler returned, by route name and method.",
			Buckets: DurationBuckets,
		}, []string{"route", "method"}),
		toolDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_tool_calls_denied_total",
			Help: "tools/call requests answered as a call of an unknown tool, by reason: policy (the per-tool policy refused the caller a registered tool, named by tool) or unknown_tool (no tool of that name; tool is _OTHER).",
		}, []string{"reason", "tool"}),
		spans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_otel_spans_total",
			Help: "Spans that left the trace pipeline: exported, failed (the exporter returned an error) or dropped (the export queue was full).",
		}, []string{"outcome"}),
	}
	m.spansExported = m.spans.WithLabelValues("exported")
	m.spansFailed = m.spans.WithLabelValues("failed")
	m.spansDropped = m.spans.WithLabelValues("dropped")
	m.authAllowed = m.authRequests.WithLabelValues("allowed", "")
	m.toolDenials.WithLabelValues(ToolDenialUnknownTool, Other)

	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "portcullis_build_info",
		Help:        "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "go_version": runtime.Version()},
	})
	build.Set(1)

	m.limitCounters = newLimitCounters()
	m.conns = m.limitCounters.forConns()
	reg.MustRegister(m.rateLimited, m.limitRejections, m.idleClosed)
	reg.MustRegister(
		m.operation, m.session, m.sessionsActive, m.authRequests, m.toolDenials,
		m.httpInFlight, m.httpRequests, m.httpDuration, m.spans, build,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// Handler serves the registry in the Prometheus exposition formats, with
// gzip when the scraper asks for it. Errors gathering are logged and
// counted in promhttp_metric_handler_errors_total.
func (m *Metrics) Handler(logger *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelError),
		Registry:          m.reg,
		EnableOpenMetrics: true,
	})
}

// ObserveOperation records one MCP request. method must already be bounded
// (see [MethodLabel]); tool is empty except for tools/call, where it must
// be a registered tool's name or [Other]; errorType is empty on success.
func (m *Metrics) ObserveOperation(method, tool, errorType string, d time.Duration) {
	m.operation.WithLabelValues(method, tool, errorType).Observe(d.Seconds())
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
)

// ToolDenied counts one tools/call answered as a call of an unknown tool.
// reason is [ToolDenialPolicy] or [ToolDenialUnknownTool] (any other value
// is counted as [Other]); tool must be a registered tool's name or [Other],
// as for [Metrics.ObserveOperation].
func (m *Metrics) ToolDenied(reason, tool string) {
	if reason != ToolDenialPolicy && reason != ToolDenialUnknownTool {
		reason = Other
	}
	m.toolDenials.WithLabelValues(reason, tool).Inc()
}

// sessionStarted and sessionEnded track legacy sessions.
func (m *Metrics) sessionStarted() { m.sessionsActive.Inc() }

func (m *Metrics) sessionEnded(protocolVersion string, d time.Duration) {
	m.sessionsActive.Dec()
	m.session.WithLabelValues(protocolVersion).Observe(d.Seconds())
}

// InstrumentHTTP counts requests to h under the fixed route name, which
// must never be a raw path: paths are caller-controlled. promhttp folds
// unknown HTTP methods into "unknown" and codes into the registered set.
func (m *Metrics) InstrumentHTTP(route string, h http.Handler) http.Handler {
	labels := prometheus.Labels{"route": route}
	counter := m.httpRequests.MustCurryWith(labels)
	duration := m.httpDuration.MustCurryWith(labels)
	return promhttp.InstrumentHandlerInFlight(m.httpInFlight,
		promhttp.InstrumentHandlerDuration(duration,
			promhttp.InstrumentHandlerCounter(counter, h)),
	)
}

// errorTypeForCode is the error_type label of a JSON-RPC error code.
func errorTypeForCode(code int64) string { return strconv.FormatInt(code, 10) }
