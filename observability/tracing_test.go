package observability

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestReadTraceEnv(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		enabled  bool
		protocol string
		errs     []string // substrings, one per expected problem
	}{
		{name: "nothing set: off", env: nil},
		{name: "endpoint: on over http", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, enabled: true, protocol: "http/protobuf"},
		{name: "traces endpoint and grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://collector:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, enabled: true, protocol: "grpc"},
		{name: "traces protocol wins", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, enabled: true, protocol: "http/protobuf"},
		{name: "exporter none beats an endpoint", env: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{name: "sdk disabled", env: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
		{name: "ratio sampler", env: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, enabled: true, protocol: "http/protobuf"},
		{
			name: "every problem at once",
			env: map[string]string{
				"OTEL_TRACES_EXPORTER":        "zipkin",
				"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
				"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318",
				"OTEL_TRACES_SAMPLER":         "sometimes",
				"OTEL_SDK_DISABLED":           "maybe",
				"OTEL_BSP_MAX_QUEUE_SIZE":     "-1",
			},
			errs: []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_TRACES_SAMPLER", "OTEL_SDK_DISABLED", "OTEL_BSP_MAX_QUEUE_SIZE"},
		},
		{name: "bad ratio", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, errs: []string{"OTEL_TRACES_SAMPLER_ARG"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env, err := readTraceEnv(func(k string) string { return tt.env[k] })
			if len(tt.errs) > 0 {
				if err == nil {
					t.Fatal("no error")
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tt.errs) {
					t.Errorf("%d problems reported, want %d:\n%v", len(lines), len(tt.errs), err)
				}
				for _, key := range tt.errs {
					if !strings.Contains(err.Error(), key) {
						t.Errorf("error does not name %s:\n%v", key, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if env.enabled != tt.enabled || (tt.enabled && env.protocol != tt.protocol) {
				t.Errorf("enabled %v protocol %q, want %v %q", env.enabled, env.protocol, tt.enabled, tt.protocol)
			}
		})
	}
}

func TestNewTracingOffByDefault(t *testing.T) {
	tr, err := NewTracing(t.Context(), TracingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled {
		t.Error("tracing on with no OTEL_* settings")
	}
	_, span := tr.Provider.Tracer("t").Start(t.Context(), "x")
	if span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
}

// blockingExporter holds every export until released, like a collector
// that does not answer.
type blockingExporter struct {
	release chan struct{}
	mu      sync.Mutex
	got     int
}

func (e *blockingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	select {
	case <-e.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	e.mu.Lock()
	e.got += len(spans)
	e.mu.Unlock()
	return nil
}

func (e *blockingExporter) Shutdown(context.Context) error { return nil }

// TestStuckCollectorDropsAndCounts shows that a collector that never answers
// costs a span nothing but a counted drop once the bounded queue is full:
// ending spans never blocks.
func TestStuckCollectorDropsAndCounts(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	exp := &blockingExporter{release: make(chan struct{})}
	tr, err := NewTracing(t.Context(), TracingOptions{
		Getenv:   func(k string) string { return map[string]string{"OTEL_BSP_MAX_QUEUE_SIZE": "4"}[k] },
		Metrics:  m,
		Exporter: exp,
	})
	if err != nil {
		t.Fatal(err)
	}
	tracer := tr.Provider.Tracer("t")
	for range 20 {
		_, span := tracer.Start(t.Context(), "call")
		span.End() // must not block: the exporter is stuck
	}
	if got := testutil.ToFloat64(m.spansDropped); got != 16 {
		t.Errorf("dropped = %v, want 16 (20 spans, queue of 4)", got)
	}
	close(exp.release)
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.spansExported); got != 4 {
		t.Errorf("exported = %v, want the 4 queued spans", got)
	}
	if exp.got != 4 {
		t.Errorf("exporter got %d spans, want 4", exp.got)
	}
}
