package observability

import "github.com/prometheus/client_golang/prometheus"

// newAuthServerRequests is portcullis_authserver_requests_total, with the
// series of [authServerSeries] created at zero.
func newAuthServerRequests() *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_authserver_requests_total",
		Help: "Requests to the authorization server's endpoints (authorization_server.enabled), by endpoint (authorize, callback, consent, token, revoke), the token endpoint's grant, outcome (ok, refused, error) and, when not ok, reason (an OAuth error code or a fixed word such as refresh_reuse, sign_in, store).",
	}, []string{"endpoint", "grant", "outcome", "reason"})
	for _, s := range authServerSeries {
		v.WithLabelValues(s[:]...)
	}
	return v
}

// authServerSeries are the series of portcullis_authserver_requests_total
// that exist from the start, at zero, whether or not the authorization
// server is enabled: the ones the dashboard's "Authorization server" row
// and the alerts read. A counter series created by its first event has no
// earlier sample, so increase() and rate() cannot see that event; a
// refresh token reuse, rare by nature, would then go unalerted. The
// end-to-end test that checks every metric the dashboard and the rules
// query against a scrape of the binary (e2e/metric_coverage_test.go)
// runs it without the authorization server, so the family must be in that
// scrape too. A dozen zero series are the cost.
var authServerSeries = [][4]string{
	{"authorize", "", "ok", ""},
	{"authorize", "", "error", "idp_unavailable"},
	{"authorize", "", "error", "store"},
	{"callback", "", "ok", ""},
	{"callback", "", "refused", "idp_refused"},
	{"callback", "", "refused", "sign_in"},
	{"callback", "", "error", "store"},
	{"consent", "", "error", "store"},
	{"token", "authorization_code", "ok", ""},
	{"token", "refresh_token", "ok", ""},
	{"token", "refresh_token", "refused", "refresh_reuse"},
	// The token endpoint reports its store failing as the OAuth error it
	// answers, 503 temporarily_unavailable.
	{"token", "authorization_code", "error", "temporarily_unavailable"},
	{"token", "refresh_token", "error", "temporarily_unavailable"},
}

// authServerCounters count the authorization server's requests; [Metrics]
// holds them.
type authServerCounters struct {
	authServer *prometheus.CounterVec
}

// AuthServerEvent counts one outcome of an authorization server endpoint.
// Values outside the fixed vocabulary (lowercase words and underscores,
// at most 40 bytes; the grant a known grant type) are counted as [Other],
// so a client cannot mint series.
func (m *authServerCounters) AuthServerEvent(endpoint, grant, outcome, reason string) {
	switch grant {
	case "", "authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer":
	default:
		grant = Other
	}
	m.authServer.WithLabelValues(word(endpoint), grant, word(outcome), word(reason)).Inc()
}

// word returns s when it is a short lowercase word, else [Other].
func word(s string) string {
	if len(s) > 40 {
		return Other
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return Other
		}
	}
	return s
}
