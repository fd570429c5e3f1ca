package observability

import (
	"slices"

	"github.com/portcullis-mcp/portcullis/internal/limits"
	"github.com/prometheus/client_golang/prometheus"
)

// LimitNames are the values of the limit label of
// portcullis_limit_rejections_total, from the table of limits. Other values
// are counted as [Other].
var LimitNames = limits.RejectionLabels()

// limitCounters count what the server's limits refuse.
type limitCounters struct {
	rateLimited     *prometheus.CounterVec
	limitRejections *prometheus.CounterVec
	idleClosed      prometheus.Counter
}

func newLimitCounters() limitCounters {
	c := limitCounters{
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_rate_limited_total",
			Help: "Requests refused with 429 by a rate limit, by scope (principal: the token bucket of one caller).",
		}, []string{"scope"}),
		limitRejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "portcullis_limit_rejections_total",
			Help: "Requests refused (or, for tool_timeout, tool calls cut off) by a limit: inflight_total (503), inflight_principal (429), sessions (503), sessions_principal (429: one caller holds its share of sessions), body_size (413), body_read_timeout (408 or connection closed: the request body did not arrive in time), tool_timeout, header_size (431), read_header_timeout (connection closed before its request header was complete).",
		}, []string{"limit"}),
		idleClosed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "portcullis_http_idle_connections_closed_total",
			Help: "Kept-alive connections to the MCP listener closed after server.idle_timeout without a new request.",
		}),
	}
	// Every series exists from the start, at zero, so rates and alerts
	// need no absent() guards.
	c.rateLimited.WithLabelValues("principal")
	for _, l := range LimitNames {
		c.limitRejections.WithLabelValues(l)
	}
	return c
}

// forConns returns the counters [Metrics.WatchConns] uses.
func (c limitCounters) forConns() connCounters {
	return connCounters{
		headerSize:        c.limitRejections.WithLabelValues(LimitHeaderSize),
		readHeaderTimeout: c.limitRejections.WithLabelValues(LimitReadHeaderTimeout),
		idleClosed:        c.idleClosed,
	}
}

// RateLimited counts one request refused by the rate limit of scope
// ("principal").
func (c limitCounters) RateLimited(scope string) {
	if scope != "principal" {
		scope = Other
	}
	c.rateLimited.WithLabelValues(scope).Inc()
}

// LimitRejected counts one refusal by the named limit (one of [LimitNames]).
func (c limitCounters) LimitRejected(limit string) {
	if !slices.Contains(LimitNames, limit) {
		limit = Other
	}
	c.limitRejections.WithLabelValues(limit).Inc()
}
