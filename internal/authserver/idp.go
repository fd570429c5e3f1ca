package authserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// preset is what differs between identity providers.
type preset struct {
	// scopes are requested besides openid email profile.
	scopes []string
	// offlineScope: the provider gives a refresh token for the
	// offline_access scope.
	offlineScope bool
	// groups are the default claims holding groups or roles, with dots for
	// nesting (realm_access.roles).
	groups []string
}

// presets are the known providers. Portcullis never sends the RFC 8707
// resource parameter to the provider (it is the authorization server for
// that), so Entra's and Okta's refusals of it do not arise; Entra's v2
// endpoint gets no api://…/.default scope because Portcullis needs only
// the ID token.
//
// When the provider's tokens are kept (Deps.KeepIdPTokens), offline_access
// asks Entra, Okta and Keycloak for a refresh token, which
// keeps a kept provider token (Deps.KeepIdPTokens) usable past its hour;
// Google refuses that scope and takes access_type=offline instead. For an
// upstream's token exchange at Entra (on-behalf-of), add the app's own
// scope (api://CLIENT_ID/.default) to idp.scopes, so that the kept access
// token is one Entra exchanges.
var presets = map[string]preset{
	"generic":  {groups: []string{"groups", "roles"}},
	"entra":    {offlineScope: true, groups: []string{"groups", "roles"}},
	"okta":     {offlineScope: true, groups: []string{"groups"}},
	"google":   {},
	"keycloak": {offlineScope: true, groups: []string{"realm_access.roles", "groups"}},
}

// ErrSignIn is the class of sign-in failures at the provider; the user
// sees a short page, the log the reason.
var ErrSignIn = errors.New("authserver: sign-in at the identity provider failed")

// idp signs users in at the organisation's OpenID provider: authorization
// code with PKCE (x/oauth2), ID token verified with go-oidc.
type idp struct {
	o        IdPOptions
	preset   preset
	redirect string
	client   *http.Client
	secret   string
	// offline asks for a refresh token (the provider's tokens are kept).
	offline bool

	mu       sync.Mutex
	cfg      *oauth2.Config
	verifier *oidc.IDTokenVerifier
	provider *oidc.Provider
}

func newIdP(o IdPOptions, redirect string, client *http.Client) (*idp, error) {
	secret, err := os.ReadFile(o.ClientSecretFile)
	if err != nil {
		return nil, fmt.Errorf("idp.client_secret_file: %w", err)
	}
	s := strings.TrimSpace(string(secret))
	if s == "" {
		return nil, fmt.Errorf("idp.client_secret_file: %s is empty", o.ClientSecretFile)
	}
	return &idp{o: o, preset: presets[o.Preset], redirect: redirect, client: client, secret: s}, nil
}

// discover fetches the provider's discovery document once it answers; a
// provider down at start does not stop Portcullis, only sign-ins.
func (p *idp) discover(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cfg != nil {
		return p.cfg, p.verifier, nil
	}
	prov, err := oidc.NewProvider(oidc.ClientContext(ctx, p.client), p.o.Issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: discovery at %s: %v", ErrSignIn, p.o.Issuer, err)
	}
	scopes := p.o.Scopes
	if len(scopes) == 0 {
		scopes = append([]string{oidc.ScopeOpenID, "email", "profile"}, p.preset.scopes...)
		if p.offline && p.preset.offlineScope {
			scopes = append(scopes, oidc.ScopeOfflineAccess)
		}
	}
	p.cfg = &oauth2.Config{
		ClientID:     p.o.ClientID,
		ClientSecret: p.secret,
		Endpoint:     prov.Endpoint(),
		RedirectURL:  p.redirect,
		Scopes:       scopes,
	}
	p.provider = prov
	p.verifier = prov.VerifierContext(oidc.ClientContext(context.WithoutCancel(ctx), p.client), &oidc.Config{ClientID: p.o.ClientID})
	return p.cfg, p.verifier, nil
}

// authURL is where the user's browser goes to sign in.
func (p *idp) authURL(ctx context.Context, state, nonce, verifier string) (string, error) {
	cfg, _, err := p.discover(ctx)
	if err != nil {
		return "", err
	}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier), oidc.Nonce(nonce)}
	if p.o.Preset == "google" {
		if len(p.o.HostedDomains) == 1 {
			// A hint only: the hd claim is checked on return.
			opts = append(opts, oauth2.SetAuthURLParam("hd", p.o.HostedDomains[0]))
		}
		if p.offline {
			opts = append(opts, oauth2.AccessTypeOffline)
		}
	}
	return cfg.AuthCodeURL(state, opts...), nil
}

// signedIn is what the provider's code is redeemed for: the user its
// verified ID token names, the provider's tokens, and the ID token with
// its expiry.
type signedIn struct {
	user     User
	tok      *oauth2.Token
	idToken  string
	idExpiry time.Time
}

// exchange redeems the provider's code.
func (p *idp) exchange(ctx context.Context, code, verifier, nonce string) (signedIn, error) {
	u, tok, idt, err := p.redeem(ctx, code, verifier, nonce)
	if err != nil {
		return signedIn{}, err
	}
	raw, _ := tok.Extra("id_token").(string)
	return signedIn{user: u, tok: tok, idToken: raw, idExpiry: idt.Expiry}, nil
}

