package connect

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/vault"
	"golang.org/x/oauth2"
)

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
	if !s.o.Now().Before(e.until) {
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
			if !now.Before(c.until) {
				delete(s.cache, k)
			}
		}
		if len(s.cache) >= maxCache {
			clear(s.cache)
		}
	}
	// A token is used from memory until EarlyRefresh before it expires;
	// one without an expiry for NoExpiryCache, so that a disconnect on
	// another replica reaches this one within that.
	until := s.o.Now().Add(NoExpiryCache)
	if !e.Expiry.IsZero() {
		until = e.Expiry.Add(-EarlyRefresh)
	}
	s.cache[key] = cached{token: e.AccessToken, until: until}
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
	if now := s.o.Now(); s.o.TTL > 0 && now.Sub(e.Written) > s.o.TTL/2 {
		// In use: kept for another TTL. Another replica's refresh wins.
		kept := *e
		kept.Written = now
		if ok, err := s.o.Vault.Swap(ctx, c.Name, owner, sealed, &kept); err == nil && ok {
			if e2, s2, err := s.o.Vault.Get(ctx, c.Name, owner); err == nil {
				e, sealed = e2, s2
			}
		}
	}
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

// Disconnect drops owner's connection name.
func (s *Service) Disconnect(ctx context.Context, name string, owner vault.Owner) error {
	if err := s.o.Vault.Delete(ctx, name, owner); err != nil {
		return err
	}
	s.forget(cacheKey{name, owner})
	return nil
}

// revoke asks c's authorization server to revoke e's refresh token (or
// access token) (RFC 7009), where it names a revocation endpoint; a
// failure is logged, and the entry is dropped anyway.
func (s *Service) revoke(ctx context.Context, c *conn, e *vault.Entry) {
	cfg, ep, err := s.oauthConfig(ctx, c)
	if err != nil || ep.revokeURL == "" {
		return
	}
	tok, hint := e.RefreshToken, "refresh_token"
	if tok == "" {
		tok, hint = e.AccessToken, "access_token"
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	form := url.Values{"token": {tok}, "token_type_hint": {hint}}
	if cfg.ClientSecret == "" {
		form.Set("client_id", cfg.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.revokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cfg.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(cfg.ClientID), url.QueryEscape(cfg.ClientSecret))
	}
	resp, err := s.o.HTTPClient.Do(req)
	if err != nil {
		s.o.Logger.Warn("connect: revoking a disconnected account's token failed", "connection", c.Name, "error", "the authorization server could not be reached")
		s.o.Observe(Event{Connection: c.Name, Action: "revoke", Outcome: "error"})
		return
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.o.Logger.Warn("connect: revoking a disconnected account's token failed", "connection", c.Name, "status", resp.StatusCode)
		s.o.Observe(Event{Connection: c.Name, Action: "revoke", Outcome: "error"})
		return
	}
	s.o.Observe(Event{Connection: c.Name, Action: "revoke", Outcome: "ok"})
}

// Rejected is told that the upstream refused token for owner (HTTP 401):
// the replica's cached copy is dropped and, if the vault still holds that
// token, it is marked expired, so that the next use refreshes it (and a
// refresh the upstream refuses drops the connection).
func (s *Service) Rejected(ctx context.Context, name string, owner vault.Owner, token string) {
	s.forget(cacheKey{name, owner})
	e, sealed, err := s.o.Vault.Get(ctx, name, owner)
	if err != nil || e.AccessToken != token {
		return
	}
	e.Expiry = s.o.Now().Add(-time.Second)
	_, _ = s.o.Vault.Swap(ctx, name, owner, sealed, e)
	s.o.Observe(Event{Connection: name, Action: "read", Outcome: "rejected"})
}
