package authserver

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// serveAuthorize validates the client's request, then sends the browser
// to the identity provider.
func (s *Server) serveAuthorize(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ar, err := s.provider.NewAuthorizeRequest(ctx, r)
	if err != nil {
		s.refuseAuthorize(w, r, ar, err, "invalid_request")
		return
	}
	form := ar.GetRequestForm()
	if m := form.Get("response_mode"); m != "" && m != "query" {
		s.refuseAuthorize(w, r, ar, fosite.ErrUnsupportedResponseMode.WithHint("This server answers in the query only (response_mode query)."), "response_mode")
		return
	}
	res, ok := s.requestedResource(form["resource"])
	if !ok {
		s.refuseAuthorize(w, r, ar, s.errInvalidTarget(), "invalid_target")
		return
	}
	// A sign-in for one server is offered its scopes alone: fosite
	// checked them against every server's.
	for _, sc := range ar.GetRequestedScopes() {
		if !s.offers(res, sc) {
			s.refuseAuthorize(w, r, ar, s.errScopeNotOffered(res, sc), "invalid_scope")
			return
		}
	}
	if form.Get("code_challenge") == "" || form.Get("code_challenge_method") != "S256" {
		s.refuseAuthorize(w, r, ar, fosite.ErrInvalidRequest.WithHint("PKCE is required: send code_challenge with code_challenge_method S256."), "pkce")
		return
	}
	l := &login{
		ID:       randomString(24),
		Form:     form,
		ClientID: ar.GetClient().GetID(),
		Browser:  kv.Hash(s.browserID(w, r)),
		State:    randomString(24),
		Nonce:    randomString(24),
		Verifier: randomString(48),
		CSRF:     randomString(24),
	}
	// The parameters that carry no secret are what finishing needs; the
	// form of an authorize request has none.
	authURL, err := s.idp.authURL(ctx, l.State, l.Nonce, l.Verifier)
	if err != nil {
		s.logger.Error("authorization server: identity provider unavailable", "error", err)
		s.observe(Event{Endpoint: "authorize", Outcome: "error", Reason: "idp_unavailable"})
		s.writeAuthorizeError(w, ar, fosite.ErrTemporarilyUnavailable.WithHint("The identity provider cannot be reached; try again shortly."))
		return
	}
	if err := s.saveLogin(ctx, l); err != nil {
		s.storeFailed(w, r, ar, "authorize", err)
		return
	}
	if err := s.kv.Set(ctx, kv.Join("login-state", kv.Hash(l.State)), []byte(l.ID), s.o.LoginTTL); err != nil {
		s.storeFailed(w, r, ar, "authorize", err)
		return
	}
	s.observe(Event{Endpoint: "authorize", Outcome: "ok"})
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// refuseAuthorize answers an authorize request fosite or a check refused:
// to the client's redirect URI once fosite trusts it, else on a page.
func (s *Server) refuseAuthorize(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, err error, reason string) {
	s.observe(Event{Endpoint: "authorize", Outcome: "refused", Reason: reason})
	s.writeAuthorizeError(w, ar, err)
}

// replay rebuilds the client's authorize request from l, so fosite
// validates it again (the client may have changed since).
func (s *Server) replay(r *http.Request, l *login) (fosite.AuthorizeRequester, error) {
	r2 := r.Clone(r.Context())
	r2.Method = http.MethodGet
	r2.URL = &url.URL{Path: PathAuthorize, RawQuery: l.Form.Encode()}
	r2.Form, r2.PostForm, r2.MultipartForm = nil, nil, nil
	r2.Body, r2.ContentLength = http.NoBody, 0
	r2.Header.Del("Content-Type")
	return s.provider.NewAuthorizeRequest(r.Context(), r2)
}

func (s *Server) storeFailed(w http.ResponseWriter, r *http.Request, ar fosite.AuthorizeRequester, endpoint string, err error) {
	s.logger.Error("authorization server: store failed", "endpoint", endpoint, "error", err)
	s.observe(Event{Endpoint: endpoint, Outcome: "error", Reason: "store"})
	if ar != nil {
		s.writeAuthorizeError(w, ar, storeError(err))
		return
	}
	s.page(w, http.StatusServiceUnavailable, "Try again shortly", "The sign-in service is temporarily unavailable.")
}

// finish issues the code for l's approved request and sends the browser
// back to the client with it and the issuer (RFC 9207).
func (s *Server) finish(w http.ResponseWriter, r *http.Request, l *login) {
	ctx := r.Context()
	ar, err := s.replay(r, l)
	if err != nil {
		s.refuseAuthorize(w, r, ar, err, "invalid_request")
		return
	}
	res, ok := s.requestedResource(ar.GetRequestForm()["resource"])
	if !ok {
		// Checked at the authorization endpoint; the servers changed since.
		s.refuseAuthorize(w, r, ar, s.errInvalidTarget(), "invalid_target")
		return
	}
	for _, sc := range s.offeredOf(res, ar.GetRequestedScopes()) {
		if s.mayGrant(*l.User, sc) {
			ar.GrantScope(sc)
		}
	}
	// The code is for this resource alone: the token endpoint reads it
	// from the requested audience (fosite carries that, not the granted
	// one, from the code to the token request) and grants it to the
	// tokens.
	ar.SetRequestedAudience(fosite.Arguments{res.URL})
	ar.GrantAudience(res.URL)
	resp, err := s.provider.NewAuthorizeResponse(ctx, ar, sessionFor(*l.User, l.ClientID, s.keys.signer().KeyID))
	if err != nil {
		s.logger.Warn("authorization server: authorization refused", "client_id", l.ClientID, "error", err)
		s.observe(Event{Endpoint: "consent", Outcome: "error", Reason: "issue"})
		s.writeAuthorizeError(w, ar, storeError(err))
		return
	}
	s.clients.touch(ctx, ar.GetClient())
	s.logger.Info("audit", "event", "code_issued", "client_id", l.ClientID, "sub", l.User.Subject, "resource", res.URL, "scope", strings.Join(ar.GetGrantedScopes(), " "))
	s.writeAuthorizeResponse(w, ar, resp)
}

// finishError sends the browser back to the client with err.
func (s *Server) finishError(w http.ResponseWriter, r *http.Request, l *login, err error) {
	_ = s.kv.Del(r.Context(), kv.Join("login", l.ID))
	if l.Return != "" {
		s.page(w, http.StatusForbidden, "Sign-in refused", "Signing in at the identity provider failed. Start again from the page you came from.")
		return
	}
	ar, rerr := s.replay(r, l)
	if rerr != nil {
		s.writeAuthorizeError(w, ar, rerr)
		return
	}
	s.writeAuthorizeError(w, ar, err)
}
