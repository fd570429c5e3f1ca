package limits

// The metrics that count what a limit refuses.
const (
	// RejectionsMetric counts refusals by the limit in its limit label.
	RejectionsMetric = "portcullis_limit_rejections_total"
	// RateLimitedMetric counts refusals by the per-principal rate limit,
	// in its scope label ("principal").
	RateLimitedMetric = "portcullis_rate_limited_total"
)

// Info describes one limit.
type Info struct {
	// Name is the limit as events, logs and the limit label name it.
	Name Limit
	// Bounds says what the limit bounds and what a request over it gets.
	Bounds string
	// Keys are the configuration keys that set it, the main one first.
	Keys []string
	// Metric is the counter its refusals are counted by:
	// [RejectionsMetric], under limit=Name, or [RateLimitedMetric].
	Metric string
}

// Table lists every limit. The metrics pre-register their series from it,
// and docs/operations.md and docs/runbook.md name every entry (a test
// checks).
var Table = []Info{
	{Name: LimitBodySize, Bounds: "a request body's size; 413", Keys: []string{"mcp.max_body_bytes"}, Metric: RejectionsMetric},
	{Name: LimitHeaderSize, Bounds: "a request header's size; 431", Keys: []string{"server.max_header_bytes"}, Metric: RejectionsMetric},
	{Name: LimitReadHeaderTimeout, Bounds: "the time a request header may take to arrive; the connection is closed", Keys: []string{"server.read_header_timeout"}, Metric: RejectionsMetric},
	{Name: LimitBodyReadTimeout, Bounds: "the time a request body may take to arrive after its header; 408, or the connection is closed", Keys: []string{"server.read_body_timeout"}, Metric: RejectionsMetric},
	{Name: LimitToolTimeout, Bounds: "one tool call's time; the call is cancelled and gets an error result", Keys: []string{"mcp.tool_timeout", "mcp.tool_timeouts"}, Metric: RejectionsMetric},
	{Name: LimitInFlightTotal, Bounds: "the requests in flight on the whole server; 503", Keys: []string{"limits.max_in_flight"}, Metric: RejectionsMetric},
	{Name: LimitInFlightPrincipal, Bounds: "the requests in flight of one caller; 429", Keys: []string{"limits.max_in_flight_per_principal"}, Metric: RejectionsMetric},
	{Name: LimitRate, Bounds: "the request rate of one caller; 429", Keys: []string{"limits.rate_per_principal", "limits.burst_per_principal"}, Metric: RateLimitedMetric},
	{Name: LimitSessions, Bounds: "the legacy sessions open on the whole server; initialize gets 503", Keys: []string{"mcp.max_sessions"}, Metric: RejectionsMetric},
	{Name: LimitSessionsPrincipal, Bounds: "the legacy sessions one caller holds; initialize gets 429", Keys: []string{"mcp.max_sessions_per_principal"}, Metric: RejectionsMetric},
}

// RejectionLabels returns the values of the limit label of
// [RejectionsMetric]: the names of the limits in [Table] it counts.
func RejectionLabels() []string {
	var names []string
	for _, l := range Table {
		if l.Metric == RejectionsMetric {
			names = append(names, string(l.Name))
		}
	}
	return names
}
