package authserver

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// serveCallback is where the identity provider sends the browser back.
func (s *Server) serveCallback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	idb, err := s.kv.GetDel(ctx, kv.Join("login-state", kv.Hash(q.Get("state"))))
	if errors.Is(err, kv.ErrNotFound) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "unknown_state"})
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown or has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	l, err := s.loadLogin(ctx, string(idb), false)
	if errors.Is(err, kv.ErrNotFound) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "expired"})
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	if !s.sameBrowser(r, l) {
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "browser"})
		s.record(ctx, audit.TypeSignIn, audit.OutcomeRefused, l.ClientID, "", nil, "reason", "browser", "idp", s.o.IdP.Issuer)
		s.page(w, http.StatusBadRequest, "Sign-in refused", "This sign-in was started in another browser.")
		return
	}
	if e := q.Get("error"); e != "" {
		s.logger.Warn("authorization server: the identity provider refused the sign-in", "client_id", l.ClientID, "idp_error", e)
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "idp_refused"})
		s.record(ctx, audit.TypeSignIn, audit.OutcomeRefused, l.ClientID, "", nil, "reason", "idp_refused", "idp", s.o.IdP.Issuer)
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("The identity provider did not sign the user in."))
		return
	}
	in, err := s.idp.exchange(ctx, q.Get("code"), l.Verifier, l.Nonce)
	u := in.user
	if err != nil {
		s.logger.Warn("authorization server: sign-in failed", "client_id", l.ClientID, "error", err)
		s.observe(Event{Endpoint: "callback", Outcome: "refused", Reason: "sign_in"})
		s.record(ctx, audit.TypeSignIn, audit.OutcomeRefused, l.ClientID, "", nil, "reason", "sign_in", "idp", s.o.IdP.Issuer)
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("Signing in at the identity provider failed."))
		return
	}
	s.logger.Info("audit", "event", "sign_in", "client_id", l.ClientID, "sub", u.Subject, "email", u.Email)
	s.record(ctx, audit.TypeSignIn, audit.OutcomeSuccess, l.ClientID, u.Subject, nil, "idp", s.o.IdP.Issuer)
	if s.keepIdPTokens {
		if err := s.saveIdPToken(ctx, u.Subject, in.tok, in.idToken, in.idExpiry, nil); err != nil {
			s.logger.Warn("authorization server: the identity provider's token was not kept; upstreams that exchange it refuse this user until the next sign-in", "error", err)
		}
	}
	s.observe(Event{Endpoint: "callback", Outcome: "ok"})
	if l.Return != "" {
		s.finishBrowser(w, r, l, u)
		return
	}
	l.User = &u
	if s.nextConnection != nil {
		// The connect pages this sign-in may chain know the user by the
		// browser's session.
		s.setSessionCookie(w, u)
	}
	s.proceed(w, r, l)
}

// proceed takes a signed-in user's sign-in on: to the next account the
// server needs connected (Deps.NextConnection), which returns to
// PathContinue; then to the consent page, or straight back to the client
// when the user consented before.
func (s *Server) proceed(w http.ResponseWriter, r *http.Request, l *login) {
	ctx := r.Context()
	if s.nextConnection != nil {
		name, next, err := s.nextConnection(ctx, l.User.Subject, l.Form.Get("resource"), l.Attempted, PathContinue+"?login="+url.QueryEscape(l.ID))
		if err != nil {
			// A connection that cannot be offered now is asked for at the
			// first call that needs it.
			s.logger.Warn("authorization server: the accounts this sign-in needs could not be checked", "error", err)
		}
		if err == nil && next != "" {
			l.Attempted = append(l.Attempted, name)
			if err := s.saveLogin(ctx, l); err != nil {
				s.storeFailed(w, r, nil, "callback", err)
				return
			}
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
	}
	scopes := strings.Fields(l.Form.Get("scope"))
	if s.consented(ctx, *l.User, l.ClientID, l.Form.Get("resource"), scopes) {
		_ = s.kv.Del(ctx, kv.Join("login", l.ID))
		s.finish(w, r, l)
		return
	}
	if err := s.saveLogin(ctx, l); err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	http.Redirect(w, r, PathConsent+"?login="+url.QueryEscape(l.ID), http.StatusSeeOther)
}

// serveContinue is where a connection chained into a sign-in returns:
// the sign-in goes on in the browser that started it.
func (s *Server) serveContinue(w http.ResponseWriter, r *http.Request) {
	l, err := s.loadLogin(r.Context(), r.URL.Query().Get("login"), false)
	if errors.Is(err, kv.ErrNotFound) {
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown or has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "callback", err)
		return
	}
	if l.User == nil || l.Return != "" || !s.sameBrowser(r, l) {
		s.page(w, http.StatusBadRequest, "Sign-in refused", "This sign-in was started in another browser, or not finished.")
		return
	}
	s.proceed(w, r, l)
}
