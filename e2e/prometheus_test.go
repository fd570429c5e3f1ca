//go:build e2e

package e2e

// End-to-end metrics: a real Prometheus
// (Debian's package, installed by scripts/install-prometheus.sh) scrapes
// the binary's metrics listener every second under job "portcullis", and
// after a few tool calls its HTTP query API returns the series the
// dashboard and the alert rules are written against.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// promSample is one element of an instant-vector query result.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// prometheus is a running Prometheus server.
type prometheus struct {
	URL string // http://127.0.0.1:PORT
}

// startPrometheus runs Prometheus with one scrape job, "portcullis",
// scraping target (host:port) every second, and waits until it is ready.
// flags are added to its command line (e.g. a feature flag).
func startPrometheus(t *testing.T, target string, flags ...string) *prometheus {
	t.Helper()
	bin := obsBinary(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: portcullis
    static_configs:
      - targets: [%q]
`, target)
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startOnFreePorts(t, 1, func(addrs []string) (*process, error) {
		args := append([]string{
			"--config.file=" + path,
			"--web.listen-address=" + addrs[0],
			"--storage.tsdb.path=" + filepath.Join(t.TempDir(), "data"),
		}, flags...)
		return tryStartProcess(t, "prometheus", "Server is ready to receive web requests", bin, args...)
	})[0]
	return &prometheus{URL: "http://" + addr}
}

// query runs an instant query and returns the samples.
func (p *prometheus) query(t *testing.T, q string) []promSample {
	t.Helper()
	return p.queryAt(t, q, time.Time{})
}

// queryAt runs an instant query evaluated at the given time (zero: now)
// and returns the samples.
func (p *prometheus) queryAt(t *testing.T, q string, at time.Time) []promSample {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	u := p.URL + "/api/v1/query?query=" + url.QueryEscape(q)
	if !at.IsZero() {
		u += fmt.Sprintf("&time=%.3f", float64(at.UnixMilli())/1000)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("query %s: status %d, not JSON: %v\n%s", q, resp.StatusCode, err, body)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s: %s", q, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		t.Fatalf("query %s: result type %q, want vector", q, r.Data.ResultType)
	}
	return r.Data.Result
}

// await polls query q until it returns at least one sample or timeout
// passes, then fails the test with what was there and the scrape status.
func (p *prometheus) await(t *testing.T, q string, timeout time.Duration) []promSample {
	t.Helper()
	var res []promSample
	if !poll(timeout, 200*time.Millisecond, func() bool {
		res = p.query(t, q)
		return len(res) > 0
	}) {
		t.Fatalf("Prometheus returned nothing for\n  %s\nwithin %v. Scrape targets: %s", q, timeout, p.targets(t))
	}
	return res
}

// targets summarizes /api/v1/targets for failure messages.
func (p *prometheus) targets(t *testing.T) string {
	resp, err := http.Get(p.URL + "/api/v1/targets")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var r struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL, Health, LastError string
				Labels                       map[string]string
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, a := range r.Data.ActiveTargets {
		fmt.Fprintf(&b, "\n  %s job=%s health=%s lastError=%q", a.ScrapeURL, a.Labels["job"], a.Health, a.LastError)
	}
	return b.String()
}

func TestPrometheusScrapesMetrics(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=core"})
	metricsURL := srv.MetricsURL(t)
	prom := startPrometheus(t, strings.TrimSuffix(strings.TrimPrefix(metricsURL, "http://"), "/metrics"))

	// A successful call, a tool error (the tool ran and returned isError),
	// and a call of a tool that does not exist.
	h := initSession(t, http.DefaultClient, srv.MCPURL())
	if res := callTool(t, srv.MCPURL(), h, 2, "echo", `{"text":"hello"}`, ""); res.Error != nil {
		t.Fatalf("echo: %+v", res.Error)
	}
	res := callTool(t, srv.MCPURL(), h, 3, "calculator", `{"operation":"divide","a":1,"b":0}`, "")
	var tr toolResult
	if res.Error != nil || json.Unmarshal(res.Result, &tr) != nil || !tr.IsError {
		t.Fatalf("calculator divide by zero: want a result with isError, got %+v %s", res.Error, res.Result)
	}
	unknown := callTool(t, srv.MCPURL(), h, 4, "no_such_tool", `{}`, "")
	unknownType := "tool_error"
	if unknown.Error != nil {
		unknownType = fmt.Sprint(unknown.Error.Code)
	}

	const wait = 30 * time.Second
	up := prom.await(t, `up{job="portcullis"} == 1`, wait)
	if len(up) != 1 {
		t.Errorf(`up{job="portcullis"} == 1: %d series, want 1: %v`, len(up), up)
	}

	for _, tt := range []struct {
		name  string
		query string
	}{
		{name: "successful call", query: `mcp_server_operation_duration_seconds_count{job="portcullis", mcp_method_name="tools/call", gen_ai_tool_name="echo", error_type=""} >= 1`},
		{name: "tool error", query: `mcp_server_operation_duration_seconds_count{job="portcullis", mcp_method_name="tools/call", gen_ai_tool_name="calculator", error_type="tool_error"} >= 1`},
		{name: "unknown tool", query: fmt.Sprintf(`mcp_server_operation_duration_seconds_count{job="portcullis", mcp_method_name="tools/call", gen_ai_tool_name="_OTHER", error_type=%q} >= 1`, unknownType)},
		{name: "initialize", query: `mcp_server_operation_duration_seconds_count{job="portcullis", mcp_method_name="initialize", gen_ai_tool_name="", error_type=""} >= 1`},
		{name: "semconv buckets", query: `mcp_server_operation_duration_seconds_bucket{job="portcullis", mcp_method_name="tools/call", gen_ai_tool_name="echo", le="0.01"}`},
		{name: "legacy session open", query: `portcullis_mcp_sessions_active{job="portcullis"} >= 1`},
		{name: "HTTP by route", query: `portcullis_http_requests_total{job="portcullis", route="mcp", code="200"} >= 4`},
		{name: "in flight", query: `portcullis_http_requests_in_flight{job="portcullis"}`},
		{name: "auth allowed", query: `portcullis_auth_requests_total{job="portcullis", outcome="allowed", reason=""}`},
		{name: "spans", query: `portcullis_otel_spans_total{job="portcullis", outcome="dropped"}`},
		{name: "build info", query: `portcullis_build_info{job="portcullis", version!="", revision!="", go_version=~"go1\\..+"} == 1`},
		{name: "Go runtime", query: `go_goroutines{job="portcullis"} > 0`},
		{name: "process", query: `process_resident_memory_bytes{job="portcullis"} > 0`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range prom.await(t, tt.query, wait) {
				if s.Metric["instance"] == "" {
					t.Errorf("%s: series without an instance label: %v", tt.query, s.Metric)
				}
			}
		})
	}

	// Rates need two scrapes that differ: the echo series exists now, so
	// one more call makes the dashboard's latency query return a number.
	if res := callTool(t, srv.MCPURL(), h, 5, "echo", `{"text":"again"}`, ""); res.Error != nil {
		t.Fatalf("echo: %+v", res.Error)
	}
	p99 := prom.await(t, `histogram_quantile(0.99, sum by (le, gen_ai_tool_name) (rate(mcp_server_operation_duration_seconds_bucket{job="portcullis", mcp_method_name="tools/call", gen_ai_tool_name="echo"}[1m]))) > 0`, wait)
	if got := p99[0].Metric["gen_ai_tool_name"]; got != "echo" {
		t.Errorf("p99 by tool: gen_ai_tool_name = %q, want echo", got)
	}
}
