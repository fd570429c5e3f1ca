//go:build e2e

package e2e

// The dashboard and the alert rules query only what the binary exports:
// every metric name in the PromQL of
// helm/portcullis/files/dashboard.json and alerts.yaml must be in a real
// scrape of the running binary. And a flood of caller-chosen names (tools,
// methods, session ids, paths) must not create series.

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"
)

const (
	dashboardPath = "../helm/portcullis/files/dashboard.json"
	alertsPath    = "../helm/portcullis/files/alerts.yaml"
	runbookPath   = "../docs/runbook.md"
)

// promQuery is one PromQL expression and where it was found.
type promQuery struct {
	Where string // e.g. `panel "Tool calls/s by tool" target A`
	Expr  string
}

// dashboardQueries returns the PromQL of every panel target (rows'
// nested panels included) and of every query variable of a Grafana
// dashboard. A variable's label_values(EXPR, label) contributes EXPR.
func dashboardQueries(t *testing.T, data []byte) []promQuery {
	t.Helper()
	type target struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	var qs []promQuery
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q target %s has no expr", dashboardPath, p.Title, tg.RefID)
					continue
				}
				qs = append(qs, promQuery{Where: fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), Expr: tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q string
		if json.Unmarshal(v.Query, &q) != nil {
			var obj struct{ Query string }
			if err := json.Unmarshal(v.Query, &obj); err != nil {
				t.Fatalf("%s: variable %s: query is neither a string nor {\"query\": ...}: %s", dashboardPath, v.Name, v.Query)
			}
			q = obj.Query
		}
		expr, err := labelValuesExpr(q)
		if err != nil {
			t.Fatalf("%s: variable %s: %v", dashboardPath, v.Name, err)
		}
		qs = append(qs, promQuery{Where: "variable " + v.Name, Expr: expr})
	}
	return qs
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`)

// labelValuesExpr returns EXPR of Grafana's label_values(EXPR, label).
func labelValuesExpr(q string) (string, error) {
	m := labelValuesRE.FindStringSubmatch(q)
	if m == nil {
		return "", fmt.Errorf("query %q is not label_values(EXPR, label)", q)
	}
	return m[1], nil
}

// alertRule is the part of a Prometheus rule the tests read.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// alertRules reads every rule of the rules file.
func alertRules(t *testing.T) []alertRule {
	t.Helper()
	data, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", alertsPath, err)
	}
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s has no rules", alertsPath)
	}
	return rules
}

// grafanaVars are Grafana's interval variables, which are not PromQL; each
// is replaced by a duration before parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "${__rate_interval}", "5m", "$__interval", "1m", "${__interval}", "1m", "$__range", "1h", "${__range}", "1h")

// metricNames parses expr and returns the metric names its selectors
// name, as they appear in a scrape (histogram_bucket, counter_total, …).
func metricNames(expr string) ([]string, error) {
	e, err := parser.ParseExpr(grafanaVars.Replace(expr))
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && name == "" {
				if m.Type.String() != "=" {
					bad = fmt.Errorf("selector %s matches metric names by pattern; name the metric", vs)
				}
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s has no metric name", vs)
		}
		names = append(names, name)
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	return names, nil
}

func TestMetricNamesOfExpressions(t *testing.T) {
	for _, tt := range []struct {
		name string
		expr string
		want []string
	}{
		{name: "histogram quantile", expr: `histogram_quantile(0.99, sum by (le, gen_ai_tool_name) (rate(mcp_server_operation_duration_seconds_bucket{job=~"$job", instance=~"$instance"}[$__rate_interval])))`, want: []string{"mcp_server_operation_duration_seconds_bucket"}},
		{name: "ratio keeps both sides", expr: `sum(rate(a_total{x="count"}[5m])) / sum(rate(b_count[5m])) > 0.1 and c > 0`, want: []string{"a_total", "b_count", "c"}},
		{name: "name in braces", expr: `{__name__="up", job="portcullis"} == 0`, want: []string{"up"}},
		{name: "absent", expr: `absent(up{job="portcullis"})`, want: []string{"up"}},
		{name: "by clause and strings are not metrics", expr: `count by (version, rate) (portcullis_build_info{version!="sum"})`, want: []string{"portcullis_build_info"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := metricNames(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("metricNames(%s) = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
	for _, bad := range []string{`{__name__=~"mcp_.+"}`, `sum(rate(foo[5m]`, `{job="portcullis"}`} {
		if got, err := metricNames(bad); err == nil {
			t.Errorf("metricNames(%s) = %v, want an error", bad, got)
		}
	}
	if got, err := labelValuesExpr(`label_values(portcullis_build_info{job=~"$job"}, instance)`); err != nil || got != `portcullis_build_info{job=~"$job"}` {
		t.Errorf("labelValuesExpr = %q, %v", got, err)
	}
}

// exposedNames returns every sample name in a text-format scrape, keyed to
// its family: a histogram family F exposes F_bucket, F_sum and F_count; a
// summary F, F_sum and F_count; the others their own name.
func exposedNames(t *testing.T, body string) (names map[string]bool, families map[string]*dto.MetricFamily) {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	families, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("scrape is not valid Prometheus text format: %v", err)
	}
	names = map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
			// Queries read a native histogram by the family's own name. The
			// text format does not show whether a histogram is native
			// (observability's TestOperationHistogramIsNative does), so
			// the name counts as exposed for every histogram.
			names[name] = true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names, families
}

// prometheusSynthetic are series Prometheus adds to every target itself.
var prometheusSynthetic = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

func TestDashboardAndAlertsQueryOnlyExportedMetrics(t *testing.T) {
	dash, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	queries := dashboardQueries(t, dash)
	for _, r := range alertRules(t) {
		queries = append(queries, promQuery{Where: "alert " + r.Alert + r.Record, Expr: r.Expr})
	}
	used := map[string][]string{} // metric name -> where
	for _, q := range queries {
		names, err := metricNames(q.Expr)
		if err != nil {
			t.Errorf("%s: %v\n  %s", q.Where, err, q.Expr)
			continue
		}
		for _, n := range names {
			used[n] = append(used[n], q.Where)
		}
	}
	if len(used) < 10 {
		t.Fatalf("found only %d metric names in the dashboard and rules: %v", len(used), slices.Sorted(maps.Keys(used)))
	}

	// With one upstream MCP server (the go-sdk's everything-server over
	// stdio), a Redis and an audit sink, so that the upstream, Redis and
	// audit panels' series are in the scrape too.
	cfg := writeUpstreamConfig(t, fmt.Sprintf("upstreams:\n  - name: gosdk\n    transport: stdio\n    command: %q\n    required: true\naudit:\n  sinks:\n    - type: stderr\n", goEverythingServer(t)))
	rdb := redistest.Start(t)
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=core", "PORTCULLIS_REDIS_URL=redis://" + rdb.Addr}, "--config", cfg)
	exercise(t, srv)
	metricsURL := srv.MetricsURL(t)

	// Some series appear a moment after the call that makes them (a legacy
	// session's duration is observed when the session has closed).
	var missing []string
	poll(10*time.Second, 100*time.Millisecond, func() bool {
		exposed, _ := exposedNames(t, scrape(t, metricsURL))
		missing = missing[:0]
		for n := range used {
			if !exposed[n] && !prometheusSynthetic[n] {
				missing = append(missing, n)
			}
		}
		return len(missing) == 0
	})
	sort.Strings(missing)
	for _, n := range missing {
		t.Errorf("%s is queried but not in a scrape of the binary; used by:\n    %s", n, strings.Join(used[n], "\n    "))
	}
	t.Logf("%d metric names from %d queries, all checked against the scrape", len(used), len(queries))
}

// exercise makes the calls that give every series a sample: a legacy
// session that is closed, a successful call, a tool error, an unknown
// tool, and a request the router answers with an error.
func exercise(t *testing.T, srv *server) {
	t.Helper()
	h := initSession(t, http.DefaultClient, srv.MCPURL())
	if res := callTool(t, srv.MCPURL(), h, 2, "echo", `{"text":"hello"}`, ""); res.Error != nil {
		t.Fatalf("echo: %+v", res.Error)
	}
	callTool(t, srv.MCPURL(), h, 3, "calculator", `{"operation":"divide","a":1,"b":0}`, "")
	callTool(t, srv.MCPURL(), h, 4, "no_such_tool", `{}`, "")
	deleteSession(t, srv.MCPURL(), h)
}

// deleteSession ends a legacy session with DELETE, as a client does.
func deleteSession(t *testing.T, url string, h http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("DELETE session: status %d", resp.StatusCode)
	}
}

// seriesOf returns the identity (name and labels, not value) of every
// series of the families whose name passes keep.
func seriesOf(families map[string]*dto.MetricFamily, keep func(string) bool) map[string]bool {
	ids := map[string]bool{}
	for name, f := range families {
		if !keep(name) {
			continue
		}
		for _, m := range f.GetMetric() {
			var b strings.Builder
			b.WriteString(name)
			for _, l := range m.GetLabel() {
				fmt.Fprintf(&b, ",%s=%q", l.GetName(), l.GetValue())
			}
			ids[b.String()] = true
		}
	}
	return ids
}

func TestCallerChosenNamesDoNotCreateSeries(t *testing.T) {
	srv := startServer(t, []string{"PORTCULLIS_TOOLS_TOOLSETS=core"})
	metricsURL := srv.MetricsURL(t)
	h := initSession(t, http.DefaultClient, srv.MCPURL())
	ours := func(name string) bool {
		return strings.HasPrefix(name, "mcp_") || strings.HasPrefix(name, "portcullis_")
	}

	// flood sends n requests whose tool name, method, session id and path
	// are new each time and contain marker.
	const marker = "zzflood"
	flood := func(n int) {
		for i := range n {
			name := fmt.Sprintf("%s-%d-%x", marker, i, rand.Uint64())
			callTool(t, srv.MCPURL(), h, 100+i, name, `{}`, "")
			postMCP(t, http.DefaultClient, srv.MCPURL(), fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"%s/method"}`, 100+i, name), h)
			postMCP(t, http.DefaultClient, srv.MCPURL(), `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
				http.Header{"Mcp-Session-Id": {name}, "Mcp-Protocol-Version": {"2025-11-25"}})
			resp, err := http.Get(srv.BaseURL + "/" + name)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}

	// One of each first, so every fixed label value (_OTHER, route
	// "other", the error codes) exists before the counting starts.
	flood(1)
	_, before := exposedNames(t, scrape(t, metricsURL))
	flood(50)
	body := scrape(t, metricsURL)
	_, after := exposedNames(t, body)

	if strings.Contains(body, marker) {
		for line := range strings.Lines(body) {
			if strings.Contains(line, marker) {
				t.Errorf("a caller-chosen name reached a label value: %s", strings.TrimSpace(line))
			}
		}
	}
	b, a := seriesOf(before, ours), seriesOf(after, ours)
	for id := range a {
		if !b[id] {
			t.Errorf("new series after 50 requests with new names: %s", id)
		}
	}
	tools := func(fams map[string]*dto.MetricFamily) map[string]bool {
		vals := map[string]bool{}
		for _, m := range fams["mcp_server_operation_duration_seconds"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "gen_ai_tool_name" {
					vals[l.GetValue()] = true
				}
			}
		}
		return vals
	}
	tb, ta := tools(before), tools(after)
	if len(ta) != len(tb) || !ta[observabilityOther] {
		t.Errorf("gen_ai_tool_name values: %d before, %d after the flood (%v); want the same, with %s", len(tb), len(ta), slices.Sorted(maps.Keys(ta)), observabilityOther)
	}
}

// observabilityOther is the label value that stands for every name the
// server does not know (observability.Other).
const observabilityOther = "_OTHER"

func TestAlertRulesAreDocumented(t *testing.T) {
	runbook, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	// GitHub's anchor of "## PortcullisTargetDown" is "#portcullistargetdown".
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## +(\S+)\s*$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[strings.ToLower(m[1])] = true
	}
	const runbookURL = "https://github.com/portcullis-mcp/portcullis/blob/main/docs/runbook.md#"
	seen := map[string]bool{}
	for _, r := range alertRules(t) {
		if r.Alert == "" {
			continue
		}
		if seen[r.Alert] {
			t.Errorf("alert %s is defined twice", r.Alert)
		}
		seen[r.Alert] = true
		switch r.Labels["severity"] {
		case "critical", "warning", "info":
		default:
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		for _, k := range []string{"summary", "description", "runbook"} {
			if strings.TrimSpace(r.Annotations[k]) == "" {
				t.Errorf("alert %s has no %s annotation", r.Alert, k)
			}
		}
		anchor, ok := strings.CutPrefix(r.Annotations["runbook"], runbookURL)
		if !ok || anchor != strings.ToLower(r.Alert) {
			t.Errorf("alert %s: runbook %q, want %s%s", r.Alert, r.Annotations["runbook"], runbookURL, strings.ToLower(r.Alert))
		}
		if !anchors[anchor] {
			t.Errorf("alert %s: %s has no section \"## %s\"", r.Alert, runbookPath, r.Alert)
		}
	}
	for a := range anchors {
		if !slices.ContainsFunc(slices.Collect(maps.Keys(seen)), func(s string) bool { return strings.ToLower(s) == a }) {
			t.Errorf("%s has a section for %s, which is not an alert in %s", runbookPath, a, alertsPath)
		}
	}
}
