package doctor

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUpstreams checks the upstream report read from the metrics listener:
// one check per upstream, connected or not, with its restarts and failed
// requests, and the cases where there is nothing to read.
func TestUpstreams(t *testing.T) {
	const exposition = `# TYPE portcullis_upstream_up gauge
portcullis_upstream_up{upstream="files"} 1
portcullis_upstream_up{upstream="tickets"} 0
# TYPE portcullis_upstream_restarts_total counter
portcullis_upstream_restarts_total{upstream="files"} 0
portcullis_upstream_restarts_total{upstream="tickets"} 3
# TYPE portcullis_upstream_request_errors_total counter
portcullis_upstream_request_errors_total{upstream="tickets",kind="transport"} 2
portcullis_upstream_request_errors_total{upstream="tickets",kind="timeout"} 1
portcullis_upstream_request_errors_total{upstream="files",kind="timeout"} 0
`
	type want struct {
		check  string
		status Status
		detail string
	}
	tests := []struct {
		name    string
		metrics http.HandlerFunc // nil: no --metrics-url
		want    []want
	}{
		{name: "no metrics URL", want: []want{{CheckUpstreams, Skip, "needs --metrics-url"}}},
		{
			name:    "two upstreams",
			metrics: func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(exposition)) },
			want: []want{
				{"upstream files", Pass, "connected; 0 restarts, 0 failed requests"},
				{"upstream tickets", Warn, "not connected (its tools, resources and prompts are not served); 3 restarts, 3 failed requests"},
			},
		},
		{
			name: "no upstreams",
			metrics: func(w http.ResponseWriter, _ *http.Request) {
				w.Write([]byte("# TYPE go_goroutines gauge\ngo_goroutines 7\n"))
			},
			want: []want{{CheckUpstreams, Pass, "none configured"}},
		},
		{
			name:    "metrics listener fails",
			metrics: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
			want:    []want{{CheckUpstreams, Fail, "status 500"}},
		},
		{
			name:    "not the text format",
			metrics: func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>login</html>\n")) },
			want:    []want{{CheckUpstreams, Fail, "not the Prometheus text format"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{URL: "http://127.0.0.1:1/mcp"}
			if tt.metrics != nil {
				ts := httptest.NewServer(tt.metrics)
				defer ts.Close()
				o.MetricsURL = ts.URL + "/metrics"
			}
			rep := Run(t.Context(), o)
			for _, w := range tt.want {
				c, ok := rep.Check(w.check)
				if !ok {
					t.Fatalf("no %q check in %+v", w.check, rep.Checks)
				}
				if c.Status != w.status || !strings.Contains(c.Detail, w.detail) {
					t.Errorf("%s = %s %q, want %s containing %q", w.check, c.Status, c.Detail, w.status, w.detail)
				}
			}
		})
	}
}
