package redisrate

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
)

func TestLimit(t *testing.T) {
	tests := []struct {
		name      string
		perSecond float64
		burst     int
		interval  time.Duration // between two requests, what GCRA uses
		wantErr   string
	}{
		{name: "whole rate", perSecond: 50, burst: 100, interval: 20 * time.Millisecond},
		{name: "one per second", perSecond: 1, burst: 1, interval: time.Second},
		{name: "one per four seconds", perSecond: 0.25, burst: 1, interval: 4 * time.Second},
		{name: "fractional above one", perSecond: 2.5, burst: 3, interval: 400 * time.Millisecond},
		{name: "one per hour", perSecond: 1.0 / 3600, burst: 1, interval: time.Hour},
		{name: "zero rate", perSecond: 0, burst: 1, wantErr: "positive number"},
		{name: "negative rate", perSecond: -1, burst: 1, wantErr: "positive number"},
		{name: "NaN rate", perSecond: math.NaN(), burst: 1, wantErr: "positive number"},
		{name: "infinite rate", perSecond: math.Inf(1), burst: 1, wantErr: "positive number"},
		{name: "no burst", perSecond: 1, burst: 0, wantErr: "burst must be at least 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := limit(tt.perSecond, tt.burst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("limit() = %+v, %v; want an error containing %q", lim, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if lim.Burst != tt.burst || lim.Rate < 1 {
				t.Fatalf("limit() = %+v", lim)
			}
			got := time.Duration(float64(lim.Period) / float64(lim.Rate))
			if diff := got - tt.interval; diff < -time.Microsecond || diff > time.Microsecond {
				t.Fatalf("limit() = %+v: one request every %v, want %v", lim, got, tt.interval)
			}
		})
	}
}

func TestKeyIsHashedAndPrefixed(t *testing.T) {
	const principal = "https://issuer.example\x00alice@example.com\x00client-1"
	k := Key("portcullis:", principal)
	if !strings.HasPrefix(k, "portcullis:rate:") || len(k) != len("portcullis:rate:")+32 {
		t.Fatalf("Key() = %q, want portcullis:rate: and 32 hex digits", k)
	}
	if strings.Contains(k, "alice") || strings.Contains(k, "issuer") {
		t.Fatalf("Key() = %q carries the principal", k)
	}
	if Key("portcullis:", principal+"x") == k {
		t.Fatal("two principals share a key")
	}
	// redis_rate names its key "rate:"+hash; prefixed puts it under ours.
	p := prefixed{prefix: "portcullis:"}
	if got := p.keys([]string{"rate:" + rediskit.Hash(principal)}); len(got) != 1 || got[0] != k {
		t.Fatalf("prefixed keys = %q, want [%s]", got, k)
	}
}
