package rediskit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Values are expiring values under one key prefix: a store's records
// (legacy sessions, the authorization server's sign-ins, grants and
// consents). Every value expires. Each write waits for replicas as the
// [Client]'s [Durability] says; a conditional write that reached too few
// of them is taken back on the primary as well as it can be (see each
// method), so that a client's retry of a request that failed with
// [ErrNotReplicated] meets what the replicas hold, not a half-done
// earlier try. Reads and the expiry that [Values.GetEx] restarts do not
// wait.
//
// Values are one key each, so they spread over a Cluster's slots; nothing
// here touches two keys at once.
type Values struct {
	c      *Client
	prefix string
}

// Values returns the values whose keys start with prefix (such as
// "portcullis:session:").
func (c *Client) Values(prefix string) *Values { return &Values{c: c, prefix: prefix} }

// Key returns the Redis key of the value name.
func (v *Values) Key(name string) string { return v.prefix + name }

// found turns a read's answer into (value, found, error).
func found(b []byte, err error, op string) ([]byte, bool, error) {
	switch {
	case err == nil:
		return b, true, nil
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	}
	return nil, false, Unavailable(op, err)
}

// checkTTL refuses a value that would never expire.
func checkTTL(op string, ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("rediskit: %s: a value needs a positive time to live, got %v", op, ttl)
	}
	return nil
}

// Get returns name's value; found is false when there is none.
func (v *Values) Get(ctx context.Context, name string) (value []byte, found_ bool, err error) {
	b, err := v.c.rdb.Get(ctx, v.Key(name)).Bytes()
	return found(b, err, "get")
}

// GetEx returns name's value and makes it expire ttl from now, in one
// step (GETEX); found is false when there is none. The new expiry is not
// waited for: after a failover the value expires as last written.
func (v *Values) GetEx(ctx context.Context, name string, ttl time.Duration) (value []byte, found_ bool, err error) {
	if err := checkTTL("getex", ttl); err != nil {
		return nil, false, err
	}
	b, err := v.c.rdb.GetEx(ctx, v.Key(name), ttl).Bytes()
	return found(b, err, "getex")
}

// Set stores value under name, to expire after ttl.
func (v *Values) Set(ctx context.Context, name string, value []byte, ttl time.Duration) error {
	if err := checkTTL("set", ttl); err != nil {
		return err
	}
	key := v.Key(name)
	return Unavailable("set", v.c.Write(ctx, key, func(w redis.Cmdable) error {
		return w.Set(ctx, key, value, ttl).Err()
	}))
}

// SetNX stores value under name, to expire after ttl, only if name holds
// no value, and reports whether it did: the one winner of a race. A
// value it stored that reached too few replicas is deleted again (if it
// still is this value: give each writer a value of its own, such as a
// random one, so that it takes back only its own) before
// [ErrNotReplicated] is returned.
func (v *Values) SetNX(ctx context.Context, name string, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL("setnx", ttl); err != nil {
		return false, err
	}
	key := v.Key(name)
	won := false
	err := v.c.WriteUndo(ctx, key, func(w redis.Cmdable) error {
		var err error
		won, err = w.SetNX(ctx, key, value, ttl).Result()
		return err
	}, func(w redis.Cmdable) error {
		if !won {
			return nil
		}
		return deleteIfScript.Run(ctx, w, []string{key}, value).Err()
	})
	if err != nil {
		return false, Unavailable("setnx", err)
	}
	return won, nil
}

// swapScript sets KEYS[1] to ARGV[2] for ARGV[3] ms if it holds ARGV[1],
// and returns 1; it returns 1 too if it holds ARGV[2] already (a retry),
// else 0.
var swapScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[2] then return 1 end
if v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1
`)

// deleteIfScript deletes KEYS[1] if it holds ARGV[1], and returns 1;
// else 0.
var deleteIfScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// getDelScript returns KEYS[1]'s value and its time to live in ms, and
// deletes it; nil when there is none.
var getDelScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
return {v, ttl}
`)

