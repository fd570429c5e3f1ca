// Package connect is users' connected accounts: Portcullis as an OAuth
// client of an upstream's own authorization server (authorization code
// with PKCE, RFC 8707 resource, RFC 9207 iss checked), each user's tokens
// kept in the vault (internal/vault), refreshed before they expire, and
// the pages where a signed-in user connects and disconnects accounts.
//
// A call that needs a connection the caller lacks gets a link to the
// connect page ([Service.Require]); the page signs the browser in and
// refuses to go on for a user other than the one the link was made for.
// No token this package handles ever reaches a page, a log line or an
// error.
package connect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// New returns the service of o.
func New(o Options) (*Service, error) {
	var errs []error
	if _, err := url.Parse(o.BaseURL); err != nil || !strings.HasPrefix(o.BaseURL, "http") {
		errs = append(errs, fmt.Errorf("connect: base URL %q is not an http(s) URL", o.BaseURL))
	}
	if o.Vault == nil || o.KV == nil || o.SignIn == nil {
		errs = append(errs, errors.New("connect: a vault, a store and a sign-in are required"))
	}
	s := &Service{o: o, conns: map[string]*conn{}, cache: map[cacheKey]cached{}}
	for _, c := range o.Connections {
		if c.Name == "" || c.ClientID == "" {
			errs = append(errs, fmt.Errorf("connect: connection %q needs a name and a client id", c.Name))
		}
		if c.Issuer == "" && c.ResourceURL == "" {
			errs = append(errs, fmt.Errorf("connect: connection %q needs an issuer or the upstream's URL to discover it", c.Name))
		}
		if _, dup := s.conns[c.Name]; dup {
			errs = append(errs, fmt.Errorf("connect: duplicate connection %q", c.Name))
		}
		if c.Title == "" {
			c.Title = c.Name
		}
		s.conns[c.Name] = &conn{Connection: c}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s.o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	if s.o.HTTPClient == nil {
		s.o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if s.o.Now == nil {
		s.o.Now = time.Now
	}
	if s.o.Logger == nil {
		s.o.Logger = slog.New(slog.DiscardHandler)
	}
	if s.o.Observe == nil {
		s.o.Observe = func(Event) {}
	}
	if s.o.Audit == nil {
		s.o.Audit = func(context.Context, string, string, vault.Owner, string, ...string) {}
	}
	if s.o.Completed == nil {
		s.o.Completed = func(string) {}
	}
	s.page = s.routes()
	return s, nil
}

// Handler serves the pages under PathPrefix.
func (s *Service) Handler() http.Handler { return s.page }

func (s *Service) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPage, s.servePage)
	mux.HandleFunc("GET "+PathStart, s.serveStart)
	mux.HandleFunc("GET "+PathCallback, s.serveCallback)
	mux.HandleFunc("POST "+PathPrefix+"/{name}/connect", s.serveConnect)
	mux.HandleFunc("POST "+PathPrefix+"/{name}/disconnect", s.serveDisconnect)
	if si, ok := s.o.SignIn.(interface {
		ServeSignedIn(http.ResponseWriter, *http.Request)
	}); ok {
		mux.HandleFunc("GET "+PathSignedIn, si.ServeSignedIn)
	}
	// The forms post from the page itself; a cross-origin post is refused.
	cop := http.NewCrossOriginProtection()
	return cop.Handler(mux)
}
