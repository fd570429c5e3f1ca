package observability

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/portcullis-mcp/portcullis/internal/audit"
)

// AuditMetrics count what the audit recorder's sinks take and what they
// miss.
type AuditMetrics struct {
	events  *prometheus.CounterVec
	dropped *prometheus.CounterVec
	up      *prometheus.GaugeVec
}

// NewAuditMetrics registers the audit metrics on m's registry, with the
// series of each of sinks at zero (and up) from the start.
func NewAuditMetrics(m *Metrics, sinks []string) *AuditMetrics {
	a := &AuditMetrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_audit_events_total",
			Help: "Audit events a sink took, by sink.",
		}, []string{"sink"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_audit_events_dropped_total",
			Help: "Audit events lost because a sink's queue was full (the sink down or slow for longer than its queue holds), by sink.",
		}, []string{"sink"}),
		up: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "portcullis_audit_sink_up",
			Help: "1 while a sink's last write succeeded, 0 while it fails (its queue then fills, and events are dropped once it is full).",
		}, []string{"sink"}),
	}
	m.reg.MustRegister(a.events, a.dropped, a.up)
	for _, s := range sinks {
		a.events.WithLabelValues(s)
		a.dropped.WithLabelValues(s)
		a.up.WithLabelValues(s).Set(1)
	}
	return a
}

// Hooks returns the recorder hooks that count into a, and log a sink's
// failure once when it starts and once when it ends (log may be nil).
func (a *AuditMetrics) Hooks(log func(sink string, err error)) audit.Hooks {
	var mu sync.Mutex
	failing := map[string]bool{}
	return audit.Hooks{
		Written: func(sink string, n int) { a.events.WithLabelValues(sink).Add(float64(n)) },
		Dropped: func(sink string, n int) { a.dropped.WithLabelValues(sink).Add(float64(n)) },
		Failed: func(sink string, err error) {
			a.up.WithLabelValues(sink).Set(0)
			mu.Lock()
			first := !failing[sink]
			failing[sink] = true
			mu.Unlock()
			if first && log != nil {
				log(sink, err)
			}
		},
		Recovered: func(sink string) {
			a.up.WithLabelValues(sink).Set(1)
			mu.Lock()
			delete(failing, sink)
			mu.Unlock()
			if log != nil {
				log(sink, nil)
			}
		},
	}
}

// AuditOTLP is an audit sink that sends each event as an OpenTelemetry
// log record over OTLP/HTTP: its body the event's JSON, its event name
// the event's type, its severity info, or warn for refusals and
// failures, its trace and span ids the event's, and the resource Portcullis's
// (service.name, OTEL_RESOURCE_ATTRIBUTES).
type AuditOTLP struct {
	exp    *otlploghttp.Exporter
	lp     *sdklog.LoggerProvider
	logger otellog.Logger
	coll   *collector
}

// collector is the log processor that keeps what the logger emits, for
// the sink to export as one batch.
type collector struct{ records []sdklog.Record }

func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.records = append(c.records, r.Clone())
	return nil
}
func (c *collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }
func (c *collector) Shutdown(context.Context) error                         { return nil }
func (c *collector) ForceFlush(context.Context) error                       { return nil }

// NewAuditOTLP returns an OTLP sink posting to endpoint (a URL such as
// http://collector:4318/v1/logs), or, when it is empty, where the
// OTEL_EXPORTER_OTLP_LOGS_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT
// variables say (the exporter reads the process environment).
func NewAuditOTLP(ctx context.Context, endpoint, serviceVersion string) (*AuditOTLP, error) {
	var opts []otlploghttp.Option
	if endpoint != "" {
		opts = append(opts, otlploghttp.WithEndpointURL(endpoint))
	}
	// The recorder retries a failed batch itself, with its own backoff.
	opts = append(opts, otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	exp, err := otlploghttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("audit: otlp: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("portcullis"), semconv.ServiceVersion(serviceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	coll := &collector{}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(coll))
	return &AuditOTLP{exp: exp, lp: lp, coll: coll, logger: lp.Logger("github.com/portcullis-mcp/portcullis/audit")}, nil
}

// Name implements audit.Sink.
func (s *AuditOTLP) Name() string { return audit.SinkOTLP }

// Write implements audit.Sink: the events as one export.
func (s *AuditOTLP) Write(ctx context.Context, events []*audit.Event) error {
	s.coll.records = s.coll.records[:0]
	for _, e := range events {
		var r otellog.Record
		r.SetTimestamp(e.Time)
		r.SetObservedTimestamp(e.Time)
		r.SetEventName(e.Type)
		r.SetSeverity(otellog.SeverityInfo)
		r.SetSeverityText("INFO")
		if e.Outcome != audit.OutcomeSuccess {
			r.SetSeverity(otellog.SeverityWarn)
			r.SetSeverityText("WARN")
		}
		r.SetBody(attribute.StringValue(string(e.JSON())))
		r.AddAttributes(
			attribute.String("portcullis.audit.schema", audit.Schema),
			attribute.String("portcullis.audit.id", e.ID),
			attribute.String("portcullis.audit.outcome", e.Outcome),
		)
		emitCtx := ctx
		tid, terr := trace.TraceIDFromHex(e.TraceID)
		sid, serr := trace.SpanIDFromHex(e.SpanID)
		if terr == nil && serr == nil {
			emitCtx = trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
		}
		s.logger.Emit(emitCtx, r)
	}
	return s.exp.Export(ctx, s.coll.records)
}

// Close implements audit.Sink.
func (s *AuditOTLP) Close() error {
	ctx := context.Background()
	return errors.Join(s.lp.Shutdown(ctx), s.exp.Shutdown(ctx))
}
