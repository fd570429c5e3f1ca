// Package vault keeps users' connected accounts: the tokens that an
// upstream's own authorization server issued to Portcullis for one user.
// Each entry is sealed (AES-256-GCM, keys from a keys file with rotation,
// internal/keyring) and bound to the connection and the user it belongs
// to: the key it is stored under names both only by hashes, the seal is
// bound to that key, and the sealed plaintext names the user again, so an
// entry copied under another user's key does not open. Entries live in an
// internal/kv store: Redis for several replicas, memory for one.
package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

// Purpose is what the vault's keys are derived for (keyring.New): the
// same keys file may serve other purposes without their values opening
// as each other's.
const Purpose = "vault of connected accounts"

// ErrNotConnected is the answer for a user with no entry for a
// connection: never connected, disconnected, expired, or dropped.
var ErrNotConnected = errors.New("vault: the account is not connected")

// ErrSealed is the answer for an entry that does not open with the
// vault's keys or is not bound to the user asked for: the key that sealed
// it was dropped, or it was moved or forged. The entry is never used.
var ErrSealed = errors.New("vault: the entry does not open with the vault's keys for this user")

// Owner is the user an entry belongs to: the issuer and subject of the
// tokens they call Portcullis with.
type Owner struct {
	Issuer  string `json:"iss"`
	Subject string `json:"sub"`
}

// Entry is a connected account: the upstream authorization server's
// tokens for one user.
type Entry struct {
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token,omitempty"`
	TokenType    string    `json:"token_type,omitempty"`
	Expiry       time.Time `json:"expiry,omitzero"`
	Scope        string    `json:"scope,omitempty"`
	// Issuer is the authorization server that issued the tokens.
	Issuer string `json:"issuer,omitempty"`
	// Connected is when the user connected the account.
	Connected time.Time `json:"connected"`
	// Written is when the entry was last written: the store keeps it for
	// the vault's time to live from then.
	Written time.Time `json:"written,omitzero"`
}

// sealedEntry is what is sealed: the entry and whom it belongs to.
type sealedEntry struct {
	Connection string `json:"conn"`
	Owner      Owner  `json:"owner"`
	Entry      Entry  `json:"entry"`
}

// Vault is the connected accounts of every user, for every connection.
type Vault struct {
	kv   kv.KV
	ring *keyring.Ring
	ttl  time.Duration
}

// New returns the vault keeping entries in store, sealed with ring, each
// for ttl after it was last written (a refresh writes it again): an
// account unused for longer is forgotten.
func New(store kv.KV, ring *keyring.Ring, ttl time.Duration) (*Vault, error) {
	switch {
	case store == nil || ring == nil:
		return nil, errors.New("vault: a store and keys are required")
	case ttl <= 0:
		return nil, fmt.Errorf("vault: the time to live must be positive, got %v", ttl)
	}
	return &Vault{kv: store, ring: ring, ttl: ttl}, nil
}

// Key is the store key of owner's entry for connection: hashes only, so
// that the store names no user.
func Key(connection string, owner Owner) string {
	return kv.Join("vault", kv.Hash(connection), kv.Hash(owner.Issuer+"\x00"+owner.Subject))
}

// Sealed is an entry as stored: what [Vault.Swap] compares.
type Sealed []byte

// Get returns owner's entry for connection and its sealed form, or
// ErrNotConnected, ErrSealed, or the store's error.
func (v *Vault) Get(ctx context.Context, connection string, owner Owner) (*Entry, Sealed, error) {
	key := Key(connection, owner)
	b, err := v.kv.Get(ctx, key)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return nil, nil, ErrNotConnected
	case err != nil:
		return nil, nil, err
	}
	plain, err := v.ring.Open(b, key)
	if err != nil {
		return nil, nil, ErrSealed
	}
	var s sealedEntry
	if err := json.Unmarshal(plain, &s); err != nil || s.Connection != connection || s.Owner != owner {
		return nil, nil, ErrSealed
	}
	return &s.Entry, b, nil
}

// seal seals e as owner's entry for connection.
func (v *Vault) seal(connection string, owner Owner, e *Entry) (string, []byte, error) {
	plain, err := json.Marshal(sealedEntry{Connection: connection, Owner: owner, Entry: *e})
	if err != nil {
		return "", nil, err
	}
	key := Key(connection, owner)
	return key, v.ring.Seal(plain, key), nil
}

// Put stores e as owner's entry for connection, replacing any.
func (v *Vault) Put(ctx context.Context, connection string, owner Owner, e *Entry) error {
	if e == nil || e.AccessToken == "" {
		return errors.New("vault: an entry needs an access token")
	}
	key, b, err := v.seal(connection, owner, e)
	if err != nil {
		return err
	}
	return v.kv.Set(ctx, key, b, v.ttl)
}

// Swap stores e as owner's entry for connection if the entry is still old
// (what Get returned), and reports whether it did: of two replicas that
// refreshed one entry at once, one wins and the other reads the winner's.
func (v *Vault) Swap(ctx context.Context, connection string, owner Owner, old Sealed, e *Entry) (bool, error) {
	key, b, err := v.seal(connection, owner, e)
	if err != nil {
		return false, err
	}
	return v.kv.CompareAndSwap(ctx, key, old, b, v.ttl)
}

// Delete removes owner's entry for connection; none is no error.
func (v *Vault) Delete(ctx context.Context, connection string, owner Owner) error {
	return v.kv.Del(ctx, Key(connection, owner))
}
