package redistest

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Entry is one key of a Redis server and everything stored under it, as
// [Server.Dump] read it.
type Entry struct {
	// Key is the key's name.
	Key string
	// Type is what TYPE answered: string, hash, list, set, zset or stream.
	Type string
	// Data are the value's parts as stored: a string's bytes; a hash's
	// fields and values; a list's, a set's or a sorted set's members (and
	// a sorted set's scores); a stream's entry ids, fields and values.
	Data [][]byte
}

// Contains reports whether needle is in the key's name or in any part of
// its value.
func (e Entry) Contains(needle []byte) bool {
	if bytes.Contains([]byte(e.Key), needle) {
		return true
	}
	for _, d := range e.Data {
		if bytes.Contains(d, needle) {
			return true
		}
	}
	return false
}

// Dump returns every key the server holds, with its value read whatever
// its type (SCAN, then TYPE and the matching read per key); a key that
// expires in between is left out. A cluster node answers with the keys of
// its own slots. The test fails on a type Dump cannot read, so that
// nothing stored goes unseen.
func (s *Server) Dump(t testing.TB) []Entry {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr, Password: argValue(s.args, "--requirepass"), DisableIdentity: true})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), haTimeout)
	defer cancel()
	var out []Entry
	iter := c.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		e, ok, err := readEntry(ctx, c, iter.Val())
		if err != nil {
			t.Fatalf("redistest: reading %q on %s: %v", iter.Val(), s.Addr, err)
		}
		if ok {
			out = append(out, e)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("redistest: SCAN on %s: %v", s.Addr, err)
	}
	return out
}

// readEntry reads key whatever its type; ok is false when the key is gone.
func readEntry(ctx context.Context, c *redis.Client, key string) (e Entry, ok bool, err error) {
	e = Entry{Key: key}
	if e.Type, err = c.Type(ctx, key).Result(); err != nil {
		return e, false, err
	}
	add := func(ss ...string) {
		for _, s := range ss {
			e.Data = append(e.Data, []byte(s))
		}
	}
	switch e.Type {
	case "none":
		return e, false, nil
	case "string":
		v, err := c.Get(ctx, key).Result()
		if err == redis.Nil {
			return e, false, nil
		}
		if err != nil {
			return e, false, err
		}
		add(v)
	case "hash":
		m, err := c.HGetAll(ctx, key).Result()
		if err != nil {
			return e, false, err
		}
		for f, v := range m {
			add(f, v)
		}
	case "list":
		v, err := c.LRange(ctx, key, 0, -1).Result()
		if err != nil {
			return e, false, err
		}
		add(v...)
	case "set":
		v, err := c.SMembers(ctx, key).Result()
		if err != nil {
			return e, false, err
		}
		add(v...)
	case "zset":
		v, err := c.ZRangeWithScores(ctx, key, 0, -1).Result()
		if err != nil {
			return e, false, err
		}
		for _, z := range v {
			add(fmt.Sprint(z.Member), strconv.FormatFloat(z.Score, 'g', -1, 64))
		}
	case "stream":
		v, err := c.XRange(ctx, key, "-", "+").Result()
		if err != nil {
			return e, false, err
		}
		for _, m := range v {
			add(m.ID)
			for f, val := range m.Values {
				add(f, fmt.Sprint(val))
			}
		}
	default:
		return e, false, fmt.Errorf("type %q: Dump reads string, hash, list, set, zset and stream", e.Type)
	}
	return e, true, nil
}

// Dump returns what every node of the cluster holds ([Server.Dump]).
func (c *Cluster) Dump(t testing.TB) []Entry {
	t.Helper()
	var out []Entry
	for _, n := range c.Nodes {
		out = append(out, n.Dump(t)...)
	}
	return out
}

// Dump returns what the data server the sentinels name as the primary
// holds ([Server.Dump]): after a failover, the promoted replica.
func (d *Sentinel) Dump(t testing.TB) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addr, err := d.PrimaryAddr(ctx)
	if err != nil {
		t.Fatalf("redistest: asking the sentinels for the primary: %v", err)
	}
	for _, s := range []*Server{d.Primary, d.Replica} {
		if s.Addr == addr {
			return s.Dump(t)
		}
	}
	t.Fatalf("redistest: the sentinels name %s as the primary, neither of the data servers", addr)
	return nil
}
