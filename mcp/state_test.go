package mcp

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func fixedKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func TestSealerRoundTripAndRejections(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	old, _ := NewSealer([][]byte{fixedKey(1)}, time.Minute, clock)
	rotated, _ := NewSealer([][]byte{fixedKey(2), fixedKey(1)}, time.Minute, clock)
	other, _ := NewSealer([][]byte{fixedKey(3)}, time.Minute, clock)
	digest := requestDigest("tools/call", "t", []byte(`{"a":1}`))

	sealed, err := old.Seal("round=1", digest, "alice")
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(sealed)
	flipped[len(flipped)-3] ^= 1

	tests := []struct {
		name    string
		sealer  *Sealer
		state   string
		digest  []byte
		subject string
		advance time.Duration
		want    string // "" means ErrInvalidState
	}{
		{name: "same key", sealer: old, state: sealed, digest: digest, subject: "alice", want: "round=1"},
		{name: "rotated keys open old state", sealer: rotated, state: sealed, digest: digest, subject: "alice", want: "round=1"},
		{name: "unknown key", sealer: other, state: sealed, digest: digest, subject: "alice"},
		{name: "tampered", sealer: old, state: string(flipped), digest: digest, subject: "alice"},
		{name: "suffix appended", sealer: old, state: sealed + "-TAMPERED", digest: digest, subject: "alice"},
		{name: "plain text", sealer: old, state: "round=1", digest: digest, subject: "alice"},
		{name: "empty body", sealer: old, state: "v1.", digest: digest, subject: "alice"},
		{name: "other request", sealer: old, state: sealed, digest: requestDigest("tools/call", "t", []byte(`{"a":2}`)), subject: "alice"},
		{name: "other subject", sealer: old, state: sealed, digest: digest, subject: "mallory"},
		{name: "expired", sealer: old, state: sealed, digest: digest, subject: "alice", advance: 2 * time.Minute},
		{name: "not yet expired", sealer: old, state: sealed, digest: digest, subject: "alice", advance: 59 * time.Second, want: "round=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC).Add(tt.advance)
			got, err := tt.sealer.Open(tt.state, tt.digest, tt.subject)
			if tt.want == "" {
				if !errors.Is(err, ErrInvalidState) {
					t.Fatalf("Open = %q, %v; want ErrInvalidState", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Open = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// TestOpenAcceptsOnlyTheSealedString: every other encoding of the same
// bytes (line breaks anywhere, other unused low bits in the last
// character) is refused, so the string Seal wrote is the only one that
// opens. Fuzzing found the line breaks.
func TestOpenAcceptsOnlyTheSealedString(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s, _ := NewSealer([][]byte{fixedKey(1)}, time.Minute, func() time.Time { return now })
	digest := requestDigest("tools/call", "t", []byte(`{"a":1}`))
	sealed, err := s.Seal("round=1", digest, "alice")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.TrimPrefix(sealed, sealVersion)
	want, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil {
		t.Fatal(err)
	}
	var variants []string
	for _, brk := range []string{"\n", "\r", "\r\n", "\n\n"} {
		for _, at := range []int{0, 1, len(body) / 2, len(body) - 1, len(body)} {
			variants = append(variants, body[:at]+brk+body[at:])
		}
	}
	// The last character carries unused low bits unless the body's
	// length is a multiple of 4 characters.
	if len(want)%3 != 0 {
		last := strings.IndexByte(base64URLAlphabet, body[len(body)-1])
		for bit := range 4 {
			variants = append(variants, body[:len(body)-1]+string(base64URLAlphabet[last^(1<<bit)]))
		}
	}
	tried := 0
	for _, v := range variants {
		// Only strings that a lenient decoder reads as the same bytes are
		// other encodings of this state.
		if got, err := base64.RawURLEncoding.DecodeString(v); err != nil || !bytes.Equal(got, want) {
			continue
		}
		tried++
		if got, err := s.Open(sealVersion+v, digest, "alice"); !errors.Is(err, ErrInvalidState) {
			t.Errorf("Open(%q) = %q, %v: another encoding of the sealed state opened", sealVersion+v, got, err)
		}
	}
	if tried < 20 {
		t.Fatalf("only %d other encodings of the state were tried", tried)
	}
	if got, err := s.Open(sealed, digest, "alice"); err != nil || got != "round=1" {
		t.Fatalf("the sealed string does not open: %q, %v", got, err)
	}
}

const base64URLAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestSealHidesState(t *testing.T) {
	s, _ := NewSealer([][]byte{fixedKey(1)}, time.Minute, nil)
	sealed, _ := s.Seal("secret-round-state", nil, "")
	if strings.Contains(sealed, "secret") {
		t.Fatalf("sealed state leaks its plaintext: %s", sealed)
	}
	again, _ := s.Seal("secret-round-state", nil, "")
	if sealed == again {
		t.Fatal("two seals of the same state are equal; nonces are not random")
	}
}

func TestRequestDigestCanonical(t *testing.T) {
	a := requestDigest("tools/call", "t", []byte(`{"b": 2, "a": 1}`))
	b := requestDigest("tools/call", "t", []byte(`{"a":1,"b":2}`))
	if !bytes.Equal(a, b) {
		t.Error("key order changes the digest")
	}
	if !bytes.Equal(requestDigest("tools/call", "t", []byte(`{}`)), requestDigest("tools/call", "t", nil)) {
		t.Error("{} and no arguments digest differently")
	}
	if bytes.Equal(requestDigest("tools/call", "ab", nil), requestDigest("tools/call", "a", []byte(`"b"`))) {
		t.Error("digest parts are not delimited")
	}
}

func TestNewSealerErrors(t *testing.T) {
	tests := []struct {
		name string
		keys [][]byte
		ttl  time.Duration
	}{
		{name: "no keys", ttl: time.Minute},
		{name: "short key", keys: [][]byte{[]byte("short")}, ttl: time.Minute},
		{name: "zero ttl", keys: [][]byte{fixedKey(1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewSealer(tt.keys, tt.ttl, nil); err == nil {
				t.Fatal("NewSealer succeeded")
			}
		})
	}
}

// TestLoadKeys: mcp.LoadKeys reads a keys file as internal/keyring does
// (its own tests cover the format), naming the request-state keys in its
// errors.
func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok")
	if err := os.WriteFile(ok, []byte(base64.StdEncoding.EncodeToString(fixedKey(1))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if keys, err := LoadKeys(ok); err != nil || len(keys) != 1 || !bytes.Equal(keys[0], fixedKey(1)) {
		t.Fatalf("LoadKeys = %v, %v", keys, err)
	}
	if _, err := LoadKeys(filepath.Join(dir, "nope")); err == nil || !strings.HasPrefix(err.Error(), "mcp: request-state keys: ") || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("LoadKeys of a missing file: %v", err)
	}
}
