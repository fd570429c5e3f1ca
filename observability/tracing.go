package observability

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Tracing is the trace pipeline: a provider, the propagator that reads and
// writes W3C trace context, and Shutdown, which flushes what is queued.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Enabled is false when no exporter is configured; spans are then
	// no-ops, but incoming trace context still propagates.
	Enabled bool
	// Exporter describes where spans go ("otlp grpc", "otlp http/protobuf"),
	// for the start-up log line. Empty when disabled.
	Exporter string

	shutdown func(context.Context) error
}

// Shutdown flushes queued spans and stops the exporter. It is bounded by
// ctx and safe to call when tracing is disabled.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if t.shutdown == nil {
		return nil
	}
	return t.shutdown(ctx)
}

// TracingOptions configures [NewTracing].
type TracingOptions struct {
	// Getenv reads the OTEL_* settings. Nil means a function that finds
	// nothing (tracing off). The OTLP exporters themselves read the
	// process environment, so pass os.Getenv in production.
	Getenv func(string) string
	// ServiceVersion is service.version.
	ServiceVersion string
	// Metrics counts spans exported, failed and dropped. May be nil.
	Metrics *Metrics
	// Exporter replaces the OTLP exporter (tests). When set, tracing is on
	// whatever the environment says.
	Exporter sdktrace.SpanExporter
}

// defaultQueueSize is the batch span processor's queue size when
// OTEL_BSP_MAX_QUEUE_SIZE is not set (the SDK's default).
const defaultQueueSize = 2048

// NewTracing builds the trace pipeline from the standard OTEL_* variables:
//
//   - OTEL_SDK_DISABLED=true, OTEL_TRACES_EXPORTER=none, or no exporter
//     configured at all (neither OTEL_TRACES_EXPORTER nor an OTLP endpoint)
//     means no spans are exported;
//   - OTEL_TRACES_EXPORTER=otlp (or an OTLP endpoint) exports over OTLP,
//     http/protobuf unless OTEL_EXPORTER_OTLP[_TRACES]_PROTOCOL says grpc;
//   - OTEL_TRACES_SAMPLER[_ARG], OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
//     and OTEL_BSP_* work as the specification says.
//
// Invalid settings are reported together as one error, so a typo never
// silently turns tracing off. Export is asynchronous: a collector that is
// down or slow fills a bounded queue, after which spans are dropped and
// counted, and MCP calls never wait.
func NewTracing(ctx context.Context, o TracingOptions) (*Tracing, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	off := &Tracing{Provider: noop.NewTracerProvider(), Propagator: prop}

	cfg, err := readTraceEnv(getenv)
	if err != nil {
		return nil, err
	}
	exp := o.Exporter
	if exp == nil {
		if !cfg.enabled {
			return off, nil
		}
		if exp, err = newOTLPExporter(ctx, cfg.protocol); err != nil {
			return nil, err
		}
	}

	res, err := resource.New(ctx,
		// Ours first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override.
		resource.WithAttributes(semconv.ServiceName("portcullis"), semconv.ServiceVersion(o.ServiceVersion)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(),
	)
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}

	counted := &countingExporter{SpanExporter: exp, metrics: o.Metrics}
	bsp := sdktrace.NewBatchSpanProcessor(counted, sdktrace.WithMaxQueueSize(cfg.queueSize))
	proc := &boundedProcessor{SpanProcessor: bsp, pending: &counted.pending, limit: int64(cfg.queueSize), metrics: o.Metrics}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(proc),
		// The sampler comes from OTEL_TRACES_SAMPLER (checked above);
		// the SDK's default is parentbased_always_on.
	)
	return &Tracing{
		Provider:   tp,
		Propagator: prop,
		Enabled:    true,
		Exporter:   "otlp " + cfg.protocol,
		shutdown:   tp.Shutdown,
	}, nil
}

type traceEnv struct {
	enabled   bool
	protocol  string
	queueSize int
}

// readTraceEnv checks the OTEL_* variables this process acts on and reports
// every invalid one.
func readTraceEnv(getenv func(string) string) (traceEnv, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	env := traceEnv{protocol: "http/protobuf", queueSize: defaultQueueSize}

	disabled := false
	if v := strings.TrimSpace(getenv("OTEL_SDK_DISABLED")); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			bad("OTEL_SDK_DISABLED", "%q is not true or false", v)
		}
		disabled = b
	}

	endpoint := false
	for _, key := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := strings.TrimSpace(getenv(key))
		if v == "" {
			continue
		}
		endpoint = true
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key, "%q is not an http:// or https:// URL", v)
		}
	}

	switch v := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); v {
	case "":
		env.enabled = endpoint
	case "otlp":
		env.enabled = true
	case "none":
	default:
		bad("OTEL_TRACES_EXPORTER", "%q is not supported (want otlp or none)", v)
	}

	for _, key := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		switch v := strings.TrimSpace(getenv(key)); v {
		case "":
		case "grpc", "http/protobuf":
			env.protocol = v // the traces-specific key comes second and wins
		default:
			bad(key, "%q is not supported (want grpc or http/protobuf)", v)
		}
	}

	switch v := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))); v {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
	case "traceidratio", "parentbased_traceidratio":
		if arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG")); arg != "" {
			if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
				bad("OTEL_TRACES_SAMPLER_ARG", "%q is not a ratio between 0 and 1", arg)
			}
		}
	default:
		bad("OTEL_TRACES_SAMPLER", "%q is not a sampler (want always_on, always_off, traceidratio or their parentbased_ forms)", v)
	}

	if v := strings.TrimSpace(getenv("OTEL_BSP_MAX_QUEUE_SIZE")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			bad("OTEL_BSP_MAX_QUEUE_SIZE", "%q is not a positive integer", v)
		} else {
			env.queueSize = n
		}
	}
	if disabled {
		env.enabled = false
	}
	return env, errors.Join(errs...)
}

func newOTLPExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	// Both exporters read their endpoint, headers, TLS, compression and
	// timeout from OTEL_EXPORTER_OTLP_* themselves.
	var (
		exp sdktrace.SpanExporter
		err error
	)
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP %s trace exporter: %w", protocol, err)
	}
	return exp, nil
}

// boundedProcessor bounds the spans waiting for export. The batch processor
// drops silently when its queue is full; this wrapper drops first, at the
// same bound (counting spans being exported too), so every drop is counted.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	pending *atomic.Int64
	limit   int64
	metrics *Metrics
}

func (p *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return // the batch processor ignores these too
	}
	if p.pending.Add(1) > p.limit {
		p.pending.Add(-1)
		if p.metrics != nil {
			p.metrics.spansDropped.Inc()
		}
		return
	}
	p.SpanProcessor.OnEnd(s)
}

// countingExporter counts spans exported and failed, and releases them from
// the bounded processor's count.
type countingExporter struct {
	sdktrace.SpanExporter
	pending atomic.Int64
	metrics *Metrics
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.pending.Add(-int64(len(spans)))
	if e.metrics != nil {
		if err != nil {
			e.metrics.spansFailed.Add(float64(len(spans)))
		} else {
			e.metrics.spansExported.Add(float64(len(spans)))
		}
	}
	return err
}
