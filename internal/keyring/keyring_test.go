package keyring

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func ring(t *testing.T, purpose string, keys ...[]byte) *Ring {
	t.Helper()
	r, err := New(keys, purpose)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOpen(t *testing.T) {
	sealed := ring(t, "vault", key(1)).Seal([]byte("secret"), "vault:a")
	tests := []struct {
		name   string
		ring   *Ring
		sealed []byte
		ad     string
		ok     bool
	}{
		{"same key and binding", ring(t, "vault", key(1)), sealed, "vault:a", true},
		{"after rotation: an older key opens", ring(t, "vault", key(2), key(1)), sealed, "vault:a", true},
		{"the key dropped", ring(t, "vault", key(2)), sealed, "vault:a", false},
		{"another binding", ring(t, "vault", key(1)), sealed, "vault:b", false},
		{"another purpose, same file key", ring(t, "request state", key(1)), sealed, "vault:a", false},
		{"truncated", ring(t, "vault", key(1)), sealed[:len(sealed)-1], "vault:a", false},
		{"only the key id", ring(t, "vault", key(1)), sealed[:idSize], "vault:a", false},
		{"empty", ring(t, "vault", key(1)), nil, "vault:a", false},
		{"a bit flipped", ring(t, "vault", key(1)), flip(sealed, len(sealed)-3), "vault:a", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, err := tt.ring.Open(tt.sealed, tt.ad)
			if tt.ok != (err == nil) || (err == nil && string(plain) != "secret") {
				t.Fatalf("Open = %q, %v; want ok=%v", plain, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrOpen) {
				t.Fatalf("error %v is not ErrOpen", err)
			}
		})
	}
	if bytes.Contains(sealed, []byte("secret")) {
		t.Fatal("the sealed value holds the plaintext")
	}
	if a, b := ring(t, "vault", key(1)).Seal([]byte("x"), "k"), ring(t, "vault", key(1)).Seal([]byte("x"), "k"); bytes.Equal(a, b) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

func TestNewRefusesBadKeys(t *testing.T) {
	if _, err := New(nil, "vault"); err == nil {
		t.Error("New with no key succeeded")
	}
	if _, err := New([][]byte{key(1), []byte("short")}, "vault"); err == nil || !strings.Contains(err.Error(), "key 1 is 5 bytes") {
		t.Errorf("New with a short key: %v", err)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	k1 := base64.StdEncoding.EncodeToString(key(1))
	k2 := base64.RawURLEncoding.EncodeToString(key(2))
	tests := []struct {
		name, path, wantErr string
		want                int
	}{
		{name: "two keys with comments", path: write("ok", "# newest first\n"+k2+"\n\n"+k1+"\n"), want: 2},
		{name: "empty", path: write("empty", "# nothing\n"), wantErr: "holds no key"},
		{name: "not base64", path: write("bad", k1+"\n!!!\n"), wantErr: "line 2: key is not base64"},
		{name: "short", path: write("short", base64.StdEncoding.EncodeToString([]byte("x"))+"\n"), wantErr: "want 32"},
		{name: "missing", path: filepath.Join(dir, "nope"), wantErr: "no such file"},
		{name: "endless", path: "/dev/zero", wantErr: "larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, err := Load(tt.path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), k1) {
					t.Fatalf("the error names a key: %v", err)
				}
				return
			}
			if err != nil || len(keys) != tt.want || !bytes.Equal(keys[0], key(2)) {
				t.Fatalf("Load = %d keys, %v; want %d, newest first", len(keys), err, tt.want)
			}
		})
	}
}
