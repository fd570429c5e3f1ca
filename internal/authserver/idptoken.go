package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"golang.org/x/oauth2"
)

// ErrNoIdPToken is [Server.IdPAccessToken]'s and [Server.IdPIDToken]'s
// answer for a user whose provider token is not kept (never signed in
// here, expired, or KeepIdPTokens off).
var ErrNoIdPToken = errors.New("authserver: no identity provider token kept for this user")

// idTokenMargin is how long before its exp a kept ID token is replaced:
// the provider it is presented to must still find it valid.
const idTokenMargin = time.Minute

// saveIdPToken keeps tok, encrypted, as subject's latest provider token,
// for as long as a refresh-token family lives. idToken is its ID token
// with its expiry, verified by the caller; a token without one (a refresh
// that gave none) keeps old's.
func (s *Server) saveIdPToken(ctx context.Context, subject string, tok *oauth2.Token, idToken string, idExpiry time.Time, old *keptToken) error {
	if tok == nil || tok.AccessToken == "" {
		return errors.New("authserver: the provider returned no access token")
	}
	kt := keptToken{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry,
		IDToken: idToken, IDTokenExpiry: idExpiry}
	if kt.RefreshToken == "" && old != nil {
		// A provider that does not rotate refresh tokens answers a
		// refresh without one.
		kt.RefreshToken = old.RefreshToken
	}
	if idToken == "" && old != nil {
		kt.IDToken, kt.IDTokenExpiry = old.IDToken, old.IDTokenExpiry
	}
	plain, err := json.Marshal(kt)
	if err != nil {
		return err
	}
	key := idpTokenKey(subject)
	return s.kv.Set(ctx, key, s.sealer.seal(plain, key), s.o.RefreshTokenTTL)
}

// IdPAccessToken returns subject's access token at the identity provider,
// refreshed with its refresh token when it has expired: what an upstream
// with oauth.grant token_exchange or jwt_bearer presents on the user's
// behalf. It is never sent to a client.
func (s *Server) IdPAccessToken(ctx context.Context, subject string) (string, error) {
	kt, err := s.idpToken(ctx, subject, func(kt *keptToken) bool {
		return (&oauth2.Token{AccessToken: kt.AccessToken, Expiry: kt.Expiry}).Valid()
	})
	if err != nil {
		return "", err
	}
	return kt.AccessToken, nil
}

// IdPIDToken returns subject's ID token from the identity provider,
// refreshed with the kept refresh token when it expires within a minute
// (an OpenID provider's refresh answer carries a new one): what an
// upstream with oauth.grant id_jag presents for an identity assertion
// grant on the user's behalf. It is never sent to a client.
func (s *Server) IdPIDToken(ctx context.Context, subject string) (string, error) {
	kt, err := s.idpToken(ctx, subject, func(kt *keptToken) bool {
		return kt.IDToken != "" && s.now().Add(idTokenMargin).Before(kt.IDTokenExpiry)
	})
	if err != nil {
		return "", err
	}
	return kt.IDToken, nil
}

// idpToken returns subject's kept provider token, refreshed first unless
// valid says it is good as kept.
func (s *Server) idpToken(ctx context.Context, subject string, valid func(*keptToken) bool) (*keptToken, error) {
	if !s.keepIdPTokens {
		return nil, ErrNoIdPToken
	}
	key := idpTokenKey(subject)
	sealed, err := s.kv.Get(ctx, key)
	if errors.Is(err, kv.ErrNotFound) {
		return nil, ErrNoIdPToken
	}
	if err != nil {
		return nil, err
	}
	plain, err := s.sealer.open(sealed, key)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoIdPToken, err)
	}
	var kt keptToken
	if err := json.Unmarshal(plain, &kt); err != nil {
		return nil, err
	}
	if valid(&kt) {
		return &kt, nil
	}
	if kt.RefreshToken == "" {
		return nil, fmt.Errorf("%w: it expired and has no refresh token", ErrNoIdPToken)
	}
	fresh, idToken, idExpiry, err := s.idp.refresh(ctx, kt.RefreshToken, subject)
	if err != nil {
		return nil, fmt.Errorf("%w: refreshing it failed: %v", ErrNoIdPToken, err)
	}
	if err := s.saveIdPToken(ctx, subject, fresh, idToken, idExpiry, &kt); err != nil {
		s.logger.Warn("authorization server: the refreshed provider token was not kept", "error", err)
	}
	next := keptToken{AccessToken: fresh.AccessToken, Expiry: fresh.Expiry, IDToken: idToken, IDTokenExpiry: idExpiry}
	if idToken == "" {
		next.IDToken, next.IDTokenExpiry = kt.IDToken, kt.IDTokenExpiry
	}
	if !valid(&next) {
		return nil, fmt.Errorf("%w: the refreshed token is not the one needed (no ID token in the provider's refresh answer?)", ErrNoIdPToken)
	}
	return &next, nil
}
