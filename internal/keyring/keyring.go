// Package keyring reads symmetric keys from a mounted file (one base64
// key per line, newest first) and seals values with them: AES-256-GCM,
// the newest key sealing and every key opening, so that keys rotate by
// prepending a new one and dropping the old one once nothing sealed with
// it is left. The request-state keys and the vault's keys are such files.
package keyring

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// KeySize is the length in bytes of a key (AES-256).
const KeySize = 32

// maxFile bounds a keys file: about a thousand keys, far more than
// rotation needs, and a mistaken path (a device, a log) fails fast instead
// of being read without end.
const maxFile = 64 << 10

// Load reads keys from a file holding one base64 (standard or URL, padded
// or not) key of [KeySize] bytes per line, newest first. Blank lines and
// lines starting with '#' are ignored. A file larger than 64 KiB is
// refused. Errors name the file and line, never a key.
func Load(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes: not a keys file", path, maxFile)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := decode(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+1, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s holds no key", path)
	}
	return keys, nil
}

func decode(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("key is %d bytes, want %d", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New("key is not base64")
}

// ErrOpen is [Ring.Open]'s one error: the value is not one this ring
// sealed for that binding (tampered, truncated, sealed with a key the ring
// no longer holds, or bound to something else).
var ErrOpen = errors.New("keyring: sealed value does not open")

// idSize is the length of the key id that prefixes a sealed value.
const idSize = 4

// Ring seals and opens values. Each key is derived from a file's key and
// a purpose, so one keys file can serve several purposes without one's
// sealed values opening as another's.
type Ring struct {
	keys []ringKey
}

type ringKey struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// New returns the ring of keys for purpose (a fixed string naming what it
// seals): keys[0] seals, every key opens.
func New(keys [][]byte, purpose string) (*Ring, error) {
	if len(keys) == 0 {
		return nil, errors.New("keyring: no key")
	}
	r := &Ring{}
	for i, k := range keys {
		if len(k) != KeySize {
			return nil, fmt.Errorf("keyring: key %d is %d bytes, want %d", i, len(k), KeySize)
		}
		derived, err := hkdf.Key(sha256.New, k, nil, "portcullis "+purpose, KeySize)
		if err != nil {
			return nil, err
		}
		block, err := aes.NewCipher(derived)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(derived)
		rk := ringKey{aead: aead}
		copy(rk.id[:], sum[:idSize])
		r.keys = append(r.keys, rk)
	}
	return r, nil
}

// Seal encrypts plain bound to ad (what it is stored under, so that it
// cannot be moved elsewhere): the key id, a random nonce, the ciphertext.
func (r *Ring) Seal(plain []byte, ad string) []byte {
	k := r.keys[0]
	n := k.aead.NonceSize()
	out := make([]byte, idSize+n, idSize+n+len(plain)+k.aead.Overhead())
	copy(out, k.id[:])
	rand.Read(out[idSize:]) // never returns an error (crypto/rand documents it)
	return k.aead.Seal(out, out[idSize:idSize+n], plain, []byte(ad))
}

// Open decrypts what Seal sealed bound to ad, with whichever of the ring's
// keys sealed it; anything else is ErrOpen.
func (r *Ring) Open(sealed []byte, ad string) ([]byte, error) {
	if len(sealed) < idSize {
		return nil, ErrOpen
	}
	for _, k := range r.keys {
		if [idSize]byte(sealed[:idSize]) != k.id {
			continue
		}
		n := k.aead.NonceSize()
		if len(sealed) < idSize+n {
			return nil, ErrOpen
		}
		plain, err := k.aead.Open(nil, sealed[idSize:idSize+n], sealed[idSize+n:], []byte(ad))
		if err != nil {
			return nil, ErrOpen
		}
		return plain, nil
	}
	return nil, ErrOpen
}
