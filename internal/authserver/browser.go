package authserver

// A browser's own sign-in, for Portcullis's pages (the connections page):
// the user signs in at the identity provider as for an authorize request,
// with the same checks, and the browser gets a session cookie, sealed
// with the server's store keys, that names the user for an hour.

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// BrowserSessionTTL is how long a browser's sign-in lasts.
const BrowserSessionTTL = time.Hour

// browserSession is the sealed content of the session cookie.
type browserSession struct {
	Subject string    `json:"sub"`
	Expires time.Time `json:"exp"`
}

// sessionCookieName is the browser session's cookie.
func (s *Server) sessionCookieName() string {
	if s.secure {
		return "__Host-portcullis-session"
	}
	return "portcullis-session"
}

// BrowserUser returns the subject the browser of r signed in as (the
// identity provider's sub, as in the access tokens this server issues),
// while its session lasts.
func (s *Server) BrowserUser(r *http.Request) (subject string, ok bool) {
	c, err := r.Cookie(s.sessionCookieName())
	if err != nil {
		return "", false
	}
	sealed, err := decodeCookie(c.Value)
	if err != nil {
		return "", false
	}
	plain, err := s.sealer.open(sealed, s.sessionCookieName())
	if err != nil {
		return "", false
	}
	var b browserSession
	if json.Unmarshal(plain, &b) != nil || b.Subject == "" || !s.now().Before(b.Expires) {
		return "", false
	}
	return b.Subject, true
}

// LocalPath reports whether p is a path on this server that a sign-in may
// return to: absolute, with no scheme or host, no backslash and no
// control character.
func LocalPath(p string) bool {
	return strings.HasPrefix(p, "/") && !strings.HasPrefix(p, "//") && !strings.ContainsAny(p, "\\") &&
		!strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// SignInBrowser sends the browser to sign in at the identity provider and,
// once signed in, back to returnTo, a local path ([LocalPath]).
func (s *Server) SignInBrowser(w http.ResponseWriter, r *http.Request, returnTo string) {
	if !LocalPath(returnTo) {
		s.page(w, http.StatusBadRequest, "Sign-in refused", "The page to return to is not on this server.")
		return
	}
	ctx := r.Context()
	l := &login{
		ID:       randomString(24),
		Return:   returnTo,
		Browser:  kv.Hash(s.browserID(w, r)),
		State:    randomString(24),
		Nonce:    randomString(24),
		Verifier: randomString(48),
	}
	authURL, err := s.idp.authURL(ctx, l.State, l.Nonce, l.Verifier)
	if err != nil {
		s.logger.Error("authorization server: identity provider unavailable", "error", err)
		s.observe(Event{Endpoint: "browser", Outcome: "error", Reason: "idp_unavailable"})
		s.page(w, http.StatusServiceUnavailable, "Sign-in unavailable", "The identity provider cannot be reached; try again shortly.")
		return
	}
	if err := s.saveLogin(ctx, l); err != nil {
		s.storeFailed(w, r, nil, "browser", err)
		return
	}
	if err := s.kv.Set(ctx, kv.Join("login-state", kv.Hash(l.State)), []byte(l.ID), s.o.LoginTTL); err != nil {
		s.storeFailed(w, r, nil, "browser", err)
		return
	}
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// finishBrowser ends a browser's sign-in: the session cookie, then the
// page it returns to.
func (s *Server) finishBrowser(w http.ResponseWriter, r *http.Request, l *login, u User) {
	_ = s.kv.Del(r.Context(), kv.Join("login", l.ID))
	s.setSessionCookie(w, u)
	http.Redirect(w, r, l.Return, http.StatusSeeOther)
}

// setSessionCookie gives the browser the session that names u for
// BrowserSessionTTL.
func (s *Server) setSessionCookie(w http.ResponseWriter, u User) {
	plain, _ := json.Marshal(browserSession{Subject: u.Subject, Expires: s.now().Add(BrowserSessionTTL)})
	http.SetCookie(w, &http.Cookie{
		Name: s.sessionCookieName(), Value: encodeCookie(s.sealer.seal(plain, s.sessionCookieName())), Path: "/",
		HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(BrowserSessionTTL / time.Second),
	})
}

func encodeCookie(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func decodeCookie(v string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(v) }
