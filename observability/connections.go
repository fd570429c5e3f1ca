package observability

import "github.com/prometheus/client_golang/prometheus"

// newConnectedAccounts is portcullis_connected_accounts_total, with the
// series of [connectionSeries] for the upstream "" created at zero.
func newConnectedAccounts() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_connected_accounts_total",
		Help: "Users' connected accounts at upstreams that act as each user (oauth.grant authorization_code), by upstream, action (connect, refresh, disconnect, revoke: the revocation of a disconnected account's token at the service; read: a vault read for a token not in this replica's memory) and outcome (ok, refused, error; read: hit, miss, rejected, error).",
	}, []string{"upstream", "action", "outcome"})
	declareConnection(v, "")
	return v
}

// connectionSeries are the action and outcome of the series of
// portcullis_connected_accounts_total that exist at zero for every
// upstream with connected accounts ([Metrics.DeclareConnection]) and for
// the upstream "" (the events that name none, such as an unknown connect
// link) from the start, with no such upstream too: the dashboard's
// "Connected accounts" row and the alert on refresh errors read them. A
// counter series created by its first event has no earlier sample, so
// increase() and rate() cannot see that event; and the end-to-end test
// that checks every metric the dashboard and the rules query against a
// scrape of the binary (e2e/metric_coverage_test.go) runs it without
// connected accounts, so the family must be in that scrape.
var connectionSeries = [][2]string{
	{"connect", "ok"},
	{"connect", "refused"},
	{"connect", "error"},
	{"refresh", "ok"},
	{"refresh", "refused"},
	{"refresh", "error"},
	{"disconnect", "ok"},
	{"read", "hit"},
	{"read", "miss"},
	{"read", "rejected"},
	{"read", "error"},
}

func declareConnection(v *prometheus.CounterVec, upstream string) {
	for _, s := range connectionSeries {
		v.WithLabelValues(upstream, s[0], s[1])
	}
}

// connectedAccounts count what happens to users' connected accounts;
// [Metrics] holds them.
type connectedAccounts struct {
	accounts *prometheus.CounterVec
}

// DeclareConnection creates the series of the upstream named upstream,
// whose users connect accounts, at zero (see [connectionSeries]).
func (m *connectedAccounts) DeclareConnection(upstream string) {
	declareConnection(m.accounts, upstream)
}

// ConnectionEvent counts one action on a connected account at upstream
// (empty when the request named none, such as an unknown link). Values
// outside the fixed vocabulary are counted as [Other].
func (m *connectedAccounts) ConnectionEvent(upstream, action, outcome string) {
	m.accounts.WithLabelValues(upstream, word(action), word(outcome)).Inc()
}
