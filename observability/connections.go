package observability

import "github.com/prometheus/client_golang/prometheus"

// newConnectedAccounts is portcullis_connected_accounts_total.
func newConnectedAccounts() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_connected_accounts_total",
		Help: "Users' connected accounts at upstreams that act as each user (oauth.grant authorization_code), by upstream, action (connect, refresh, disconnect; read: a vault read for a token not in this replica's memory) and outcome (ok, refused, error; read: hit, miss, rejected, error).",
	}, []string{"upstream", "action", "outcome"})
}

// connectedAccounts count what happens to users' connected accounts;
// [Metrics] holds them.
type connectedAccounts struct {
	accounts *prometheus.CounterVec
}

// ConnectionEvent counts one action on a connected account at upstream
// (empty when the request named none, such as an unknown link). Values
// outside the fixed vocabulary are counted as [Other].
func (m *connectedAccounts) ConnectionEvent(upstream, action, outcome string) {
	m.accounts.WithLabelValues(upstream, word(action), word(outcome)).Inc()
}
