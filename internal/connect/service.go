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

// NoExpiryCache is how long a replica uses a token issued without an
// expiry from memory before it reads the vault again: how long a
// disconnect made on another replica takes to reach it.
const NoExpiryCache = 5 * time.Minute

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
	// TTL is the vault's time to live: an entry read more than half of it
	// after it was written is written again, so that an account in use is
	// never forgotten. Zero: entries are written only when connected or
	// refreshed.
	TTL time.Duration
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
	token string
	// until is when the token is read from the vault again.
	until time.Time
}

// entryOf is the vault entry of tok from issuer, received at now: its
// expiry is counted on the service's clock.
func entryOf(tok *oauth2.Token, issuer string, connected, now time.Time) *vault.Entry {
	scope, _ := tok.Extra("scope").(string)
	e := &vault.Entry{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType,
		Expiry: tok.Expiry, Scope: scope, Issuer: issuer, Connected: connected, Written: now}
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
