package authserver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// serveToken is the token endpoint.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.observe(Event{Endpoint: "token", Outcome: "refused", Reason: "invalid_request"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), fosite.ErrInvalidRequest.WithHint("The body is not a form within 64 KiB."))
		return
	}
	grant := r.PostForm.Get("grant_type")
	if !slices.Contains(s.grants(), grant) {
		s.observe(Event{Endpoint: "token", Grant: "other", Outcome: "refused", Reason: "unsupported_grant_type"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), fosite.ErrUnsupportedGrantType.WithHintf("Supported: %s.", strings.Join(s.grants(), ", ")))
		return
	}
	requested, named := r.PostForm["resource"]
	if _, ok := s.requestedResource(requested); named && !ok {
		s.observe(Event{Endpoint: "token", Grant: grant, Outcome: "refused", Reason: "invalid_target"})
		s.provider.WriteAccessError(ctx, w, fosite.NewAccessRequest(newSession()), s.errInvalidTarget())
		return
	}
	ar, err := s.provider.NewAccessRequest(ctx, r, newSession())
	if err != nil {
		s.tokenRefused(w, r, ar, grant, err)
		return
	}
	// A grant keeps the resource it was granted for: a resource parameter
	// naming another is refused (RFC 8707 §2.2), and so is a grant for a
	// resource this server no longer issues tokens for (a server removed
	// from the configuration). Nothing is issued before this, and a
	// refresh token stays valid (fosite rotates it in NewAccessResponse);
	// a code cannot be redeemed again (its PKCE data is gone), as after
	// any refused exchange.
	res := s.grantResource(ar)
	if _, ok := s.resource(res); !ok || named && requested[0] != res {
		s.tokenRefused(w, r, ar, grant, s.errInvalidTarget())
		return
	}
	resp, err := s.provider.NewAccessResponse(ctx, ar)
	if err != nil {
		s.tokenRefused(w, r, ar, grant, err)
		return
	}
	if d, ok := issuedLifetime(ar); ok {
		resp.SetExpiresIn(d)
	}
	s.observe(Event{Endpoint: "token", Grant: grant, Outcome: "ok"})
	s.logger.Info("audit", "event", "token_issued", "grant", grant, "client_id", ar.GetClient().GetID(), "sub", ar.GetSession().GetSubject(), "resource", res)
	typ := audit.TypeTokenIssued
	if grant == grantRefresh {
		typ = audit.TypeTokenRefreshed
	}
	s.record(ctx, typ, audit.OutcomeSuccess, ar.GetClient().GetID(), ar.GetSession().GetSubject(), ar.GetGrantedScopes(), "grant", grant, "resource", res)
	s.provider.WriteAccessResponse(ctx, w, ar, resp)
}

func (s *Server) tokenRefused(w http.ResponseWriter, r *http.Request, ar fosite.AccessRequester, grant string, err error) {
	reason := ""
	switch {
	case errors.Is(err, kv.ErrUnavailable):
		reason = "store"
	case grant == grantRefresh && errors.Is(err, fosite.ErrInactiveToken):
		// A used refresh token: its family is revoked (see refreshReused).
		reason = "refresh_reuse"
	}
	err = storeError(err)
	rfc := fosite.ErrorToRFC6749Error(err)
	// A refusal of the ID-JAG grant names its reason and logged its cause.
	ref := (*refusal)(nil)
	if errors.As(err, &ref) {
		reason = ref.reason
	}
	outcome := "refused"
	if rfc.CodeField >= 500 {
		outcome = "error"
		if ref == nil {
			s.logger.Error("authorization server: token endpoint failed", "grant", grant, "error", err)
		}
	}
	if reason == "" {
		reason = rfc.ErrorField
	}
	s.observe(Event{Endpoint: "token", Grant: grant, Outcome: outcome, Reason: reason})
	if ar == nil {
		ar = fosite.NewAccessRequest(newSession())
	}
	s.provider.WriteAccessError(r.Context(), w, ar, err)
}

// refreshReused is told when a used refresh token is presented: fosite
// revokes its family; this leaves the audit line (tokenRefused counts it,
// once, as reason refresh_reuse).
func (s *Server) refreshReused(ctx context.Context, clientID, subject string) {
	s.logger.Warn("audit", "event", "refresh_reuse", "client_id", clientID, "sub", subject)
	s.record(ctx, audit.TypeTokenReused, audit.OutcomeRefused, clientID, subject, nil, "grant", grantRefresh)
}
