package authserver

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/oauth2"
)

// ErrNoIdPToken is [Server.IdPAccessToken]'s answer for a user whose
// provider token is not kept (never signed in here, expired, or
// KeepIdPTokens off).
var ErrNoIdPToken = errors.New("authserver: no identity provider token kept for this user")

// sealer encrypts what the store keeps that must not be read from it:
// AES-256-GCM with keys derived from the signing keys, the first seals,
// every one opens (rotation).
type sealer struct{ aeads []cipher.AEAD }

func (s *keySet) sealer() (*sealer, error) {
	out := &sealer{}
	for _, k := range s.keys {
		d, err := k.Key.(*ecdsa.PrivateKey).Bytes()
		if err != nil {
			return nil, err
		}
		key, err := hkdf.Key(sha256.New, d, nil, "portcullis authorization server sealed store values", 32)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		out.aeads = append(out.aeads, aead)
	}
	return out, nil
}

// seal encrypts plain bound to ad (the key it is stored under, so a value
// cannot be moved to another key).
func (s *sealer) seal(plain []byte, ad string) []byte {
	a := s.aeads[0]
	nonce := make([]byte, a.NonceSize())
	rand.Read(nonce)
	return a.Seal(nonce, nonce, plain, []byte(ad))
}

func (s *sealer) open(sealed []byte, ad string) ([]byte, error) {
	for _, a := range s.aeads {
		if len(sealed) < a.NonceSize() {
			break
		}
		if plain, err := a.Open(nil, sealed[:a.NonceSize()], sealed[a.NonceSize():], []byte(ad)); err == nil {
			return plain, nil
		}
	}
	return nil, errors.New("authserver: sealed value does not open with any key")
}

// idpTokenKey names a user's kept provider token.
func idpTokenKey(subject string) string { return joinKey("idp-token", hashString(subject)) }

// keptToken is a provider token as kept.
type keptToken struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
}

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
	if errors.Is(err, ErrNotFound) {
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
