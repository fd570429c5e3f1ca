package doctor

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// CheckUpstreams names the checks of the upstream MCP servers: one per
// upstream, "upstream NAME", or this one when none can be listed.
const CheckUpstreams = "upstreams"

// upstreams reports the state of each upstream MCP server from the
// server's metrics listener (Options.MetricsURL): connected or not, with its
// restarts and failed requests so far. Upstream state is not public, so
// without the metrics URL the check is skipped.
func (d *doctor) upstreams(ctx context.Context) {
	if d.opts.MetricsURL == "" {
		d.skip(CheckUpstreams, "needs --metrics-url (the metrics listener, e.g. http://POD:9090/metrics): the state of upstream MCP servers is not public")
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.opts.MetricsURL, nil)
	if err != nil {
		d.fail(CheckUpstreams, "--metrics-url %q: %v", d.opts.MetricsURL, err)
		return
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := d.client.Do(req)
	if err != nil {
		d.fail(CheckUpstreams, "GET %s: %v", d.opts.MetricsURL, err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		d.fail(CheckUpstreams, "GET %s: status %d, want 200 and the Prometheus text format", d.opts.MetricsURL, resp.StatusCode)
		return
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		d.fail(CheckUpstreams, "GET %s: not the Prometheus text format: %v", d.opts.MetricsURL, err)
		return
	}
	up := byUpstream(fams["portcullis_upstream_up"])
	if len(up) == 0 {
		d.pass(CheckUpstreams, "none configured")
		return
	}
	restarts := byUpstream(fams["portcullis_upstream_restarts_total"])
	errs := byUpstream(fams["portcullis_upstream_request_errors_total"])
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range up {
			if !yield(n) {
				return
			}
		}
	}) {
		detail := fmt.Sprintf("%s, %s since start", plural(int(restarts[name]), "restart"), plural(int(errs[name]), "failed request"))
		if up[name] == 1 {
			d.pass("upstream "+name, "connected; %s", detail)
		} else {
			d.warn("upstream "+name, "not connected (its tools, resources and prompts are not served); %s", detail)
		}
	}
}

// byUpstream sums a family's values by its upstream label.
func byUpstream(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		var name string
		for _, l := range m.GetLabel() {
			if l.GetName() == "upstream" {
				name = l.GetValue()
			}
		}
		if strings.TrimSpace(name) == "" {
			continue
		}
		switch {
		case m.GetGauge() != nil:
			out[name] += m.GetGauge().GetValue()
		case m.GetCounter() != nil:
			out[name] += m.GetCounter().GetValue()
		}
	}
	return out
}