// millis is d in whole milliseconds, rounded up, at least 1.
func millis(d time.Duration) int64 {
	return max(1, int64((d+time.Millisecond-1)/time.Millisecond))
}

// CompareAndSwap stores value under name, to expire after ttl, if name
// holds old, and reports whether it did; it reports true too when name
// holds value already (a retry whose reply was lost), so give each writer
// values of its own where writers race. A swap that reached too few
// replicas is swapped back (to old, for ttl, if name still holds value)
// before [ErrNotReplicated] is returned.
func (v *Values) CompareAndSwap(ctx context.Context, name string, old, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL("swap", ttl); err != nil {
		return false, err
	}
	key := v.Key(name)
	swapped := false
	err := v.c.WriteUndo(ctx, key, func(w redis.Cmdable) error {
		n, err := swapScript.Run(ctx, w, []string{key}, old, value, millis(ttl)).Int()
		swapped = n == 1
		return err
	}, func(w redis.Cmdable) error {
		if !swapped {
			return nil
		}
		return swapScript.Run(ctx, w, []string{key}, value, old, millis(ttl)).Err()
	})
	if err != nil {
		return false, Unavailable("swap", err)
	}
	return swapped, nil
}

// CompareAndDelete deletes name if it holds value, and reports whether it
// did.
func (v *Values) CompareAndDelete(ctx context.Context, name string, value []byte) (bool, error) {
	key := v.Key(name)
	var n int
	err := v.c.Write(ctx, key, func(w redis.Cmdable) error {
		var err error
		n, err = deleteIfScript.Run(ctx, w, []string{key}, value).Int()
		return err
	})
	if err != nil {
		return false, Unavailable("delete", err)
	}
	return n == 1, nil
}

// GetDel returns name's value and deletes it, in one step: what is used
// once is taken once. found is false when there is none. A delete that
// reached too few replicas is undone (the value stored again, for the
// time it had left, unless name holds another by then) before
// [ErrNotReplicated] is returned.
func (v *Values) GetDel(ctx context.Context, name string) (value []byte, found_ bool, err error) {
	key := v.Key(name)
	var (
		b   []byte
		ttl int64
	)
	err = v.c.WriteUndo(ctx, key, func(w redis.Cmdable) error {
		res, err := getDelScript.Run(ctx, w, []string{key}).Slice()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			return err
		}
		s, ok := res[0].(string)
		t, ok2 := res[1].(int64)
		if len(res) != 2 || !ok || !ok2 {
			return fmt.Errorf("rediskit: getdel: an answer of %v", res)
		}
		b, ttl = []byte(s), t
		return nil
	}, func(w redis.Cmdable) error {
		if b == nil || ttl <= 0 {
			return nil
		}
		return w.SetArgs(ctx, key, b, redis.SetArgs{Mode: "NX", TTL: time.Duration(ttl) * time.Millisecond}).Err()
	})
	if err != nil {
		return nil, false, Unavailable("getdel", err)
	}
	return b, b != nil, nil
}

// Del deletes the values names; absent ones are no error. Each is a key
// of its own: on Cluster they may be in different slots.
func (v *Values) Del(ctx context.Context, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	groups := [][]string{names}
	if _, cluster := v.c.rdb.(*redis.ClusterClient); cluster && v.c.d.Replicas > 0 {
		// One write per key: each waits on the primary of its slot.
		groups = groups[:0]
		for _, n := range names {
			groups = append(groups, []string{n})
		}
	}
	for _, g := range groups {
		err := v.c.Write(ctx, v.Key(g[0]), func(w redis.Cmdable) error {
			// One DEL per key, pipelined: on Cluster one DEL of keys in
			// different slots is refused (CROSSSLOT); the cluster client
			// sends each to its node.
			_, err := w.Pipelined(ctx, func(p redis.Pipeliner) error {
				for _, n := range g {
					p.Del(ctx, v.Key(n))
				}
				return nil
			})
			return err
		})
		if err != nil {
			return Unavailable("del", err)
		}
	}
	return nil
}
