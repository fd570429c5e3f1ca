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
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/vault"
)

// Paths of the pages, under the server's base URL.
const (
	PathPrefix   = "/connections"
	PathPage     = PathPrefix
	PathStart    = PathPrefix + "/start"
	PathCallback = PathPrefix + "/callback"
)

// FlowTTL is how long a connect link and a flow at the upstream's
// authorization server stay usable.
const FlowTTL = 10 * time.Minute

// EarlyRefresh is how long before it expires a token is refreshed.
const EarlyRefresh = 30 * time.Second

// ErrNotConnected is [Service.Token]'s answer for a user with no usable
// connection: never connected, disconnected, or dropped by the upstream
// (invalid_grant).
var ErrNotConnected = vault.ErrNotConnected

// Connection is one upstream's authorization server, where Portcullis is
// a registered client.
type Connection struct {
	// Name is the upstream's name: the vault's and the pages' key.
	Name string
	// Title is what the pages call it.
	Title string
	// Issuer is the authorization server's issuer identifier, which its
	// responses' iss must name (RFC 9207). Empty: discovered from the
	// Protected Resource Metadata of ResourceURL.
	Issuer string
	// AuthURL and TokenURL are its endpoints. Empty: discovered from the
	// issuer's metadata (RFC 8414, then OpenID discovery).
	AuthURL, TokenURL string
	// ResourceURL is the upstream MCP server's URL, whose metadata names
	// the authorization server when Issuer is empty.
	ResourceURL string
	// Resource is sent as the RFC 8707 resource parameter. Empty: the
	// resource the metadata names, else none.
	Resource string
	// ClientID is Portcullis's client at the authorization server;
	// ClientSecret reads its secret (nil or "": a public client, PKCE
	// alone).
	ClientID     string
	ClientSecret func() (string, error)
	// Scopes are requested.
	Scopes []string
}

// SignIn is who signs browsers in for the pages.
type SignIn interface {
	// BrowserUser returns the subject r's browser is signed in as.
	BrowserUser(r *http.Request) (subject string, ok bool)
	// SignInBrowser sends the browser to sign in and back to returnTo.
	SignInBrowser(w http.ResponseWriter, r *http.Request, returnTo string)
}

// Event is what the service reports for metrics: an action on a
// connection (connect, refresh, disconnect, read) and its outcome (ok,
// refused, error; read: hit, miss).
type Event struct {
	Connection, Action, Outcome, Reason string
}

// Options configure a [Service].
type Options struct {
	// BaseURL is Portcullis's public URL (scheme and host), where the
	// pages are served.
	BaseURL string
	// Connections are the upstreams users connect.
	Connections []Connection
	// Vault keeps the tokens; KV the flows in progress.
	Vault *vault.Vault
	KV    kv.KV
	// SignIn signs browsers in; OwnerIssuer is the issuer of the tokens
	// its users call Portcullis with (the vault's owner issuer).
	SignIn      SignIn
	OwnerIssuer string
	// HTTPClient calls the authorization servers. Nil: one with a 30 s
	// timeout.
	HTTPClient *http.Client
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Logger gets failures, never a token. Nil: discarded.
	Logger *slog.Logger
	// Observe gets each event. Nil: none.
	Observe func(Event)
	// Audit records connect, refresh and disconnect for owner.
	Audit func(ctx context.Context, action, outcome string, owner vault.Owner, connection string, detail ...string)
	// Completed is told of an elicitation (a connect link) completed.
	Completed func(elicitationID string)
}

// Service is the connected accounts of every user.
type Service struct {
	o     Options
	conns map[string]*conn
	page  http.Handler

	mu    sync.Mutex
	cache map[cacheKey]cached
	group singleflight.Group
}

// conn is a Connection with its discovered endpoints.
type conn struct {
	Connection
	mu   sync.Mutex
	meta *endpoints // nil until discovered
}

