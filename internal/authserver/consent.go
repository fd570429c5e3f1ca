package authserver

import (
	"crypto/subtle"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"
)

// The consent page and the short pages of failures: server-rendered, no
// script, no external resources; never framed.
var pages = template.Must(template.New("consent").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1a1a1a}
h1{font-size:1.4rem}
.app{font-weight:600}
ul{padding-left:1.2rem}
.buttons{display:flex;gap:1rem;margin-top:1.5rem}
button{font-size:1rem;padding:.6rem 1.2rem;border-radius:.4rem;border:1px solid #555;cursor:pointer}
button[value=approve]{background:#0b57d0;color:#fff;border-color:#0b57d0}
button:focus-visible{outline:3px solid #f9ab00;outline-offset:2px}
.note{color:#444;font-size:.9rem}
</style>
</head>
<body>
<main>
{{if .Consent}}
<h1>Allow <span class="app">{{.Client}}</span> to use {{.Resource}}?</h1>
<p>Signed in as <strong>{{.User}}</strong>.</p>
{{if .Note}}<p class="note">{{.Note}}</p>{{end}}
<p>If you allow it, <span class="app">{{.Client}}</span> can call the tools of {{.Resource}} on your behalf{{if .Scopes}} with these permissions:{{else}}.{{end}}</p>
{{if .Scopes}}<ul>{{range .Scopes}}<li><code>{{.}}</code></li>{{end}}</ul>{{end}}
<p class="note">You will be sent back to <strong>{{.RedirectHost}}</strong>. Allow only if you started this from an application you trust.</p>
<form method="post" action="{{.Action}}">
<input type="hidden" name="login" value="{{.Login}}">
<input type="hidden" name="csrf" value="{{.CSRF}}">
<div class="buttons">
<button type="submit" name="action" value="approve">Allow</button>
<button type="submit" name="action" value="deny">Deny</button>
</div>
</form>
{{else}}
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
{{end}}
</main>
</body>
</html>
`))

type pageData struct {
	Title, Message              string
	Consent                     bool
	Client, Resource, User      string
	RedirectHost, Action, Login string
	CSRF, Note                  string
	Scopes                      []string
}

// pageHeaders keep the pages out of frames, caches and referrers, and
// allow them no script.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// page answers with a short page.
func (s *Server) page(w http.ResponseWriter, status int, title, message string) {
	pageHeaders(w)
	w.WriteHeader(status)
	_ = pages.Execute(w, pageData{Title: title, Message: message})
}

// serveConsentPage shows the consent page of a signed-in login.
func (s *Server) serveConsentPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	l, err := s.loadLogin(ctx, r.URL.Query().Get("login"), false)
	if errors.Is(err, ErrNotFound) {
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
	name, note := displayName(c)
	pageHeaders(w)
	_ = pages.Execute(w, pageData{
		Title:        "Allow access?",
		Consent:      true,
		Client:       name,
		Note:         note,
		Resource:     s.resource,
		User:         user,
		RedirectHost: host,
		Action:       PathConsent,
		Login:        l.ID,
		CSRF:         l.CSRF,
		Scopes:       strings.Fields(l.Form.Get("scope")),
	})
}

// serveConsent takes the user's answer. It refuses a POST from another
// site (Origin, Sec-Fetch-Site), from another browser (the binding
// cookie), or without the page's token; a login is answered once.
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
	if errors.Is(err, ErrNotFound) {
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
	if _, err := s.kv.GetDel(ctx, joinKey("login", l.ID)); err != nil {
		s.page(w, http.StatusBadRequest, "Sign-in expired", "This sign-in was answered already.")
		return
	}
	scopes := strings.Fields(l.Form.Get("scope"))
	if r.PostForm.Get("action") != "approve" {
		s.logger.Info("audit", "event", "consent_denied", "client_id", l.ClientID, "sub", l.User.Subject)
		s.observe(Event{Endpoint: "consent", Outcome: "refused", Reason: "denied"})
		s.finishError(w, r, l, fosite.ErrAccessDenied.WithHint("The user denied the request."))
		return
	}
	s.logger.Info("audit", "event", "consent_given", "client_id", l.ClientID, "sub", l.User.Subject, "scope", strings.Join(scopes, " "))
	s.observe(Event{Endpoint: "consent", Outcome: "ok"})
	s.remember(ctx, *l.User, l.ClientID, scopes)
	s.finish(w, r, l)
}

// sameOrigin refuses a cross-site POST: a browser says where a form came
// from in Sec-Fetch-Site and Origin.
func (s *Server) sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		return o == s.o.Issuer
	}
	return r.Header.Get("Origin") != "null"
}
