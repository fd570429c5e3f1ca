package authserver

import "net/http"

// serveRevoke is the RFC 7009 revocation endpoint.
func (s *Server) serveRevoke(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	err := s.provider.NewRevocationRequest(ctx, r)
	outcome := "ok"
	if err != nil {
		outcome = "refused"
	}
	s.observe(Event{Endpoint: "revoke", Outcome: outcome})
	s.provider.WriteRevocationResponse(ctx, w, err)
}
