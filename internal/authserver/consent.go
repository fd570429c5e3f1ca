package authserver

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/ory/fosite"
)

// The consent page and the short pages of failures: server-rendered, no
// script, no external resources; never framed. They are written with
// every value escaped by html.EscapeString rather than with html/template,
// whose reflective field lookup would keep every exported method of the
// binary alive (cmd/server's TestReleaseBuildPrunesUnusedMethods); every
// value sits in element text or a double-quoted attribute, where that
// escaping is complete.
const pageHead = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s</title>
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
`

const pageFoot = `</main>
</body>
</html>
`

// render writes d's page.
func render(w io.Writer, d pageData) {
	e := html.EscapeString
	var b strings.Builder
	fmt.Fprintf(&b, pageHead, e(d.Title))
	if !d.Consent {
		fmt.Fprintf(&b, "<h1>%s</h1>\n<p>%s</p>\n", e(d.Title), e(d.Message))
		b.WriteString(pageFoot)
		io.WriteString(w, b.String())
		return
	}
	fmt.Fprintf(&b, "<h1>Allow <span class=\"app\">%s</span> to use %s?</h1>\n", e(d.Client), e(d.Resource))
	fmt.Fprintf(&b, "<p>Signed in as <strong>%s</strong>.</p>\n", e(d.User))
	if d.Note != "" {
		fmt.Fprintf(&b, "<p class=\"note\">%s</p>\n", e(d.Note))
	}
	fmt.Fprintf(&b, "<p>If you allow it, <span class=\"app\">%s</span> can call the tools of %s on your behalf", e(d.Client), e(d.Resource))
	if len(d.Scopes) > 0 {
		b.WriteString(" with these permissions:</p>\n<ul>")
		for _, sc := range d.Scopes {
			fmt.Fprintf(&b, "<li><code>%s</code></li>", e(sc))
		}
		b.WriteString("</ul>\n")
	} else {
		b.WriteString(".</p>\n")
	}
	fmt.Fprintf(&b, "<p class=\"note\">You will be sent back to <strong>%s</strong>. Allow only if you started this from an application you trust.</p>\n", e(d.RedirectHost))
	fmt.Fprintf(&b, "<form method=\"post\" action=\"%s\">\n", e(d.Action))
	fmt.Fprintf(&b, "<input type=\"hidden\" name=\"login\" value=\"%s\">\n", e(d.Login))
	fmt.Fprintf(&b, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">\n", e(d.CSRF))
	b.WriteString("<div class=\"buttons\">\n<button type=\"submit\" name=\"action\" value=\"approve\">Allow</button>\n<button type=\"submit\" name=\"action\" value=\"deny\">Deny</button>\n</div>\n</form>\n")
	b.WriteString(pageFoot)
	io.WriteString(w, b.String())
}

type pageData struct {
	Title, Message              string
	Consent                     bool
	Client, Resource, User      string
	RedirectHost, Action, Login string
	CSRF, Note                  string
	Scopes                      []string
}

// pageHeaders keep the pages out of frames, caches and other sites'
// referrers, and allow them no script.
//
// The referrer policy is same-origin, not no-referrer: under no-referrer a
// browser sends the consent form's POST with "Origin: null" (Fetch,
// "serializing a request origin"), which sameOrigin must refuse, so no
// real browser could answer the page. same-origin still sends no Referer
// (the page's URL names the sign-in) to any other origin.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
}

// page answers with a short page.
func (s *Server) page(w http.ResponseWriter, status int, title, message string) {
	pageHeaders(w)
	w.WriteHeader(status)
	render(w, pageData{Title: title, Message: message})
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
	scopes, withheld := s.grantable(*l.User, strings.Fields(l.Form.Get("scope")))
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
		Resource:     s.resource,
		User:         user,
		RedirectHost: host,
		Action:       PathConsent,
		Login:        l.ID,
		CSRF:         l.CSRF,
		Scopes:       scopes,
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
