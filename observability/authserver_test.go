package observability

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestAuthServerSeriesExistFromStart: the series the dashboard and the
// alerts read are exposed at zero before the first event (with the
// authorization server off too), so that increase() sees a first refresh
// token reuse and the metric-coverage e2e test finds the family.
func TestAuthServerSeriesExistFromStart(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
	want := `
# HELP portcullis_authserver_requests_total Requests to the authorization server's endpoints (authorization_server.enabled), by endpoint (authorize, callback, consent, token, revoke), the token endpoint's grant, outcome (ok, refused, error) and, when not ok, reason (an OAuth error code or a fixed word such as refresh_reuse, sign_in, store).
# TYPE portcullis_authserver_requests_total counter
portcullis_authserver_requests_total{endpoint="authorize",grant="",outcome="error",reason="idp_unavailable"} 0
portcullis_authserver_requests_total{endpoint="authorize",grant="",outcome="error",reason="store"} 0
portcullis_authserver_requests_total{endpoint="authorize",grant="",outcome="ok",reason=""} 0
portcullis_authserver_requests_total{endpoint="callback",grant="",outcome="error",reason="store"} 0
portcullis_authserver_requests_total{endpoint="callback",grant="",outcome="ok",reason=""} 0
portcullis_authserver_requests_total{endpoint="callback",grant="",outcome="refused",reason="idp_refused"} 0
portcullis_authserver_requests_total{endpoint="callback",grant="",outcome="refused",reason="sign_in"} 0
portcullis_authserver_requests_total{endpoint="consent",grant="",outcome="error",reason="store"} 0
portcullis_authserver_requests_total{endpoint="token",grant="authorization_code",outcome="error",reason="temporarily_unavailable"} 0
portcullis_authserver_requests_total{endpoint="token",grant="authorization_code",outcome="ok",reason=""} 0
portcullis_authserver_requests_total{endpoint="token",grant="refresh_token",outcome="error",reason="temporarily_unavailable"} 0
portcullis_authserver_requests_total{endpoint="token",grant="refresh_token",outcome="ok",reason=""} 0
portcullis_authserver_requests_total{endpoint="token",grant="refresh_token",outcome="refused",reason="refresh_reuse"} 0
`
	if err := testutil.CollectAndCompare(m.authServer, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestAuthServerEventBoundsLabels(t *testing.T) {
	tests := []struct {
		name                             string
		endpoint, grant, outcome, reason string
		want                             []string
	}{
		{name: "known words", endpoint: "token", grant: "refresh_token", outcome: "refused", reason: "refresh_reuse",
			want: []string{"token", "refresh_token", "refused", "refresh_reuse"}},
		{name: "unknown grant", endpoint: "token", grant: "password", outcome: "refused", reason: "unsupported_grant_type",
			want: []string{"token", Other, "refused", "unsupported_grant_type"}},
		{name: "not a word", endpoint: "token", grant: "", outcome: "refused", reason: "Invalid-Grant",
			want: []string{"token", "", "refused", Other}},
		{name: "too long", endpoint: "authorize", outcome: "refused", reason: strings.Repeat("a", 41),
			want: []string{"authorize", "", "refused", Other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics(prometheus.NewRegistry(), BuildInfo{})
			before := testutil.ToFloat64(m.authServer.WithLabelValues(tt.want...))
			m.AuthServerEvent(tt.endpoint, tt.grant, tt.outcome, tt.reason)
			if got := testutil.ToFloat64(m.authServer.WithLabelValues(tt.want...)); got != before+1 {
				t.Errorf("series %v = %v, want %v", tt.want, got, before+1)
			}
		})
	}
}
