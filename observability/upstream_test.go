package observability

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func TestUpstreams(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	u := NewUpstreams(m, &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, Enabled: true})

	ctx, done := u.StartCall(context.Background(), "tickets", "tools/call", "search")
	meta := map[string]any{}
	u.Inject(ctx, meta)
	parent, _ := meta["traceparent"].(string)
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !strings.Contains(parent, sc.TraceID().String()) || !strings.Contains(parent, sc.SpanID().String()) {
		t.Errorf("Inject wrote traceparent %q, want the upstream span %s/%s", parent, sc.TraceID(), sc.SpanID())
	}
	done("transport")
	_, ok := u.StartCall(context.Background(), "tickets", "prompts/get", "p")
	ok("")
	u.Restarted("tickets")
	u.Up("tickets", true)

	spans := exp.GetSpans()
	if len(spans) != 2 || spans[0].Name != "tools/call search" || spans[0].SpanKind != trace.SpanKindClient || spans[0].Status.Description != "transport" {
		t.Fatalf("spans = %+v, want a CLIENT span tools/call search with status transport, then prompts/get p", spans)
	}
	for name, c := range map[string]struct{ got, want float64 }{
		"transport errors": {testutil.ToFloat64(u.errors.WithLabelValues("tickets", "transport")), 1},
		"error series":     {float64(testutil.CollectAndCount(u.errors)), 1}, // a success counts no error
		"duration series":  {float64(testutil.CollectAndCount(u.duration)), 2},
		"restarts":         {testutil.ToFloat64(u.restarts.WithLabelValues("tickets")), 1},
		"up":               {testutil.ToFloat64(u.up.WithLabelValues("tickets")), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
}
