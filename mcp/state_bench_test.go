package mcp

import (
	"testing"
	"time"
)

// BenchmarkSealer measures what an MRTR round costs the server: digesting
// the request, sealing the state it hands out, and opening it when the
// client sends it back.
func BenchmarkSealer(b *testing.B) {
	s, err := NewSealer([][]byte{fixedKey(2), fixedKey(1)}, time.Minute, nil)
	if err != nil {
		b.Fatal(err)
	}
	args := []byte(`{"city":"Berlin","days":3,"units":{"temperature":"celsius","wind":"kmh"}}`)
	state := `{"round":1,"asked":"confirm","answers":["yes"]}`
	digest := requestDigest("tools/call", "weather", args)
	sealed, err := s.Seal(state, digest, "https://idp.example.com|alice")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("digest", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			requestDigest("tools/call", "weather", args)
		}
	})
	b.Run("seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := s.Seal(state, digest, "https://idp.example.com|alice"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if got, err := s.Open(sealed, digest, "https://idp.example.com|alice"); err != nil || got != state {
				b.Fatalf("Open = %q, %v", got, err)
			}
		}
	})
}
