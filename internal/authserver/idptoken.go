package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"golang.org/x/oauth2"
)

// ErrNoIdPToken is [Server.IdPAccessToken]'s answer for a user whose
// provider token is not kept (never signed in here, expired, or
// KeepIdPTokens off).
var ErrNoIdPToken = errors.New("authserver: no identity provider token kept for this user")

// saveIdPToken keeps tok, encrypted, as subject's latest provider token,
// for as long as a refresh-token family lives.
func (s *Server) saveIdPToken(ctx context.Context, subject string, tok *oauth2.Token) error {
	if tok == nil || tok.AccessToken == "" {
		return errors.New("authserver: the provider returned no access token")
	}
	plain, err := json.Marshal(keptToken{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry})
	if err != nil {
		return err
	}
	key := idpTokenKey(subject)
	return s.kv.Set(ctx, key, s.sealer.seal(plain, key), s.o.RefreshTokenTTL)
}

// IdPAccessToken returns subject's access token at the identity provider,
// refreshed with its refresh token when it has expired: what an upstream
// with oauth.grant token_exchange exchanges on the user's behalf. It is
// never sent to a client.
func (s *Server) IdPAccessToken(ctx context.Context, subject string) (string, error) {
	if !s.keepIdPTokens {
		return "", ErrNoIdPToken
	}
	key := idpTokenKey(subject)
	sealed, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return "", ErrNoIdPToken
	}
	if err != nil {
		return "", err
	}
	plain, err := s.sealer.open(sealed, key)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoIdPToken, err)
	}
	var kt keptToken
	if err := json.Unmarshal(plain, &kt); err != nil {
		return "", err
	}
	tok := &oauth2.Token{AccessToken: kt.AccessToken, RefreshToken: kt.RefreshToken, TokenType: kt.TokenType, Expiry: kt.Expiry}
	if tok.Valid() {
		return tok.AccessToken, nil
	}
	if tok.RefreshToken == "" {
		return "", fmt.Errorf("%w: it expired and has no refresh token", ErrNoIdPToken)
	}
	fresh, err := s.idp.refresh(ctx, tok)
	if err != nil {
		return "", fmt.Errorf("%w: refreshing it failed: %v", ErrNoIdPToken, err)
	}
	if err := s.saveIdPToken(ctx, subject, fresh); err != nil {
		s.logger.Warn("authorization server: the refreshed provider token was not kept", "error", err)
	}
	return fresh.AccessToken, nil
}
