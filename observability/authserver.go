package observability

import "github.com/prometheus/client_golang/prometheus"

// newAuthServerRequests is portcullis_authserver_requests_total.
func newAuthServerRequests() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "portcullis_authserver_requests_total",
		Help: "Requests to the authorization server's endpoints (authorization_server.enabled), by endpoint (authorize, callback, consent, token, revoke), the token endpoint's grant, outcome (ok, refused, error) and, when not ok, reason (an OAuth error code or a fixed word such as refresh_reuse, sign_in, store).",
	}, []string{"endpoint", "grant", "outcome", "reason"})
}

// AuthServerEvent counts one outcome of an authorization server endpoint.
// Values outside the fixed vocabulary (lowercase words and underscores,
// at most 40 bytes; the grant a known grant type) are counted as [Other],
// so a client cannot mint series.
func (m *Metrics) AuthServerEvent(endpoint, grant, outcome, reason string) {
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
