package authserver

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

// zeroTime is the zero time.Time.
var zeroTime time.Time

// keySet holds the signing keys: the first signs, all are published.
type keySet struct {
	keys []jose.JSONWebKey // private
}

// loadKeys reads a JWKS of private P-256 keys from path, or makes one key
// when path is empty.
func loadKeys(path string) (*keySet, bool, error) {
	if path == "" {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, false, err
		}
		kid := make([]byte, 12)
		rand.Read(kid)
		return &keySet{keys: []jose.JSONWebKey{{Key: k, KeyID: fmt.Sprintf("%x", kid), Algorithm: "ES256", Use: "sig"}}}, true, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, false, fmt.Errorf("keys_file: %w", err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, false, fmt.Errorf("keys_file: %s is not a JSON Web Key Set: %w", path, err)
	}
	if len(set.Keys) == 0 {
		return nil, false, fmt.Errorf("keys_file: %s holds no keys", path)
	}
	var errs []error
	seen := map[string]bool{}
	for i, k := range set.Keys {
		ec, ok := k.Key.(*ecdsa.PrivateKey)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("keys_file: key %d: want a private EC key, got %T", i, k.Key))
		case ec.Curve != elliptic.P256():
			errs = append(errs, fmt.Errorf("keys_file: key %d: want curve P-256 (ES256)", i))
		case k.KeyID == "":
			errs = append(errs, fmt.Errorf("keys_file: key %d: no kid", i))
		case seen[k.KeyID]:
			errs = append(errs, fmt.Errorf("keys_file: key %d: duplicate kid %q", i, k.KeyID))
		}
		seen[k.KeyID] = true
		set.Keys[i].Algorithm = "ES256"
		set.Keys[i].Use = "sig"
	}
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	return &keySet{keys: set.Keys}, false, nil
}

// signer is the key that signs.
func (s *keySet) signer() jose.JSONWebKey { return s.keys[0] }

// public is the published JWKS.
func (s *keySet) public() jose.JSONWebKeySet {
	var out jose.JSONWebKeySet
	for _, k := range s.keys {
		out.Keys = append(out.Keys, k.Public())
	}
	return out
}

// oidcKeySet is the in-process key set the /mcp verifier checks this
// server's tokens with.
func (s *keySet) oidcKeySet() oidc.KeySet {
	var pubs []crypto.PublicKey
	for _, k := range s.keys {
		pubs = append(pubs, k.Public().Key)
	}
	return &oidc.StaticKeySet{PublicKeys: pubs}
}

// secrets derives the HMAC secrets of codes and refresh tokens from the
// keys (HKDF-SHA256), so the keys file is the one secret replicas share:
// the first key's secret signs, the others' still verify.
func (s *keySet) secrets() (global []byte, rotated [][]byte, err error) {
	for i, k := range s.keys {
		ec := k.Key.(*ecdsa.PrivateKey)
		d, err := ec.Bytes()
		if err != nil {
			return nil, nil, err
		}
		sec, err := hkdf.Key(sha256.New, d, nil, "portcullis authorization server token secret", 32)
		if err != nil {
			return nil, nil, err
		}
		if i == 0 {
			global = sec
		} else {
			rotated = append(rotated, sec)
		}
	}
	return global, rotated, nil
}

// privateKey is fosite's key getter: the signing key as an ECDSA key,
// whose kid the session's header carries.
func (s *keySet) privateKey(context.Context) (any, error) {
	return s.keys[0].Key.(*ecdsa.PrivateKey), nil
}
