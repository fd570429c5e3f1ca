package observability

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestLimitCounters(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, BuildInfo{Version: "test", Revision: "r"})
	m.RateLimited("principal")
	m.RateLimited("principal")
	m.LimitRejected("inflight_total")
	m.LimitRejected("tool_timeout")
	m.LimitRejected("body_read_timeout")
	m.LimitRejected("made-up") // a bounded label: counted as _OTHER
	want := `
# HELP portcullis_limit_rejections_total Requests refused (or, for tool_timeout, tool calls cut off) by a limit: inflight_total (503), inflight_principal (429), sessions (503), sessions_principal (429: one caller holds its share of sessions), body_size (413), body_read_timeout (408 or connection closed: the request body did not arrive in time), tool_timeout, header_size (431), read_header_timeout (connection closed before its request header was complete).
# TYPE portcullis_limit_rejections_total counter
portcullis_limit_rejections_total{limit="_OTHER"} 1
portcullis_limit_rejections_total{limit="body_read_timeout"} 1
portcullis_limit_rejections_total{limit="body_size"} 0
portcullis_limit_rejections_total{limit="header_size"} 0
portcullis_limit_rejections_total{limit="inflight_principal"} 0
portcullis_limit_rejections_total{limit="inflight_total"} 1
portcullis_limit_rejections_total{limit="read_header_timeout"} 0
portcullis_limit_rejections_total{limit="sessions"} 0
portcullis_limit_rejections_total{limit="sessions_principal"} 0
portcullis_limit_rejections_total{limit="tool_timeout"} 1
# HELP portcullis_rate_limited_total Requests refused with 429 by a rate limit, by scope (principal: the token bucket of one caller).
# TYPE portcullis_rate_limited_total counter
portcullis_rate_limited_total{scope="principal"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "portcullis_limit_rejections_total", "portcullis_rate_limited_total"); err != nil {
		t.Error(err)
	}
}
