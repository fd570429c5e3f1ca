package authserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
)

// unreplicatedKV makes the writes fail picks behave as rediskit's do when
// Redis took them but too few replicas acknowledged: applied, then what
// rediskit takes back taken back (a SetNX's value deleted, a swap swapped
// back, a GetDel's value put back; a Set or a Del stays), and an
// ErrNotReplicated returned.
type unreplicatedKV struct {
	kv.KV
	mu   sync.Mutex
	fail func(op, key string) bool
	hits []string // op key of each write failed
}

var errNotReplicated = fmt.Errorf("%w: 0 of 1 within 500ms", rediskit.ErrNotReplicated)

func (k *unreplicatedKV) failing(op, key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail == nil || !k.fail(op, key) {
		return false
	}
	k.hits = append(k.hits, op+" "+key)
	return true
}

func (k *unreplicatedKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if err := k.KV.Set(ctx, key, v, ttl); err != nil || !k.failing("set", key) {
		return err
	}
	return errNotReplicated
}

func (k *unreplicatedKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	if err != nil || !k.failing("setnx", key) {
		return ok, err
	}
	if ok {
		k.KV.Del(ctx, key) // the value is this writer's: it won
	}
	return false, errNotReplicated
}

func (k *unreplicatedKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.CompareAndSwap(ctx, key, old, v, ttl)
	if err != nil || !k.failing("swap", key) {
		return ok, err
	}
	if ok {
		k.KV.CompareAndSwap(ctx, key, v, old, ttl)
	}
	return false, errNotReplicated
}

func (k *unreplicatedKV) Del(ctx context.Context, keys ...string) error {
	if err := k.KV.Del(ctx, keys...); err != nil || !k.failing("del", strings.Join(keys, " ")) {
		return err
	}
	return errNotReplicated
}

// TestRefreshNotReplicatedIsRetried: a refresh one of whose writes Redis
// took but too few replicas acknowledged fails with 503, and the client's
// retry with the same refresh token is a refresh (200), not a reuse that
// revokes the grant: whichever write it was. The token the retry replaced
// is then reuse, as always.
func TestRefreshNotReplicatedIsRetried(t *testing.T) {
	for _, write := range []string{"del at:", "set at:", "set rt:", "swap rt-current:"} {
		t.Run(write, func(t *testing.T) {
			ts := startServer(t)
			kv := &unreplicatedKV{KV: ts.kv}
			ts.kv, ts.store.kv = kv, kv
			rt := ts.fullFlow(t)["refresh_token"].(string)
			op, prefix, _ := strings.Cut(write, " ")
			var once atomic.Bool
			kv.mu.Lock()
			kv.fail = func(o, key string) bool {
				return o == op && strings.HasPrefix(key, prefix) && once.CompareAndSwap(false, true)
			}
			kv.mu.Unlock()

			status, body := ts.refresh(t, rt)
			if status != http.StatusServiceUnavailable || body["error"] != "temporarily_unavailable" {
				t.Fatalf("a refresh whose %q reached too few replicas: %d %v, want 503 temporarily_unavailable", write, status, body)
			}
			if !once.Load() {
				t.Fatalf("the refresh made no %q write: the test checks nothing", write)
			}
			status, body = ts.refresh(t, rt)
			if status != http.StatusOK {
				t.Fatalf("the client's retry with the same refresh token: %d %v, want 200", status, body)
			}
			if n := ts.events.count(Event{Endpoint: "token", Grant: "refresh_token", Outcome: "refused", Reason: "refresh_reuse"}); n != 0 {
				t.Fatalf("the retry was counted as reuse (%d refresh_reuse events)", n)
			}
			if status, body := ts.refresh(t, body["refresh_token"].(string)); status != http.StatusOK {
				t.Fatalf("the token the retry issued: %d %v", status, body)
			}
			if status, body := ts.refresh(t, rt); status != http.StatusBadRequest || body["error"] != "invalid_grant" {
				t.Fatalf("the replaced token once more: %d %v, want 400 invalid_grant (reuse)", status, body)
			}
		})
	}
}

// TestConcurrentRefreshesOneWins: of refreshes racing with one token, one
// gets tokens; the token is then no longer current.
func TestConcurrentRefreshesOneWins(t *testing.T) {
	ts := startServer(t)
	rt := ts.fullFlow(t)["refresh_token"].(string)
	const n = 8
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if status, _ := ts.refresh(t, rt); status == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 {
		t.Fatalf("%d of %d concurrent refreshes with one token got tokens, want 1", ok.Load(), n)
	}
}