// endpoints are an authorization server's, as configured or discovered.
type endpoints struct {
	issuer, authURL, tokenURL, revokeURL, resource string
	// issRequired: the server says it sends iss (RFC 9207), so a response
	// without one is refused.
	issRequired bool
	// postOnly: the token endpoint takes client_secret_post, not Basic.
	postOnly bool
}

type cacheKey struct {
	conn  string
	owner vault.Owner
}

type cached struct {
	token  string
	expiry time.Time
}

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

// Has reports whether name is a connection of the service.
func (s *Service) Has(name string) bool { _, ok := s.conns[name]; return ok }

// Token returns owner's access token at the connection name: from this
// replica's cache while it is valid for more than EarlyRefresh, else from
// the vault, refreshed first when it is about to expire. ErrNotConnected
// when owner has no usable connection.
func (s *Service) Token(ctx context.Context, name string, owner vault.Owner) (string, error) {
	c, ok := s.conns[name]
	if !ok {
		return "", fmt.Errorf("connect: no connection %q", name)
	}
	key := cacheKey{name, owner}
	if tok, ok := s.cachedToken(key); ok {
		return tok, nil
	}
	v, err, _ := s.group.Do(name+"\x00"+owner.Issuer+"\x00"+owner.Subject, func() (any, error) {
		if tok, ok := s.cachedToken(key); ok {
			return tok, nil
		}
		return s.load(context.WithoutCancel(ctx), c, owner)
	})
	if err != nil {
		return "", err
	}
	return v.(string), nil
}

func (s *Service) cachedToken(key cacheKey) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.cache[key]
	if !ok {
		return "", false
	}
	if !e.expiry.IsZero() && !s.o.Now().Add(EarlyRefresh).Before(e.expiry) {
		delete(s.cache, key)
		return "", false
	}
	return e.token, true
}

func (s *Service) remember(key cacheKey, e *vault.Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.cache) >= maxCache {
		now := s.o.Now()
		for k, c := range s.cache {
			if !c.expiry.IsZero() && !now.Before(c.expiry) {
				delete(s.cache, k)
			}
		}
		if len(s.cache) >= maxCache {
			clear(s.cache)
		}
	}
	s.cache[key] = cached{token: e.AccessToken, expiry: e.Expiry}
}

func (s *Service) forget(key cacheKey) {
	s.mu.Lock()
	delete(s.cache, key)
	s.mu.Unlock()
}

// maxCache bounds the cache of tokens: past it, expired ones are dropped,
// and if none had expired, all.
const maxCache = 100_000

// load reads owner's entry from the vault and refreshes it if it is about
// to expire.
func (s *Service) load(ctx context.Context, c *conn, owner vault.Owner) (string, error) {
	key := cacheKey{c.Name, owner}
	e, sealed, err := s.o.Vault.Get(ctx, c.Name, owner)
	switch {
	case errors.Is(err, vault.ErrNotConnected):
		s.o.Observe(Event{Connection: c.Name, Action: "read", Outcome: "miss"})
		return "", ErrNotConnected
	case errors.Is(err, vault.ErrSealed):
		// A key was dropped too early, or the entry was tampered with:
		// the user connects again.
		s.o.Logger.Warn("connect: a vault entry does not open with the vault's keys; the user must connect again", "connection", c.Name)
		s.o.Observe(Event{Connection: c.Name, Action: "read", Outcome: "error", Reason: "sealed"})
		return "", ErrNotConnected
	case err != nil:
		s.o.Observe(Event{Connection: c.Name, Action: "read", Outcome: "error", Reason: "store"})
		return "", err
	}
	s.o.Observe(Event{Connection: c.Name, Action: "read", Outcome: "hit"})
	if e.Expiry.IsZero() || s.o.Now().Add(EarlyRefresh).Before(e.Expiry) {
		s.remember(key, e)
		return e.AccessToken, nil
	}
	return s.refresh(ctx, c, owner, e, sealed)
}

