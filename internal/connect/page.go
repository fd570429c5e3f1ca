package connect

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// The pages are written with every value escaped by html.EscapeString
// rather than with html/template, whose reflective field lookup would keep
// every exported method of the binary alive (cmd/server's
// TestReleaseBuildPrunesUnusedMethods); every value sits in element text
// or a double-quoted attribute, where that escaping is complete. They load
// nothing and run no script.
const pageHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>%s</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
li{margin:.8rem 0;list-style:none}form{display:inline}button{margin-left:1rem}.note{color:#666}</style>
</head><body><h1>%s</h1>
`

// render writes d's page.
func render(w io.Writer, d pageData) {
	e := html.EscapeString
	var b strings.Builder
	fmt.Fprintf(&b, pageHead, e(d.Title), e(d.Title))
	if d.Message != "" {
		fmt.Fprintf(&b, "<p>%s</p>\n", e(d.Message))
	}
	if d.Continue != "" {
		fmt.Fprintf(&b, "<p><a href=\"%s\">Continue without it</a></p>\n", e(d.Continue))
	}
	if len(d.Connections) > 0 {
		b.WriteString("<ul>")
		for _, c := range d.Connections {
			fmt.Fprintf(&b, "<li><strong>%s</strong>\n", e(c.Title))
			if c.Connected {
				fmt.Fprintf(&b, "<span class=\"note\">connected %s</span>\n<form method=\"post\" action=\"%s\"><button type=\"submit\">Disconnect</button></form>", e(c.Since), e(c.Disconnect))
			} else {
				fmt.Fprintf(&b, "<span class=\"note\">not connected</span>\n<form method=\"post\" action=\"%s\"><button type=\"submit\">Connect</button></form>", e(c.Connect))
			}
			b.WriteString("</li>\n")
		}
		b.WriteString("</ul>\n")
	}
	b.WriteString("</body></html>\n")
	io.WriteString(w, b.String())
}

type pageData struct {
	Title, Message string
	// Continue is a local path the user may go on to (a sign-in that
	// chained this connection).
	Continue    string
	Connections []pageConnection
}

type pageConnection struct {
	Title, Since, Connect, Disconnect string
	Connected                         bool
}

// headers keep a page out of frames and caches, with no script and no
// referrer to other origins.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Content-Type-Options", "nosniff")
}

// message answers with a short page, with a link to next, a local path
// (none when empty).
func message(w http.ResponseWriter, status int, title, msg, next string) {
	headers(w)
	w.WriteHeader(status)
	render(w, pageData{Title: title, Message: msg, Continue: next})
}

// message answers with a short page.
func (s *Service) message(w http.ResponseWriter, status int, title, msg string) {
	message(w, status, title, msg, "")
}

// servePage lists the signed-in user's connections.
func (s *Service) servePage(w http.ResponseWriter, r *http.Request) {
	owner, ok := s.user(w, r, PathPage)
	if !ok {
		return
	}
	d := pageData{Title: "Connected accounts"}
	for _, c := range s.o.Connections {
		pc := pageConnection{Title: c.Title, Connect: PathPrefix + "/" + url.PathEscape(c.Name) + "/connect",
			Disconnect: PathPrefix + "/" + url.PathEscape(c.Name) + "/disconnect"}
		if pc.Title == "" {
			pc.Title = c.Name
		}
		if e, _, err := s.o.Vault.Get(r.Context(), c.Name, owner); err == nil {
			pc.Connected, pc.Since = true, e.Connected.UTC().Format("2006-01-02 15:04 UTC")
		}
		d.Connections = append(d.Connections, pc)
	}
	if len(d.Connections) == 0 {
		d.Message = "No service here needs a connected account."
	}
	headers(w)
	render(w, d)
}

// user returns the owner r's browser is signed in as; when it is not
// signed in, the browser is sent to sign in and back to r.
func (s *Service) user(w http.ResponseWriter, r *http.Request, returnTo string) (vault.Owner, bool) {
	sub, ok := s.o.SignIn.BrowserUser(r)
	if !ok {
		s.o.SignIn.SignInBrowser(w, r, returnTo)
		return vault.Owner{}, false
	}
	return vault.Owner{Issuer: s.o.OwnerIssuer, Subject: sub}, true
}
