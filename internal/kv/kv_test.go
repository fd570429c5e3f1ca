package kv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKV is the contract every KV keeps; advance moves its clock (or waits
// out a real TTL) by d.
func testKV(t *testing.T, kv KV, advance func(time.Duration)) {
	ctx := context.Background()
	t.Run("get set del", func(t *testing.T) {
		if _, err := kv.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get of nothing: %v, want ErrNotFound", err)
		}
		if err := kv.Set(ctx, "a", []byte("1"), time.Hour); err != nil {
			t.Fatal(err)
		}
		if v, err := kv.Get(ctx, "a"); err != nil || string(v) != "1" {
			t.Fatalf("Get = %q, %v", v, err)
		}
		if err := kv.Del(ctx, "a", "never-set"); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Get(ctx, "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get after Del: %v", err)
		}
	})
	t.Run("getdel takes once", func(t *testing.T) {
		kv.Set(ctx, "once", []byte("x"), time.Hour)
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if v, err := kv.GetDel(ctx, "once"); err == nil && string(v) == "x" {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d takers of one value, want 1", wins.Load())
		}
	})
	t.Run("setnx has one winner", func(t *testing.T) {
		var wins atomic.Int32
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				if ok, err := kv.SetNX(ctx, "nx", []byte("1"), time.Hour); err == nil && ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d winners, want 1", wins.Load())
		}
	})
	t.Run("swap from the value held", func(t *testing.T) {
		kv.Set(ctx, "current", []byte("a"), time.Hour)
		if ok, err := kv.CompareAndSwap(ctx, "current", []byte("x"), []byte("b"), time.Hour); ok || err != nil {
			t.Fatalf("a swap from a value not held = %v, %v; want refused", ok, err)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if ok, err := kv.CompareAndSwap(ctx, "current", []byte("a"), fmt.Appendf(nil, "b%d", i), time.Hour); err == nil && ok {
					wins.Add(1)
				}
			})
		}
		wg.Wait()
		if wins.Load() != 1 {
			t.Fatalf("%d swaps from one value, want 1", wins.Load())
		}
		v, _ := kv.Get(ctx, "current")
		if ok, err := kv.CompareAndSwap(ctx, "current", []byte("a"), v, time.Hour); !ok || err != nil {
			t.Fatalf("the winning swap again (a retry) = %v, %v; want true", ok, err)
		}
		if ok, _ := kv.CompareAndSwap(ctx, "absent", []byte("a"), []byte("b"), time.Hour); ok {
			t.Fatal("a swap of an absent key succeeded")
		}
	})
	t.Run("values expire", func(t *testing.T) {
		kv.Set(ctx, "short", []byte("1"), 1500*time.Millisecond)
		if ok, _ := kv.SetNX(ctx, "short-nx", []byte("1"), 1500*time.Millisecond); !ok {
			t.Fatal("SetNX of a new key refused")
		}
		advance(2 * time.Second)
		if _, err := kv.Get(ctx, "short"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("expired value: %v, want ErrNotFound", err)
		}
		if ok, _ := kv.SetNX(ctx, "short-nx", []byte("2"), time.Hour); !ok {
			t.Fatal("SetNX refused after the key expired")
		}
	})
}

func TestMemoryKV(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	testKV(t, NewMemory(clock), func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() })
}

func TestMemoryKVSweepsExpired(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	kv := NewMemory(func() time.Time { return now })
	ctx := context.Background()
	for i := range 2000 {
		kv.Set(ctx, string(rune('a'+i%26))+time.Duration(i).String(), []byte("v"), time.Second)
	}
	now = now.Add(time.Minute)
	for range 1024 {
		kv.Get(ctx, "x")
	}
	if n := len(kv.m); n != 0 {
		t.Fatalf("%d expired entries kept, want them swept", n)
	}
}
