package authserver

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"

	"github.com/ory/fosite"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// The authorization endpoint answers in the query of the client's
// redirect URI only (the metadata says response_modes_supported [query]),
// with RFC 9207's iss on every answer, success or error. fosite's own
// writers also render form_post responses with html/template, whose
// reflective method lookup would keep every exported method of the binary
// alive (cmd/server's TestReleaseBuildPrunesUnusedMethods); these two
// write what fosite decided, in the one mode this server offers.

// writeAuthorizeResponse sends the browser back to the client with resp's
// parameters (the code, the state) and the issuer.
func (s *Server) writeAuthorizeResponse(w http.ResponseWriter, ar fosite.AuthorizeRequester, resp fosite.AuthorizeResponder) {
	for k := range resp.GetHeader() {
		w.Header().Set(k, resp.GetHeader().Get(k))
	}
	params := url.Values{}
	for k, v := range resp.GetParameters() {
		params[k] = v
	}
	s.redirectBack(w, ar, params)
}

// writeAuthorizeError sends err back to the client when fosite trusts the
// redirect URI (a known client, a registered URI); otherwise the user
// gets a page and nobody is redirected anywhere.
func (s *Server) writeAuthorizeError(w http.ResponseWriter, ar fosite.AuthorizeRequester, err error) {
	rfc := fosite.ErrorToRFC6749Error(err)
	if ar == nil || !ar.IsRedirectURIValid() || ar.GetRedirectURI() == nil {
		s.page(w, rfc.StatusCode(), "Sign-in refused", rfc.GetDescription())
		return
	}
	params := rfc.ToValues()
	params.Set("state", ar.GetState())
	s.redirectBack(w, ar, params)
}

// redirectBack merges params and iss into the redirect URI's query.
func (s *Server) redirectBack(w http.ResponseWriter, ar fosite.AuthorizeRequester, params url.Values) {
	u := *ar.GetRedirectURI()
	u.Fragment = ""
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	q.Set("iss", s.o.Issuer)
	u.RawQuery = q.Encode()
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Location", u.String())
	w.WriteHeader(http.StatusSeeOther)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errInvalidTarget is RFC 8707's error for a resource this server does
// not issue tokens for.
func (s *Server) errInvalidTarget() *fosite.RFC6749Error {
	return &fosite.RFC6749Error{
		ErrorField:       "invalid_target",
		DescriptionField: "The requested resource is invalid, missing, unknown, or malformed.",
		HintField:        s.invalidTargetHint(),
		CodeField:        http.StatusBadRequest,
	}
}

// storeError maps a store outage to 503 temporarily_unavailable.
func storeError(err error) error {
	if errors.Is(err, kv.ErrUnavailable) {
		return fosite.ErrTemporarilyUnavailable.WithWrap(err).WithHint("The authorization server's store is unavailable; try again shortly.")
	}
	return err
}
