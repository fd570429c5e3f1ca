package connect

import (
	"html/template"
	"net/http"
	"net/url"

	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// pageTemplate is every page: a message, or the list of connections with
// a form per action. The pages load nothing and run no script.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>{{.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;color:#222}
li{margin:.8rem 0;list-style:none}form{display:inline}button{margin-left:1rem}.note{color:#666}</style>
</head><body><h1>{{.Title}}</h1>
{{with .Message}}<p>{{.}}</p>{{end}}
{{with .Continue}}<p><a href="{{.}}">Continue without it</a></p>{{end}}
{{if .Connections}}<ul>{{range .Connections}}<li><strong>{{.Title}}</strong>
{{if .Connected}}<span class="note">connected {{.Since}}</span>
<form method="post" action="{{.Disconnect}}"><button type="submit">Disconnect</button></form>
{{else}}<span class="note">not connected</span>
<form method="post" action="{{.Connect}}"><button type="submit">Connect</button></form>{{end}}</li>{{end}}</ul>{{end}}
</body></html>
`))

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
	_ = pageTemplate.Execute(w, pageData{Title: title, Message: msg, Continue: next})
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
	_ = pageTemplate.Execute(w, d)
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
