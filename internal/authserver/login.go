package authserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// login is a sign-in in progress: the client's authorize request, waiting
// for the user to sign in at the provider and consent.
type login struct {
	ID       string     `json:"id"`
	Form     url.Values `json:"form"`
	ClientID string     `json:"client_id"`
	Browser  string     `json:"browser"` // SHA-256 of the browser's cookie
	State    string     `json:"state"`
	Nonce    string     `json:"nonce"`
	Verifier string     `json:"verifier"`
	User     *User      `json:"user,omitempty"`
	CSRF     string     `json:"csrf"`
	// Return, for a browser's own sign-in (SignInBrowser), is the local
	// path it returns to; such a sign-in has no client.
	Return string `json:"return,omitempty"`
	// Attempted are the accounts whose connection this sign-in chained
	// already (Deps.NextConnection), connected or not.
	Attempted []string `json:"attempted,omitempty"`
}

// cookieName is the browser-binding cookie: the sign-in continues only in
// the browser that started it.
func (s *Server) cookieName() string {
	if s.secure {
		return "__Host-portcullis-login"
	}
	return "portcullis-login"
}

func randomString(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// browserID returns the browser's binding secret, setting the cookie when
// the browser has none.
func (s *Server) browserID(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(s.cookieName()); err == nil && len(c.Value) >= 32 {
		return c.Value
	}
	v := randomString(32)
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: v, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.o.LoginTTL / time.Second),
	})
	return v
}

// sameBrowser reports whether r comes from the browser that started l.
func (s *Server) sameBrowser(r *http.Request, l *login) bool {
	c, err := r.Cookie(s.cookieName())
	return err == nil && subtle.ConstantTimeCompare([]byte(kv.Hash(c.Value)), []byte(l.Browser)) == 1
}

func (s *Server) saveLogin(ctx context.Context, l *login) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return s.kv.Set(ctx, kv.Join("login", l.ID), b, s.o.LoginTTL)
}

func (s *Server) loadLogin(ctx context.Context, id string, take bool) (*login, error) {
	get := s.kv.Get
	if take {
		get = s.kv.GetDel
	}
	b, err := get(ctx, kv.Join("login", id))
	if err != nil {
		return nil, err
	}
	var l login
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	return &l, nil
}
