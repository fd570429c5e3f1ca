package observability

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestConnectedAccountsSeriesExistFromStart: the series the dashboard and
// the alerts read are exposed at zero before the first event, for the
// upstream "" from the start (so that the metric-coverage e2e test, which
// configures no connected accounts, finds the family) and for each
// declared upstream (so that increase() sees a first refresh error).
func TestConnectedAccountsSeriesExistFromStart(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	m.DeclareConnection("forge")
	var want strings.Builder
	want.WriteString(`# HELP portcullis_connected_accounts_total Users' connected accounts at upstreams that act as each user (oauth.grant authorization_code), by upstream, action (connect, refresh, disconnect, revoke: the revocation of a disconnected account's token at the service; read: a vault read for a token not in this replica's memory) and outcome (ok, refused, error; read: hit, miss, rejected, error).
# TYPE portcullis_connected_accounts_total counter
`)
	for _, upstream := range []string{"", "forge"} {
		for _, s := range [][2]string{
			{"connect", "error"}, {"connect", "ok"}, {"connect", "refused"},
			{"disconnect", "ok"},
			{"read", "error"}, {"read", "hit"}, {"read", "miss"}, {"read", "rejected"},
			{"refresh", "error"}, {"refresh", "ok"}, {"refresh", "refused"},
		} {
			want.WriteString(`portcullis_connected_accounts_total{action="` + s[0] + `",outcome="` + s[1] + `",upstream="` + upstream + `"} 0` + "\n")
		}
	}
	if err := testutil.CollectAndCompare(m.accounts, strings.NewReader(want.String())); err != nil {
		t.Error(err)
	}
}

func TestConnectionEventBoundsLabels(t *testing.T) {
	tests := []struct {
		name                      string
		upstream, action, outcome string
		want                      []string
	}{
		{name: "known words", upstream: "forge", action: "refresh", outcome: "error",
			want: []string{"forge", "refresh", "error"}},
		{name: "not a word", upstream: "forge", action: "Connect", outcome: "ok",
			want: []string{"forge", Other, "ok"}},
		{name: "too long", upstream: "", action: "connect", outcome: strings.Repeat("a", 41),
			want: []string{"", "connect", Other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
			m.ConnectionEvent(tt.upstream, tt.action, tt.outcome)
			if got := testutil.ToFloat64(m.accounts.WithLabelValues(tt.want...)); got != 1 {
				t.Errorf("series %v = %v, want 1", tt.want, got)
			}
		})
	}
}
