package observability

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// TestOperationHistogramIsNative checks that the operation histogram
// resolves sub-millisecond durations: it is a native histogram (what a
// protobuf scrape returns) and its classic buckets start below 10 ms while
// keeping every boundary the conventions advise.
func TestOperationHistogramIsNative(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{})
	for _, d := range []time.Duration{150 * time.Microsecond, 300 * time.Microsecond, 40 * time.Millisecond} {
		m.ObserveOperation(Operation{Method: "tools/call", Tool: "echo", Transport: TransportTCP, Duration: d})
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "mcp_server_operation_duration_seconds" {
			continue
		}
		h := f.GetMetric()[0].GetHistogram()
		if h.Schema == nil || len(h.GetPositiveSpan()) == 0 {
			t.Errorf("no native histogram: schema %v, %d positive spans", h.Schema, len(h.GetPositiveSpan()))
		}
		var le []float64
		below1ms := uint64(0)
		for _, b := range h.GetBucket() {
			le = append(le, b.GetUpperBound())
			if b.GetUpperBound() == 0.0005 {
				below1ms = b.GetCumulativeCount()
			}
		}
		if below1ms != 2 {
			t.Errorf("the 0.5 ms bucket holds %d observations, want the 2 sub-millisecond ones (buckets %v)", below1ms, le)
		}
		for _, want := range DurationBuckets {
			found := false
			for _, b := range le {
				found = found || b == want
			}
			if !found {
				t.Errorf("the conventions' boundary %v is missing from %v", want, le)
			}
		}
		return
	}
	t.Fatal("no mcp_server_operation_duration_seconds in the registry")
}
