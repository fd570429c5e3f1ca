package authserver

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
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
.app,.server{font-weight:600}
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
	// The server by its name when it has one, then with its URL too.
	server, serverAt := e(d.Resource), e(d.Resource)
	if d.Server != "" {
		server = "<span class=\"server\">" + e(d.Server) + "</span>"
		serverAt = server + " (" + e(d.Resource) + ")"
	}
	fmt.Fprintf(&b, "<h1>Allow <span class=\"app\">%s</span> to use %s?</h1>\n", e(d.Client), server)
	fmt.Fprintf(&b, "<p>Signed in as <strong>%s</strong>.</p>\n", e(d.User))
	if d.Note != "" {
		fmt.Fprintf(&b, "<p class=\"note\">%s</p>\n", e(d.Note))
	}
	fmt.Fprintf(&b, "<p>If you allow it, <span class=\"app\">%s</span> can call the tools of %s on your behalf", e(d.Client), serverAt)
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

// pageData is what a page shows. On the consent page, Server is the
// name of the MCP server the sign-in is for (empty: none, the page names
// it by its URL alone) and Resource its URL.
type pageData struct {
	Title, Message              string
	Consent                     bool
	Client, Server, Resource    string
	User                        string
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
