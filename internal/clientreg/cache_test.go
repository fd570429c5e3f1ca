package clientreg

import (
	"fmt"
	"testing"
	"time"
)

func TestMemoryCache(t *testing.T) {
	clock := newFakeClock()
	c := NewMemoryCache(2, clock.Now)
	ctx := t.Context()
	get := func(key string) string {
		t.Helper()
		v, ok, err := c.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "<none>"
		}
		return string(v)
	}

	val := []byte("a")
	c.Set(ctx, "a", val, time.Minute)
	val[0] = 'x' // the cache keeps its own copy
	if got := get("a"); got != "a" {
		t.Errorf("Get(a) = %s, want a", got)
	}
	clock.Advance(time.Minute - time.Nanosecond)
	if got := get("a"); got != "a" {
		t.Errorf("just before its ttl: Get(a) = %s, want a", got)
	}
	clock.Advance(time.Nanosecond)
	if got := get("a"); got != "<none>" {
		t.Errorf("at its ttl: Get(a) = %s, want none", got)
	}

	c.Set(ctx, "b", []byte("b"), time.Hour)
	c.Set(ctx, "c", []byte("c"), time.Hour)
	get("b") // b is now more recently used than c
	c.Set(ctx, "d", []byte("d"), time.Hour)
	if c.Len() != 2 {
		t.Errorf("Len = %d, want the bound 2", c.Len())
	}
	if got := get("c"); got != "<none>" {
		t.Errorf("the least recently used entry was kept: Get(c) = %s", got)
	}
	if get("b") != "b" || get("d") != "d" {
		t.Error("a recently used entry was dropped")
	}

	c.Set(ctx, "b", []byte("b"), 0)
	if got := get("b"); got != "<none>" {
		t.Errorf("after Set with ttl 0: Get(b) = %s, want none", got)
	}
}

func TestMemoryCacheDefaultSize(t *testing.T) {
	c := NewMemoryCache(0, nil)
	for i := range DefaultMemoryCacheSize + 10 {
		c.Set(t.Context(), fmt.Sprint(i), []byte("v"), time.Hour)
	}
	if c.Len() != DefaultMemoryCacheSize {
		t.Errorf("Len = %d, want %d", c.Len(), DefaultMemoryCacheSize)
	}
}
