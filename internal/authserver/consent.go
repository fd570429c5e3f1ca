package authserver

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ory/fosite"

	"github.com/portcullis-mcp/portcullis/internal/audit"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// serveConsentPage shows the consent page of a signed-in login.
func (s *Server) serveConsentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l, err := s.loadLogin(ctx, r.URL.Query().Get("login"), false)
	if errors.Is(err, kv.ErrNotFound) {
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown or has expired. Start again from your application.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "consent", err)
		return
	}
	if l.User == nil || !s.sameBrowser(r, l) {
		s.page(w, http.StatusBadRequest, "Sign-in refused", "This sign-in was started in another browser, or not finished.")
		return
	}
	c, err := s.clients.GetClient(ctx, l.ClientID)
	if err != nil {
		s.page(w, http.StatusBadRequest, "Unknown application", "The application that started this sign-in is no longer known.")
		return
	}
	host := l.Form.Get("redirect_uri")
	if u, err := url.Parse(host); err == nil {
		if u.Host != "" {
			host = u.Host
		} else {
			host = u.Scheme + ":"
		}
	}
	user := l.User.Email
	if user == "" {
		user = l.User.Name
	}
	if user == "" {
		user = l.User.Subject
	}
	res, ok := s.requestedResource(l.Form["resource"])
	if !ok {
		// Checked at the authorization endpoint; the servers changed since.
		s.page(w, http.StatusBadRequest, "Unknown server", "The server this sign-in is for is no longer served here. Start again from your application.")
		return
	}
	name, note := displayName(c)
	scopes, withheld := s.grantable(*l.User, s.offeredOf(res, strings.Fields(l.Form.Get("scope"))))
	if len(withheld) > 0 {
		if note != "" {
			note += " "
		}
		note += "Not granted, since your groups do not allow it: " + strings.Join(withheld, ", ") + "."
	}
	pageHeaders(w)
	render(w, pageData{
		Title:        "Allow access?",
		Consent:      true,
		Client:       name,
		Note:         note,
		Server:       res.display(),
		Resource:     res.URL,
		User:         user,
		RedirectHost: host,
		Action:       PathConsent,
		Login:        l.ID,
		CSRF:         l.CSRF,
		Scopes:       scopes,
	})
}

// serveConsent takes the user's answer. It refuses a POST that does not
// name this server as its Origin (or whose Sec-Fetch-Site says another
// site), from another browser (the binding cookie), or without the
// page's token; a login is answered once.
func (s *Server) serveConsent(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !s.sameOrigin(r) {
		s.observe(Event{Endpoint: "consent", Outcome: "refused", Reason: "cross_site"})
		s.page(w, http.StatusForbidden, "Request refused", "The answer did not come from this sign-in page.")
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := r.ParseForm(); err != nil {
		s.page(w, http.StatusBadRequest, "Request refused", "The form could not be read.")
		return
	}
	id := r.PostForm.Get("login")
	l, err := s.loadLogin(ctx, id, false)
	if errors.Is(err, kv.ErrNotFound) {
		s.observe(Event{Endpoint: "consent", Outcome: "refused", Reason: "expired"})
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown, has expired or was answered already.")
		return
	}
	if err != nil {
		s.storeFailed(w, r, nil, "consent", err)
		return
	}
	if l.User == nil || !s.sameBrowser(r, l) || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(l.CSRF)) != 1 {
		s.observe(Event{Endpoint: "consent", Outcome: "refused", Reason: "csrf"})
		s.page(w, http.StatusForbidden, "Request refused", "The answer did not come from this sign-in page.")
		return
	}
	// Answered once: the winner of a double submit takes the login.
	if _, err := s.kv.GetDel(ctx, kv.Join("login", l.ID)); err != nil {
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in was answered already.")
		return
	}
	scopes := strings.Fields(l.Form.Get("scope"))
	if r.PostForm.Get("action") != "approve" {
		s.logger.Info("audit", "event", "consent_denied", "client_id", l.ClientID, "sub", l.User.Subject)
		s.record(ctx, audit.TypeConsent, audit.OutcomeRefused, l.ClientID, l.User.Subject, scopes, "resource", l.Form.Get("resource"))
		s.observe(Event{Endpoint: "consent", Outcome: "refused", Reason: "denied"})
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("The user denied the request."))
		return
	}
	s.logger.Info("audit", "event", "consent_given", "client_id", l.ClientID, "sub", l.User.Subject, "resource", l.Form.Get("resource"), "scope", strings.Join(scopes, " "))
	s.record(ctx, audit.TypeConsent, audit.OutcomeSuccess, l.ClientID, l.User.Subject, scopes, "resource", l.Form.Get("resource"))
	s.observe(Event{Endpoint: "consent", Outcome: "ok"})
	s.remember(ctx, *l.User, l.ClientID, l.Form.Get("resource"), scopes)
	s.finish(w, r, l)
}

// sameOrigin accepts only a POST from a page of this server: Origin must
// name the issuer's origin (the issuer has no path). A browser sends
// Origin with every form POST, so an answer without one did not come
// from the consent page; Sec-Fetch-Site, when sent, must say same-origin
// too.
func (s *Server) sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin":
	default:
		return false
	}
	return sameOriginURL(r.Header.Get("Origin"), s.o.Issuer)
}

// sameOriginURL reports whether origin (an Origin header) names the
// origin of issuer (an absolute URL without a path): the same scheme and
// host, case aside, and the same port, a default port (80 for http, 443
// for https) written or not. "null" and anything unparsable do not match.
func sameOriginURL(origin, issuer string) bool {
	o, err := url.Parse(origin)
	if err != nil || o.Path != "" || o.RawQuery != "" || o.User != nil {
		return false
	}
	i, err := url.Parse(issuer)
	if err != nil {
		return false
	}
	port := func(u *url.URL) string {
		if p := u.Port(); p != "" {
			return p
		}
		switch strings.ToLower(u.Scheme) {
		case "https":
			return "443"
		case "http":
			return "80"
		}
		return ""
	}
	return o.Scheme != "" && strings.EqualFold(o.Scheme, i.Scheme) &&
		o.Hostname() != "" && strings.EqualFold(o.Hostname(), i.Hostname()) &&
		port(o) == port(i)
}

// consented reports whether u approved clientID's use of resource for
// every one of scopes within consent.remember_for. A store failure asks
// again.
func (s *Server) consented(ctx context.Context, u User, clientID, resource string, scopes []string) bool {
	if s.o.Consent.RememberFor < 0 {
		return false
	}
	b, err := s.kv.Get(ctx, consentKey(u, clientID, resource))
	if err != nil {
		return false
	}
	var granted []string
	if json.Unmarshal(b, &granted) != nil {
		return false
	}
	for _, sc := range scopes {
		if !slices.Contains(granted, sc) {
			return false
		}
	}
	return true
}

// remember records u's approval of clientID's use of resource for
// scopes, besides those approved before.
func (s *Server) remember(ctx context.Context, u User, clientID, resource string, scopes []string) {
	if s.o.Consent.RememberFor < 0 {
		return
	}
	key := consentKey(u, clientID, resource)
	var granted []string
	if b, err := s.kv.Get(ctx, key); err == nil {
		_ = json.Unmarshal(b, &granted)
	}
	for _, sc := range scopes {
		if !slices.Contains(granted, sc) {
			granted = append(granted, sc)
		}
	}
	b, _ := json.Marshal(nonNil(granted))
	if err := s.kv.Set(ctx, key, b, s.o.Consent.RememberFor); err != nil {
		s.logger.Warn("authorization server: consent not remembered", "error", err)
	}
}
