package connect

// The connect pages' own sign-in, where no authorization server of
// Portcullis signs users in (callers' tokens come from the organisation's
// identity provider directly): an OpenID Connect relying party of that
// provider (authorization code with PKCE through x/oauth2, the ID token
// verified with go-oidc, its nonce checked), whose browser session is a
// cookie sealed with the vault's keys that names the user for an hour.

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// PathSignedIn is where the identity provider sends the browser back.
const PathSignedIn = PathPrefix + "/signed-in"

// SessionTTL is how long a browser's sign-in for the pages lasts.
const SessionTTL = time.Hour

// SessionPurpose is what the session cookie's keys are derived for
// (keyring.New), from the vault's keys file.
const SessionPurpose = "connect pages' browser session"

// OIDCOptions configure an [OIDCSignIn].
type OIDCOptions struct {
	// Issuer is the identity provider's issuer: the issuer of the tokens
	// callers call Portcullis with.
	Issuer string
	// ClientID and ClientSecret are Portcullis's client there, whose
	// redirect URI is BaseURL + PathSignedIn.
	ClientID, ClientSecret string
	// BaseURL is Portcullis's public URL.
	BaseURL string
	// Ring seals the session cookie (purpose SessionPurpose).
	Ring *keyring.Ring
	// KV keeps the sign-ins in progress.
	KV kv.KV
	// HTTPClient calls the provider; Now is the clock; Logger gets
	// failures. Nil: defaults.
	HTTPClient *http.Client
	Now        func() time.Time
	Logger     *slog.Logger
}

// OIDCSignIn signs browsers in at an OpenID provider for the pages.
type OIDCSignIn struct {
	o      OIDCOptions
	secure bool

	mu       sync.Mutex
	cfg      *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// NewOIDCSignIn returns the sign-in of o; the provider is discovered at
// the first sign-in.
func NewOIDCSignIn(o OIDCOptions) (*OIDCSignIn, error) {
	if o.Issuer == "" || o.ClientID == "" || o.Ring == nil || o.KV == nil || o.BaseURL == "" {
		return nil, errors.New("connect: the sign-in needs an issuer, a client id, keys, a store and the base URL")
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.BaseURL = strings.TrimSuffix(o.BaseURL, "/")
	return &OIDCSignIn{o: o, secure: strings.HasPrefix(o.BaseURL, "https://")}, nil
}

// discover returns the client and the ID token verifier, discovering the
// provider at first use (and after a failure).
func (s *OIDCSignIn) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg != nil {
		return s.cfg, s.verifier, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.o.HTTPClient), s.o.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: discovering %s: %w", s.o.Issuer, err)
	}
	s.cfg = &oauth2.Config{ClientID: s.o.ClientID, ClientSecret: s.o.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: s.o.BaseURL + PathSignedIn, Scopes: []string{oidc.ScopeOpenID}}
	s.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), s.o.HTTPClient), &oidc.Config{ClientID: s.o.ClientID, Now: s.o.Now})
	return s.cfg, s.verifier, nil
}

// cookie names: the session, and the binding of a sign-in in progress
// to the browser that started it.
func (s *OIDCSignIn) cookie(name string) string {
	if s.secure {
		return "__Host-portcullis-connect-" + name
	}
	return "portcullis-connect-" + name
}

// signIn is a sign-in in progress, keyed by its state.
type signIn struct {
	Nonce    string `json:"nonce"`
	Verifier string `json:"verifier"`
	Return   string `json:"return"`
	Browser  string `json:"browser"` // hash of the binding cookie
}

// session is the sealed content of the session cookie.
type session struct {
	Subject string    `json:"sub"`
	Expires time.Time `json:"exp"`
}

// BrowserUser returns the subject r's browser signed in as, while its
// session lasts.
func (s *OIDCSignIn) BrowserUser(r *http.Request) (string, bool) {
	c, err := r.Cookie(s.cookie("session"))
	if err != nil {
		return "", false
	}
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return "", false
	}
	plain, err := s.o.Ring.Open(sealed, s.cookie("session"))
	if err != nil {
		return "", false
	}
	var ss session
	if json.Unmarshal(plain, &ss) != nil || ss.Subject == "" || !s.o.Now().Before(ss.Expires) {
		return "", false
	}
	return ss.Subject, true
}