// redeem redeems the provider's code and returns the user its verified
// ID token names, the provider's tokens and the ID token.
func (p *idp) redeem(ctx context.Context, code, verifier, nonce string) (User, *oauth2.Token, *oidc.IDToken, error) {
	cfg, v, err := p.discover(ctx)
	if err != nil {
		return User{}, nil, nil, err
	}
	tok, err := cfg.Exchange(oidc.ClientContext(ctx, p.client), code, oauth2.VerifierOption(verifier))
	if err != nil {
		return User{}, nil, nil, fmt.Errorf("%w: code exchange: %v", ErrSignIn, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return User{}, nil, nil, fmt.Errorf("%w: the token response has no id_token", ErrSignIn)
	}
	idt, err := v.Verify(ctx, raw)
	if err != nil {
		return User{}, nil, nil, fmt.Errorf("%w: ID token: %v", ErrSignIn, err)
	}
	if idt.Nonce != nonce {
		return User{}, nil, nil, fmt.Errorf("%w: ID token nonce does not match", ErrSignIn)
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return User{}, nil, nil, fmt.Errorf("%w: ID token claims: %v", ErrSignIn, err)
	}
	if err := p.completeFromUserInfo(ctx, tok, idt.Subject, claims); err != nil {
		return User{}, nil, nil, err
	}
	u, err := p.user(idt.Subject, claims)
	return u, tok, idt, err
}

// completeFromUserInfo adds to claims, when the ID token has no e-mail
// address, what the provider's userinfo endpoint says and the ID token
// left out. OpenID Connect Core §5.4 has a provider return the claims of
// the profile and email scopes from userinfo, not in the ID token, when
// the code flow issues an access token (oidc-provider does so by
// default): without this, such a provider's users had no e-mail address
// (idp.allowed_email_domains refused them all) and no groups from there.
// The ID token's claims win; userinfo's sub must be the ID token's
// (§5.3.2). A provider without a userinfo endpoint, or whose endpoint
// fails, leaves the claims as they were.
func (p *idp) completeFromUserInfo(ctx context.Context, tok *oauth2.Token, subject string, claims map[string]any) error {
	if email, _ := claims["email"].(string); email != "" {
		return nil
	}
	p.mu.Lock()
	prov := p.provider
	p.mu.Unlock()
	if prov == nil || prov.UserInfoEndpoint() == "" {
		return nil
	}
	info, err := prov.UserInfo(oidc.ClientContext(ctx, p.client), oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil
	}
	if info.Subject != subject {
		return fmt.Errorf("%w: userinfo names sub %q, the ID token %q", ErrSignIn, info.Subject, subject)
	}
	var extra map[string]any
	if err := info.Claims(&extra); err != nil {
		return nil
	}
	for k, v := range extra {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return nil
}

// refresh gets subject's provider token anew with its refresh token, and
// the ID token the answer carries, verified, with its expiry ("" when it
// carries none).
func (p *idp) refresh(ctx context.Context, refreshToken, subject string) (*oauth2.Token, string, time.Time, error) {
	cfg, v, err := p.discover(ctx)
	if err != nil {
		return nil, "", time.Time{}, err
	}
	// An expired token with only the refresh token: the source refreshes.
	tok, err := cfg.TokenSource(oidc.ClientContext(ctx, p.client), &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		return nil, "", time.Time{}, err
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return tok, "", time.Time{}, nil
	}
	idt, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, "", time.Time{}, fmt.Errorf("the refreshed ID token: %v", err)
	}
	if idt.Subject != subject {
		return nil, "", time.Time{}, fmt.Errorf("the refreshed ID token names another user")
	}
	return tok, raw, idt.Expiry, nil
}

// user maps verified claims to a User and applies the domain rules.
func (p *idp) user(subject string, claims map[string]any) (User, error) {
	u := User{Subject: subject}
	if email, _ := claims["email"].(string); email != "" {
		// A provider that says the address is unverified is not vouching
		// for it; one that says nothing (Entra, Okta workforce) is.
		if v, ok := claims["email_verified"].(bool); !ok || v {
			u.Email = email
		}
	}
	u.Name, _ = claims["name"].(string)
	if u.Name == "" {
		u.Name, _ = claims["preferred_username"].(string)
	}
	groups := p.o.GroupsClaims
	if len(groups) == 0 {
		groups = p.preset.groups
	}
	for _, name := range groups {
		for _, g := range stringsAt(claims, name) {
			if !slices.Contains(u.Groups, g) {
				u.Groups = append(u.Groups, g)
			}
		}
	}
	if len(p.o.HostedDomains) > 0 {
		hd, _ := claims["hd"].(string)
		if !slices.Contains(p.o.HostedDomains, hd) {
			return User{}, fmt.Errorf("%w: hosted domain %q is not one of idp.hosted_domains", ErrSignIn, hd)
		}
	}
	if len(p.o.AllowedEmailDomains) > 0 {
		_, domain, _ := strings.Cut(u.Email, "@")
		if u.Email == "" || !slices.ContainsFunc(p.o.AllowedEmailDomains, func(d string) bool { return strings.EqualFold(d, domain) }) {
			return User{}, fmt.Errorf("%w: e-mail domain %q is not one of idp.allowed_email_domains", ErrSignIn, domain)
		}
	}
	return u, nil
}

// stringsAt returns the strings at a dotted claim path: a string, or an
// array of strings.
func stringsAt(claims map[string]any, path string) []string {
	var v any = claims
	for part := range strings.SplitSeq(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[part]
	}
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
