package observability

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Upstreams instruments requests to upstream MCP servers (package
// upstream): its methods have the signatures of the upstream package's
// hooks, so the root package wires them without upstream importing Prometheus or
// OpenTelemetry. Build it with [NewUpstreams].
type Upstreams struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	restarts *prometheus.CounterVec
	up       *prometheus.GaugeVec
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	now      func() time.Time
}

// NewUpstreams registers the upstream series on m's registry. Tracing may
// be nil (no spans).
func NewUpstreams(m *Metrics, t *Tracing) *Upstreams {
	u := &Upstreams{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "portcullis_upstream_request_duration_seconds",
			Help:    "Duration of requests to upstream MCP servers (tools/call, resources/read, prompts/get), by upstream and method.",
			Buckets: DurationBuckets,
		}, []string{"upstream", "mcp_method_name"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_request_errors_total",
			Help: "Requests to upstream MCP servers that failed, by upstream and kind: unavailable, transport, timeout, canceled, protocol, tool_error.",
		}, []string{"upstream", "kind"}),
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_upstream_restarts_total",
			Help: "Reconnections to upstream MCP servers (for stdio, process restarts) after a failure or exit, by upstream.",
		}, []string{"upstream"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_upstream_up",
			Help: "1 when the upstream MCP server is connected and its lists are served, else 0.",
		}, []string{"upstream"}),
		tracer: noop.NewTracerProvider().Tracer(""),
		prop:   propagation.TraceContext{},
		now:    time.Now,
	}
	if t != nil && t.Provider != nil {
		u.tracer = t.Provider.Tracer("github.com/portcullis-mcp/portcullis/upstream")
	}
	if t != nil && t.Propagator != nil {
		u.prop = t.Propagator
	}
	m.reg.MustRegister(u.duration, u.errors, u.restarts, u.up)
	return u
}

// StartCall starts a CLIENT span for a request to an upstream and returns
// the function that ends it and records the duration and, for a non-empty
// kind, the error.
func (u *Upstreams) StartCall(ctx context.Context, upstream, method, target string) (context.Context, func(kind string)) {
	attrs := []attribute.KeyValue{attrMCPMethodName.String(method), attribute.String("portcullis.upstream", upstream)}
	switch method {
	case "tools/call":
		attrs = append(attrs, attrGenAIToolName.String(target))
	case "prompts/get":
		attrs = append(attrs, attrGenAIPromptName.String(target))
	case "resources/read":
		attrs = append(attrs, attrMCPResourceURI.String(target))
	}
	name := method + " " + target
	if method == "resources/read" || target == "" {
		name = method // URIs may be unbounded; task requests name no target
	}
	ctx, span := u.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	start := u.now()
	return ctx, func(kind string) {
		u.duration.WithLabelValues(upstream, method).Observe(u.now().Sub(start).Seconds())
		if kind != "" {
			u.errors.WithLabelValues(upstream, kind).Inc()
			span.SetAttributes(attribute.String("error.type", kind))
			span.SetStatus(codes.Error, kind)
		}
		span.End()
	}
}

// Inject writes the trace context of ctx into meta (traceparent,
// tracestate, baggage), as params._meta carries it in MCP.
func (u *Upstreams) Inject(ctx context.Context, meta map[string]any) {
	c := propagation.MapCarrier{}
	u.prop.Inject(ctx, c)
	for k, v := range c {
		meta[k] = v
	}
}

// UpstreamErrorKinds are the values of portcullis_upstream_request_errors_total's
// kind label.
var UpstreamErrorKinds = []string{"unavailable", "transport", "timeout", "canceled", "protocol", "tool_error", "connect_required"}

// Declare creates the series of an upstream before anything happens to it:
// down, no restart, no error of any kind, no request. A panel or alert then
// reads zero rather than nothing for an upstream that is configured but
// has not failed yet, and rate() and increase() see the first event.
func (u *Upstreams) Declare(upstream string) {
	u.up.WithLabelValues(upstream).Set(0)
	u.restarts.WithLabelValues(upstream)
	for _, kind := range UpstreamErrorKinds {
		u.errors.WithLabelValues(upstream, kind)
	}
	u.duration.WithLabelValues(upstream, "tools/call")
}

// Restarted counts a reconnection.
func (u *Upstreams) Restarted(upstream string) { u.restarts.WithLabelValues(upstream).Inc() }

// Up sets the up gauge.
func (u *Upstreams) Up(upstream string, up bool) {
	v := 0.0
	if up {
		v = 1
	}
	u.up.WithLabelValues(upstream).Set(v)
}
