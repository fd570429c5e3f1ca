package authserver

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdsa"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
)

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
func idpTokenKey(subject string) string { return kv.Join("idp-token", kv.Hash(subject)) }

// keptToken is a provider token as kept.
type keptToken struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	// IDToken is the provider's latest ID token, verified when it was
	// received, and IDTokenExpiry its exp.
	IDToken       string    `json:"id_token,omitempty"`
	IDTokenExpiry time.Time `json:"id_token_expiry,omitzero"`
}