// SignInBrowser sends the browser to sign in at the provider and back to
// returnTo, a local path.
func (s *OIDCSignIn) SignInBrowser(w http.ResponseWriter, r *http.Request, returnTo string) {
	if !localPath(returnTo) {
		message(w, http.StatusBadRequest, "Sign-in refused", "The page to return to is not on this server.", "")
		return
	}
	ctx := r.Context()
	cfg, _, err := s.discover(ctx)
	if err != nil {
		s.o.Logger.Warn("connect: the identity provider cannot be reached", "error", err)
		message(w, http.StatusServiceUnavailable, "Sign-in unavailable", "The identity provider cannot be reached; try again shortly.", "")
		return
	}
	binding := randomID()
	http.SetCookie(w, &http.Cookie{Name: s.cookie("binding"), Value: binding, Path: "/", HttpOnly: true, Secure: s.secure,
		SameSite: http.SameSiteLaxMode, MaxAge: int(FlowTTL / time.Second)})
	si := signIn{Nonce: randomID(), Verifier: oauth2.GenerateVerifier(), Return: returnTo, Browser: kv.Hash(binding)}
	state := randomID()
	b, _ := json.Marshal(si)
	if err := s.o.KV.Set(ctx, kv.Join("connect-signin", kv.Hash(state)), b, FlowTTL); err != nil {
		s.o.Logger.Warn("connect: the store failed", "error", err)
		message(w, http.StatusServiceUnavailable, "Unavailable", "Sign-in is unavailable for a moment; try again shortly.", "")
		return
	}
	http.Redirect(w, r, cfg.AuthCodeURL(state, oidc.Nonce(si.Nonce), oauth2.S256ChallengeOption(si.Verifier)), http.StatusSeeOther)
}

// ServeSignedIn is where the provider sends the browser back: the state
// is taken once, the browser must be the one that started, the ID token
// is verified and its nonce checked; the browser then gets its session.
func (s *OIDCSignIn) ServeSignedIn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	q := r.URL.Query()
	b, err := s.o.KV.GetDel(ctx, kv.Join("connect-signin", kv.Hash(q.Get("state"))))
	if err != nil {
		message(w, http.StatusBadRequest, "Sign-in expired", "This sign-in is unknown, was finished already, or has expired. Start again.", "")
		return
	}
	var si signIn
	c, cerr := r.Cookie(s.cookie("binding"))
	if json.Unmarshal(b, &si) != nil || cerr != nil || subtle.ConstantTimeCompare([]byte(kv.Hash(c.Value)), []byte(si.Browser)) != 1 {
		message(w, http.StatusBadRequest, "Sign-in refused", "This sign-in was started in another browser.", "")
		return
	}
	if q.Get("error") != "" {
		message(w, http.StatusForbidden, "Sign-in refused", "The identity provider did not sign you in ("+clean(q.Get("error"))+").", "")
		return
	}
	cfg, v, err := s.discover(ctx)
	if err != nil {
		message(w, http.StatusServiceUnavailable, "Sign-in unavailable", "The identity provider cannot be reached; try again shortly.", "")
		return
	}
	cctx := oidc.ClientContext(ctx, s.o.HTTPClient)
	tok, err := cfg.Exchange(cctx, q.Get("code"), oauth2.VerifierOption(si.Verifier))
	if err != nil {
		s.o.Logger.Warn("connect: signing in at the identity provider failed", "error", oauthError(err))
		message(w, http.StatusForbidden, "Sign-in refused", "Signing in at the identity provider failed.", "")
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := v.Verify(cctx, raw)
	if err != nil || idt.Nonce != si.Nonce || idt.Subject == "" {
		s.o.Logger.Warn("connect: the identity provider's ID token was refused", "error", err)
		message(w, http.StatusForbidden, "Sign-in refused", "Signing in at the identity provider failed.", "")
		return
	}
	plain, _ := json.Marshal(session{Subject: idt.Subject, Expires: s.o.Now().Add(SessionTTL)})
	http.SetCookie(w, &http.Cookie{Name: s.cookie("session"), Value: base64.RawURLEncoding.EncodeToString(s.o.Ring.Seal(plain, s.cookie("session"))),
		Path: "/", HttpOnly: true, Secure: s.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(SessionTTL / time.Second)})
	http.Redirect(w, r, si.Return, http.StatusSeeOther)
}
