package vault

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/keyring"
	"github.com/portcullis-mcp/portcullis/internal/kv"
)

var (
	alice = Owner{Issuer: "https://idp.example", Subject: "alice"}
	bob   = Owner{Issuer: "https://idp.example", Subject: "bob"}
)

func newVault(t *testing.T, store kv.KV, keys ...byte) *Vault {
	t.Helper()
	var ks [][]byte
	for _, k := range keys {
		ks = append(ks, bytes.Repeat([]byte{k}, keyring.KeySize))
	}
	r, err := keyring.New(ks, Purpose)
	if err != nil {
		t.Fatal(err)
	}
	v, err := New(store, r, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func entry(access string) *Entry {
	return &Entry{AccessToken: access, RefreshToken: "refresh-" + access, TokenType: "Bearer", Issuer: "https://saas.example"}
}

func TestGetPutDelete(t *testing.T) {
	ctx := context.Background()
	v := newVault(t, kv.NewMemory(nil), 1)
	if _, _, err := v.Get(ctx, "github", alice); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Get before any Put: %v, want ErrNotConnected", err)
	}
	if err := v.Put(ctx, "github", alice, entry("a1")); err != nil {
		t.Fatal(err)
	}
	e, _, err := v.Get(ctx, "github", alice)
	if err != nil || e.AccessToken != "a1" || e.RefreshToken != "refresh-a1" {
		t.Fatalf("Get = %+v, %v", e, err)
	}
	for _, other := range []struct {
		conn  string
		owner Owner
	}{{"github", bob}, {"jira", alice}, {"github", Owner{Issuer: "https://other.example", Subject: "alice"}}} {
		if _, _, err := v.Get(ctx, other.conn, other.owner); !errors.Is(err, ErrNotConnected) {
			t.Errorf("Get %s %v: %v, want ErrNotConnected: one user's entry served another", other.conn, other.owner, err)
		}
	}
	if err := v.Delete(ctx, "github", alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get(ctx, "github", alice); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if err := v.Put(ctx, "github", alice, &Entry{}); err == nil {
		t.Fatal("Put of an entry without an access token succeeded")
	}
}

// TestEntryMovedToAnotherUser: an entry copied in the store under another
// user's key (or forged) does not open.
func TestEntryMovedToAnotherUser(t *testing.T) {
	ctx := context.Background()
	store := kv.NewMemory(nil)
	v := newVault(t, store, 1)
	if err := v.Put(ctx, "github", alice, entry("alice-token")); err != nil {
		t.Fatal(err)
	}
	b, err := store.Get(ctx, Key("github", alice))
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{"another user": Key("github", bob), "another connection": Key("jira", alice)} {
		if err := store.Set(ctx, key, b, time.Hour); err != nil {
			t.Fatal(err)
		}
		owner, conn := bob, "github"
		if name == "another connection" {
			owner, conn = alice, "jira"
		}
		if e, _, err := v.Get(ctx, conn, owner); !errors.Is(err, ErrSealed) {
			t.Errorf("%s: Get = %+v, %v; want ErrSealed", name, e, err)
		}
	}
	if err := store.Set(ctx, Key("github", bob), []byte("forged"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, _, err := v.Get(ctx, "github", bob); !errors.Is(err, ErrSealed) {
		t.Errorf("forged entry: %v, want ErrSealed", err)
	}
}

// TestKeys: a vault with the wrong key opens nothing; after a rotation
// the older key still opens what it sealed and the newer one seals.
func TestKeys(t *testing.T) {
	ctx := context.Background()
	store := kv.NewMemory(nil)
	if err := newVault(t, store, 1).Put(ctx, "github", alice, entry("a1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newVault(t, store, 2).Get(ctx, "github", alice); !errors.Is(err, ErrSealed) {
		t.Fatalf("Get with the wrong key: %v, want ErrSealed", err)
	}
	rotated := newVault(t, store, 2, 1)
	if e, _, err := rotated.Get(ctx, "github", alice); err != nil || e.AccessToken != "a1" {
		t.Fatalf("Get after rotation: %+v, %v", e, err)
	}
	if err := rotated.Put(ctx, "github", alice, entry("a2")); err != nil {
		t.Fatal(err)
	}
	if e, _, err := newVault(t, store, 2).Get(ctx, "github", alice); err != nil || e.AccessToken != "a2" {
		t.Fatalf("the new key did not seal: %+v, %v", e, err)
	}
}

// TestStoreHoldsNoPlaintext: neither a token nor a user's name is in the
// store, in a key or a value.
func TestStoreHoldsNoPlaintext(t *testing.T) {
	ctx := context.Background()
	store := kv.NewMemory(nil)
	v := newVault(t, store, 1)
	for _, o := range []Owner{alice, bob} {
		if err := v.Put(ctx, "github", o, entry("token-of-"+o.Subject)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	store.Each(func(key string, value []byte) {
		n++
		for _, secret := range []string{"token-of-alice", "refresh-token-of-bob", "alice", "bob", "github", "idp.example"} {
			if strings.Contains(key, secret) || bytes.Contains(value, []byte(secret)) {
				t.Errorf("%q is in the store under %q", secret, key)
			}
		}
	})
	if n != 2 {
		t.Fatalf("the store holds %d entries, want 2", n)
	}
}

// TestSwap: of two refreshes of one entry, the second, made from the same
// old entry, loses.
func TestSwap(t *testing.T) {
	ctx := context.Background()
	v := newVault(t, kv.NewMemory(nil), 1)
	if err := v.Put(ctx, "github", alice, entry("a1")); err != nil {
		t.Fatal(err)
	}
	_, old, err := v.Get(ctx, "github", alice)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := v.Swap(ctx, "github", alice, old, entry("a2")); !ok || err != nil {
		t.Fatalf("first Swap = %v, %v", ok, err)
	}
	if ok, err := v.Swap(ctx, "github", alice, old, entry("a3")); ok || err != nil {
		t.Fatalf("second Swap from the same old entry = %v, %v; want false", ok, err)
	}
	if e, _, _ := v.Get(ctx, "github", alice); e.AccessToken != "a2" {
		t.Fatalf("the entry is %q, want the first refresh's", e.AccessToken)
	}
}

func TestNew(t *testing.T) {
	r, _ := keyring.New([][]byte{bytes.Repeat([]byte{1}, keyring.KeySize)}, Purpose)
	for name, f := range map[string]func() (*Vault, error){
		"no store": func() (*Vault, error) { return New(nil, r, time.Hour) },
		"no keys":  func() (*Vault, error) { return New(kv.NewMemory(nil), nil, time.Hour) },
		"no ttl":   func() (*Vault, error) { return New(kv.NewMemory(nil), r, 0) },
	} {
		if _, err := f(); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
