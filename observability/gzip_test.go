package observability

import (
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestMetricsHandlerGzip(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{Version: "test"})
	h := m.Handler(slog.New(slog.DiscardHandler))
	for _, tc := range []struct {
		accept string // Accept-Encoding; "" sends none
		gzip   bool
	}{
		{"", false},
		{"gzip", true},
		{"GZIP", true},
		{"x-gzip", true},
		{"*", true},
		{"br, gzip;q=0.5", true},
		{"gzip;q=1.0, identity; q=0.5, *;q=0", true},
		{"identity", false},
		{"gzip;q=0", false},
		{"gzip; q=0.000", false},
		{"*;q=0", false},
		{"deflate, br", false},
		{"gzipx", false},
		{"gzip;q=0, *", false},
		{"identity, *;q=0.1", true},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			for range 2 { // the second scrape reuses the pooled writer
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				if tc.accept != "" {
					req.Header.Set("Accept-Encoding", tc.accept)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				res := rec.Result()
				if res.StatusCode != http.StatusOK {
					t.Fatalf("status %d", res.StatusCode)
				}
				if got := res.Header.Get("Vary"); got != "Accept-Encoding" {
					t.Errorf("Vary %q, want Accept-Encoding", got)
				}
				body := io.Reader(res.Body)
				if enc := res.Header.Get("Content-Encoding"); (enc == "gzip") != tc.gzip {
					t.Fatalf("Content-Encoding %q, want gzip %v", enc, tc.gzip)
				}
				if tc.gzip {
					if res.Header.Get("Content-Length") != "" {
						t.Errorf("a gzipped response has the Content-Length %s", res.Header.Get("Content-Length"))
					}
					zr, err := gzip.NewReader(res.Body)
					if err != nil {
						t.Fatal(err)
					}
					body = zr
				}
				b, err := io.ReadAll(body)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(b), "\nportcullis_build_info{") {
					t.Errorf("the body has no portcullis_build_info:\n%.500s", b)
				}
			}
		})
	}
}

// promhttp takes back Content-Encoding for an error message (here: a
// gathering error), which then goes uncompressed, matching its headers.
func TestMetricsHandlerGzipError(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{Version: "test"})
	reg.MustRegister(failingCollector{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	m.Handler(slog.New(slog.DiscardHandler)).ServeHTTP(rec, req)
	if rec.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", rec.Code)
	}
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Fatalf("Content-Encoding %q, want none", enc)
	}
	if b := rec.Body.String(); !strings.Contains(b, "collection failed") {
		t.Errorf("body %q does not give the error", b)
	}
}

type failingCollector struct{}

var failingDesc = prometheus.NewDesc("test_failing", "A collector that fails.", nil, nil)

func (failingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- failingDesc }
func (failingCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.NewInvalidMetric(failingDesc, errCollect)
}

var errCollect = &collectError{}

type collectError struct{}

func (*collectError) Error() string { return "collection failed" }
