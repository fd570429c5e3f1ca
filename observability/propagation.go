package observability

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// headerCarrier is [propagation.HeaderCarrier] for the W3C fields that
// this server propagates. http.Header canonicalizes the lower-case names
// that propagators use ("traceparent") into a new string on every lookup;
// headerCarrier names them canonically, so a lookup allocates nothing.
type headerCarrier http.Header

// canonicalField is key in canonical header form, without allocating for
// the W3C Trace Context and Baggage fields. Other keys are returned as
// they are: http.Header canonicalizes them.
func canonicalField(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return key
}

// Get returns the first value of the field key.
func (h headerCarrier) Get(key string) string {
	return http.Header(h).Get(canonicalField(key))
}

// Set replaces the field key's values with value.
func (h headerCarrier) Set(key, value string) {
	http.Header(h).Set(canonicalField(key), value)
}

// Keys lists the header's field names.
func (h headerCarrier) Keys() []string {
	return propagation.HeaderCarrier(h).Keys()
}

// headerPropagator hands p a [headerCarrier] where it would get a
// [propagation.HeaderCarrier], for instrumentation that builds the carrier
// itself (otelhttp).
type headerPropagator struct{ propagation.TextMapPropagator }

// Extract reads the trace context of carrier into ctx.
func (p headerPropagator) Extract(ctx context.Context, carrier propagation.TextMapCarrier) context.Context {
	if h, ok := carrier.(propagation.HeaderCarrier); ok {
		carrier = headerCarrier(h)
	}
	return p.TextMapPropagator.Extract(ctx, carrier)
}

// Inject writes the trace context of ctx into carrier.
func (p headerPropagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	if h, ok := carrier.(propagation.HeaderCarrier); ok {
		carrier = headerCarrier(h)
	}
	p.TextMapPropagator.Inject(ctx, carrier)
}
