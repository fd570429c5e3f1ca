package authserver

import (
	"net/http"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/audit"
)

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
	client, _, ok := r.BasicAuth()
	if !ok {
		client = r.PostForm.Get("client_id")
	}
	if err == nil {
		s.record(ctx, audit.TypeTokenRevoked, audit.OutcomeSuccess, client, "", nil, "token_type_hint", r.PostForm.Get("token_type_hint"))
	} else {
		s.record(ctx, audit.TypeTokenRevoked, audit.OutcomeRefused, client, "", nil, "error", fosite.ErrorToRFC6749Error(err).ErrorField)
	}
	s.provider.WriteRevocationResponse(ctx, w, err)
}