// refresh renews e with its refresh token and stores the new tokens in
// place of sealed, unless another replica did first, whose tokens are
// then used. An upstream that answers invalid_grant has revoked the
// grant: the entry is dropped.
func (s *Service) refresh(ctx context.Context, c *conn, owner vault.Owner, e *vault.Entry, sealed vault.Sealed) (string, error) {
	key := cacheKey{c.Name, owner}
	if e.RefreshToken == "" {
		_ = s.o.Vault.Delete(ctx, c.Name, owner)
		s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "refused", Reason: "no_refresh_token"})
		s.o.Audit(ctx, "refresh", "refused", owner, c.Name, "reason", "expired")
		return "", ErrNotConnected
	}
	cfg, ep, err := s.oauthConfig(ctx, c)
	if err != nil {
		s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "error", Reason: "discovery"})
		return "", err
	}
	if e.Issuer != "" && e.Issuer != ep.issuer {
		// The connection now names another authorization server: the
		// refresh token is not sent to it.
		_ = s.o.Vault.Delete(ctx, c.Name, owner)
		s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "refused", Reason: "issuer"})
		return "", ErrNotConnected
	}
	hctx := context.WithValue(ctx, oauth2.HTTPClient, s.o.HTTPClient)
	tok, err := cfg.TokenSource(hctx, &oauth2.Token{RefreshToken: e.RefreshToken, Expiry: s.o.Now().Add(-time.Second)}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			_ = s.o.Vault.Delete(ctx, c.Name, owner)
			s.forget(key)
			s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "refused", Reason: "invalid_grant"})
			s.o.Audit(ctx, "refresh", "refused", owner, c.Name, "reason", "invalid_grant")
			return "", ErrNotConnected
		}
		s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "error", Reason: "token_endpoint"})
		s.o.Logger.Warn("connect: refreshing a connected account failed", "connection", c.Name, "error", oauthError(err))
		return "", fmt.Errorf("connect: refreshing the %s connection failed: %s", c.Title, oauthError(err))
	}
	next := entryOf(tok, ep.issuer, e.Connected, s.o.Now())
	ok, err := s.o.Vault.Swap(ctx, c.Name, owner, sealed, next)
	if err != nil {
		return "", err
	}
	if !ok {
		// Another replica refreshed first; its tokens are the ones kept.
		latest, _, err := s.o.Vault.Get(ctx, c.Name, owner)
		if err != nil {
			return "", ErrNotConnected
		}
		next = latest
	}
	s.remember(key, next)
	s.o.Observe(Event{Connection: c.Name, Action: "refresh", Outcome: "ok"})
	s.o.Audit(ctx, "refresh", "ok", owner, c.Name)
	return next.AccessToken, nil
}

// entryOf is the vault entry of tok from issuer, received at now: its
// expiry is counted on the service's clock.
func entryOf(tok *oauth2.Token, issuer string, connected, now time.Time) *vault.Entry {
	scope, _ := tok.Extra("scope").(string)
	e := &vault.Entry{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType,
		Expiry: tok.Expiry, Scope: scope, Issuer: issuer, Connected: connected}
	if tok.ExpiresIn > 0 {
		e.Expiry = now.Add(time.Duration(tok.ExpiresIn) * time.Second)
	}
	return e
}

// oauthError names an OAuth failure without its body, which might echo a
// token.
func oauthError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return "the authorization server answered " + clean(re.ErrorCode)
		}
		if re.Response != nil {
			return fmt.Sprintf("the authorization server answered HTTP %d", re.Response.StatusCode)
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the authorization server could not be reached"
	}
	return "the authorization server's answer was not usable"
}

// clean keeps an OAuth error code printable and short.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, s)
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

// Disconnect drops owner's connection name.
func (s *Service) Disconnect(ctx context.Context, name string, owner vault.Owner) error {
	if err := s.o.Vault.Delete(ctx, name, owner); err != nil {
		return err
	}
	s.forget(cacheKey{name, owner})
	return nil
}
