//go:build e2e

package e2e

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// upstreamDelay is how long the fake weather upstream takes to answer a
// search: every weather call takes at least this long on the server.
const upstreamDelay = 40 * time.Millisecond

// window is the range the dashboard's $__rate_interval stands for here:
// longer than the test, so each rate covers all of its traffic.
const window = 2 * time.Minute

// TestDashboardPanelsTellTheTruth drives known traffic through the binary
// (fast calls, calls that wait on a slow upstream, tool errors, and
// requests refused before the SDK: a body over the limit, a parse error,
// an unknown method, an unsupported protocol version), lets two real
// Prometheus servers scrape it (one ingesting native histograms, one
// classic), and checks what each MCP panel of the dashboard, with its
// query read from dashboard.json, says: rates and error ratios match the
// traffic, and latency quantiles lie within one bucket of the traffic's
// real percentiles. Every other panel's query must run.
func TestDashboardPanelsTellTheTruth(t *testing.T) {
	up := newFakeOpenMeteo(t, func(r *http.Request) {
		if r.URL.Path == "/v1/search" {
			time.Sleep(upstreamDelay) // the upstream's latency, not a wait for a condition
		}
	})
	const maxBody = 64 << 10
	srv := startServer(t, []string{
		"PORTCULLIS_TOOLS_TOOLSETS=core,workshop",
		"PORTCULLIS_TOOLS_WEATHER_BASE_URL=" + up.URL,
		"PORTCULLIS_TOOLS_WEATHER_GEOCODING_URL=" + up.URL,
		"PORTCULLIS_MCP_MAX_BODY_BYTES=" + strconv.Itoa(maxBody),
	})
	target := strings.TrimSuffix(strings.TrimPrefix(srv.MetricsURL(t), "http://"), "/metrics")
	proms := []struct {
		name string
		prom *prometheus
		// count is a query for the operation count of a series selector,
		// in the form this Prometheus stores it.
		count  func(sel string) string
		bucket bucketBounds
	}{
		{"classic", startPrometheus(t, target),
			func(sel string) string { return "mcp_server_operation_duration_seconds_count{" + sel + "}" }, classicBounds},
		{"native", startPrometheus(t, target, "--enable-feature=native-histograms"),
			func(sel string) string { return "histogram_count(mcp_server_operation_duration_seconds{" + sel + "})" }, nativeBounds},
	}

	mcpURL := srv.MCPURL()
	h := initSession(t, http.DefaultClient, mcpURL)
	var mu sync.Mutex
	latencies := map[string][]time.Duration{} // by tool, and "" for every tools/call
	id := 10
	timed := func(tool string, f func()) {
		start := time.Now()
		f()
		d := time.Since(start)
		mu.Lock()
		latencies[tool] = append(latencies[tool], d)
		latencies[""] = append(latencies[""], d)
		mu.Unlock()
	}
	echo := func() {
		id++
		timed("echo", func() {
			if res := callTool(t, mcpURL, h, id, "echo", `{"text":"hi"}`, ""); res.Error != nil {
				t.Fatalf("echo: %+v", res.Error)
			}
		})
	}
	failing := func() {
		id++
		timed("calculator", func() {
			callTool(t, mcpURL, h, id, "calculator", `{"operation":"divide","a":1,"b":0}`, "")
		})
	}
	slow := func() {
		id++
		timed("weather", func() {
			if res := callTool(t, mcpURL, h, id, "weather", `{"city":"Paris"}`, ""); res.Error != nil {
				t.Fatalf("weather: %+v", res.Error)
			}
		})
	}
	// A 2026-07-28 tools/call of echo whose body is over the limit: the
	// handler refuses it with 413 before the SDK sees it.
	big := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`, strings.Repeat("x", maxBody))
	tooLarge := func() {
		hdr := http.Header{"Mcp-Method": {"tools/call"}, "Mcp-Name": {"echo"}, "Mcp-Protocol-Version": {"2026-07-28"}}
		timed("echo", func() {
			if resp, b := postMCP(t, http.DefaultClient, mcpURL, big, hdr); resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("oversized body: status %d, want 413: %s", resp.StatusCode, b)
			}
		})
	}
	refuse := func(name, body string, hdr http.Header) func() {
		return func() {
			if resp, b := postMCP(t, http.DefaultClient, mcpURL, body, hdr); resp.StatusCode < 400 {
				t.Fatalf("%s: status %d, want a refusal: %s", name, resp.StatusCode, b)
			}
		}
	}
	parseError := refuse("parse error", `{"jsonrpc":`, nil)
	unknownMethod := refuse("unknown method", `{"jsonrpc":"2.0","id":5,"method":"no/such_method"}`, nil)
	badVersion := refuse("unsupported protocol version", `{"jsonrpc":"2.0","id":6,"method":"tools/list"}`,
		http.Header{"Mcp-Protocol-Version": {"1999-01-01"}})

	// One of each first, so that every series exists in a scrape before
	// the counted traffic: a rate counts only what a series gained while
	// Prometheus watched it. The parse error goes last and is awaited.
	for _, f := range []func(){echo, failing, slow, tooLarge, unknownMethod, badVersion, parseError} {
		f()
	}
	const wait = 30 * time.Second
	for _, p := range proms {
		p.prom.await(t, p.count(`job="portcullis", mcp_method_name="_OTHER", error_type="-32700"`), wait)
	}
	// The latencies of those first calls stay in: the server's histograms
	// hold them too, and Prometheus's extrapolation of each bucket's rate
	// from its first sample can let the first call (often the slowest:
	// new connections, under -race on a busy machine) weigh on a
	// quantile.

	const nEcho, nFailing, nSlow, nTooLarge, nEach = 300, 60, 20, 10, 10
	for range nEcho {
		echo()
	}
	for range nFailing {
		failing()
	}
	for range nSlow {
		slow()
	}
	for range nTooLarge {
		tooLarge()
	}
	for range nEach {
		parseError()
		unknownMethod()
		badVersion()
	}
	const nCalls = nEcho + nFailing + nSlow + nTooLarge
	// A rate is extrapolated from the samples it has by up to half a
	// scrape interval at each end, which over a burst of a few seconds is
	// a large share: the rates are read once each series has been flat
	// for settle, so the samples span the burst and the quiet after it.
	const settle = 8 * time.Second
	quiet := time.Now().Add(settle)
	for _, p := range proms {
		p.prom.await(t, fmt.Sprintf(`sum(%s) >= %d`, p.count(`job="portcullis", mcp_method_name="tools/call"`), nCalls+4), wait)
		p.prom.await(t, fmt.Sprintf(`sum(%s) >= %d`, p.count(`job="portcullis", mcp_method_name="_OTHER"`), 3*nEach+3), wait)
		p.prom.await(t, fmt.Sprintf(`timestamp(up{job="portcullis"}) > %d`, quiet.Unix()), wait)
	}

	dash, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t, dash)
	perSecond := func(n int) float64 { return float64(n) / window.Seconds() }
	pct := func(tool string, q float64) float64 { return percentile(latencies[tool], q) }
	slowest := upstreamDelay.Seconds()

	for _, p := range proms {
		t.Run(p.name, func(t *testing.T) {
			b := p.bucket
			// by is the expectations of a panel target, keyed by the value of
			// its grouping label ("" for an ungrouped query).
			type expect map[string]check
			want := map[string]struct {
				label string
				by    expect
			}{
				`panel "Tool calls/s" target A`:                   {"", expect{"": rate(perSecond(nCalls))}},
				`panel "Tool error ratio" target A`:               {"", expect{"": ratio(float64(nFailing+nTooLarge) / nCalls)}},
				`panel "p99 tools/call" target A`:                 {"", expect{"": between(b.lower(slowest), b.upper(pct("", 0.99)))}},
				`panel "Tool calls/s by MCP server" target A`:     {"portcullis_server", expect{"root": rate(perSecond(nCalls))}},
				`panel "Tool error ratio by MCP server" target A`: {"portcullis_server", expect{"root": ratio(float64(nFailing+nTooLarge) / nCalls)}},
				`panel "Tool calls/s by tool" target A`: {"gen_ai_tool_name", expect{
					"echo": rate(perSecond(nEcho + nTooLarge)), "calculator": rate(perSecond(nFailing)), "weather": rate(perSecond(nSlow)),
				}},
				`panel "Requests/s by MCP method" target A`: {"mcp_method_name", expect{
					"tools/call": rate(perSecond(nCalls)), "_OTHER": rate(perSecond(3 * nEach)),
				}},
				`panel "Tool error ratio by tool" target A`: {"gen_ai_tool_name", expect{
					// weather, without errors, has no line: its numerator is empty.
					"echo": ratio(float64(nTooLarge) / (nEcho + nTooLarge)), "calculator": ratio(1),
				}},
				`panel "Errors/s by tool and error_type" target A`: {"error_type", expect{
					"tool_error": rate(perSecond(nFailing)), "-32600": rate(perSecond(nTooLarge)),
					"-32700": rate(perSecond(nEach)), "-32601": rate(perSecond(nEach)), "400": rate(perSecond(nEach)),
				}},
				`panel "Latency p50/p95/p99 by MCP method" target A`: {"mcp_method_name", expect{"tools/call": between(0, b.upper(pct("", 0.5)))}},
				`panel "Latency p50/p95/p99 by MCP method" target B`: {"mcp_method_name", expect{"tools/call": between(0, b.upper(pct("", 0.95)))}},
				`panel "Latency p50/p95/p99 by MCP method" target C`: {"mcp_method_name", expect{"tools/call": between(b.lower(slowest), b.upper(pct("", 0.99)))}},
				`panel "Latency p50/p95/p99 by tool" target A`: {"gen_ai_tool_name", expect{
					"echo": between(0, b.upper(pct("echo", 0.5))), "weather": between(b.lower(slowest), b.upper(pct("weather", 0.5))),
				}},
				`panel "Latency p50/p95/p99 by tool" target B`: {"gen_ai_tool_name", expect{
					"echo": between(0, b.upper(pct("echo", 0.95))), "weather": between(b.lower(slowest), b.upper(pct("weather", 0.95))),
				}},
				`panel "Latency p50/p95/p99 by tool" target C`: {"gen_ai_tool_name", expect{
					"echo": between(0, b.upper(pct("echo", 0.99))), "weather": between(b.lower(slowest), b.upper(pct("weather", 0.99))),
				}},
			}
			seen := 0
			for _, q := range queries {
				// $server as the dashboard's "All" option has it.
				expr := strings.NewReplacer(`$job`, "portcullis", `$instance`, ".+", `$server`, ".*", `$__rate_interval`, "2m").Replace(q.Expr)
				samples := p.prom.query(t, expr) // fails the test on a query error
				w, ok := want[q.Where]
				if !ok {
					continue
				}
				seen++
				got := map[string]float64{}
				for _, s := range samples {
					v, err := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
					if err != nil {
						t.Fatalf("%s: value %v: %v", q.Where, s.Value, err)
					}
					got[s.Metric[w.label]] = v
				}
				for key, c := range w.by {
					v, ok := got[key]
					if !ok {
						t.Errorf("%s: no value for %s=%q; got %v\n  %s", q.Where, w.label, key, got, expr)
						continue
					}
					if msg := c(v); msg != "" {
						t.Errorf("%s, %s=%q: %v %s\n  %s", q.Where, w.label, key, v, msg, expr)
					}
				}
			}
			if seen != len(want) {
				t.Errorf("found %d of the %d panel targets the test checks in %s: a panel was renamed or removed", seen, len(want), dashboardPath)
			}
		})
	}
}

// check returns "" when a panel's value is right, else what was expected.
type check func(float64) string

// rate expects a per-second rate whose increase over the window is the
// traffic's count: Prometheus extrapolates a rate towards the window's
// edges, by up to a scrape interval in all, about a tenth of the samples'
// span here.
func rate(want float64) check {
	return func(v float64) string {
		if v < want*0.95 || v > want*1.15 {
			return fmt.Sprintf("want a rate of %.4g/s (%.0f in %v)", want, want*window.Seconds(), window)
		}
		return ""
	}
}

// ratio expects a ratio of two rates over the same scrapes: exact but for
// floating point.
func ratio(want float64) check {
	return func(v float64) string {
		if math.Abs(v-want) > 0.005 {
			return fmt.Sprintf("want the ratio %.4f", want)
		}
		return ""
	}
}

// between expects a quantile in [lo, hi] seconds.
func between(lo, hi float64) check {
	return func(v float64) string {
		if v <= 0 || v < lo || v > hi {
			return fmt.Sprintf("want a duration in [%.6fs, %.6fs]", lo, hi)
		}
		return ""
	}
}

// bucketBounds widens a true duration by one bucket of a histogram.
type bucketBounds struct {
	lower, upper func(seconds float64) float64
}

// operationBuckets are the classic boundaries of the operation histogram
// (observability.OperationBuckets).
var operationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// classicBounds: a quantile interpolated in the classic buckets lies
// within the bucket that holds the true value.
var classicBounds = bucketBounds{
	lower: func(s float64) float64 {
		lo := 0.0
		for _, b := range operationBuckets {
			if b <= s {
				lo = b
			}
		}
		return lo
	},
	upper: func(s float64) float64 {
		i := slices.IndexFunc(operationBuckets, func(b float64) bool { return b >= s })
		if i < 0 {
			return math.Inf(1)
		}
		return operationBuckets[i]
	},
}

// nativeBounds: native buckets grow by at most 10%
// (observability's nativeBucketFactor).
var nativeBounds = bucketBounds{
	lower: func(s float64) float64 { return s / 1.1 },
	upper: func(s float64) float64 { return s * 1.1 },
}

// percentile bounds the server's q-quantile of durations from above, in
// seconds: the nearest-rank q-quantile of the client's measurements, one
// rank higher. Each was measured by the client around the server's own
// work, so it is at least the server's duration; the rank above allows for
// Prometheus extrapolating each bucket's rate on its own, which can move
// the rank a quantile falls on by a fraction of a sample.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q * float64(len(s))))
	return s[min(i, len(s)-1)].Seconds()
}
