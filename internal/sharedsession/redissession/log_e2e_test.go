//go:build e2e

package redissession

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/internal/sharedsession"
)

// kit is rdb without waiting for replicas.
func kit(rdb redis.UniversalClient) *rediskit.Client { return rediskit.New(rdb, rediskit.Durability{}) }

// eventsStep is one call of a [sharedsession.Log] test, or time passing,
// with what it must give.
type eventsStep struct {
	op      string // "append", "after", "last", "delete", "advance"
	session string // "a" or "b"
	stream  string
	data    []string // append: the events, in one Append
	ttl     time.Duration
	index   int           // after: the number asked after; append: the number wanted of the last; last: the number wanted (-1: none)
	want    []string      // after: the events wanted
	err     error         // after: the error wanted
	d       time.Duration // advance
}

func appendEv(session, stream, data string, ttl time.Duration, want int) eventsStep {
	return appendEvs(session, stream, ttl, want, data)
}

// appendEvs appends data in one Append, the number of the last wanted.
func appendEvs(session, stream string, ttl time.Duration, want int, data ...string) eventsStep {
	return eventsStep{op: "append", session: session, stream: stream, data: data, ttl: ttl, index: want}
}

func afterEv(session, stream string, index int, want ...string) eventsStep {
	return eventsStep{op: "after", session: session, stream: stream, index: index, want: want}
}

func droppedEv(session, stream string, index int) eventsStep {
	return eventsStep{op: "after", session: session, stream: stream, index: index, err: sharedsession.ErrEventsDropped}
}

func lastEv(session, stream string, want int) eventsStep {
	return eventsStep{op: "last", session: session, stream: stream, index: want}
}

func deleteEv(session string) eventsStep { return eventsStep{op: "delete", session: session} }

func advance(d time.Duration) eventsStep { return eventsStep{op: "advance", d: d} }

// eventsKept is the events kept per stream in the semantics test.
const eventsKept = 3

// eventsCases are the semantics every [sharedsession.Log] has, as
// [sharedsession.MemoryLog] defines them. Times are minutes apart, so that
// what a real Redis takes to answer cannot move a step across a deadline.
var eventsCases = []struct {
	name  string
	steps []eventsStep
}{
	{
		name: "numbered from 0 per stream, read after a number",
		steps: []eventsStep{
			appendEv("a", "s1", "x", time.Hour, 0),
			appendEv("a", "s1", "y", time.Hour, 1),
			appendEv("a", "", "z", time.Hour, 0),
			lastEv("a", "s1", 1), lastEv("a", "", 0), lastEv("a", "s3", -1),
			afterEv("a", "s1", -1, "x", "y"),
			afterEv("a", "s1", 0, "y"),
			afterEv("a", "s1", 1),
			afterEv("a", "s1", 7),
			afterEv("a", "", -1, "z"),
		},
	},
	{
		name: "several events in one append, numbered in order",
		steps: []eventsStep{
			appendEvs("a", "s", time.Hour, 1, "", "x"),
			appendEv("a", "s", "y", time.Hour, 2),
			lastEv("a", "s", 2),
			afterEv("a", "s", -1, "", "x", "y"),
			afterEv("a", "s", 0, "x", "y"),
			appendEvs("a", "t", time.Hour, 4, "a", "b", "c", "d", "e"), // more than kept
			lastEv("a", "t", 4),
			droppedEv("a", "t", 0),
			afterEv("a", "t", 1, "c", "d", "e"),
		},
	},
	{
		name: "a stream that never was",
		steps: []eventsStep{
			afterEv("a", "s", -1), droppedEv("a", "s", 0), droppedEv("a", "s", 5), lastEv("a", "s", -1),
		},
	},
	{
		name: "trimmed to the newest kept",
		steps: []eventsStep{
			appendEv("a", "s", "a", time.Hour, 0),
			appendEv("a", "s", "b", time.Hour, 1),
			appendEv("a", "s", "c", time.Hour, 2),
			appendEv("a", "s", "d", time.Hour, 3),
			appendEv("a", "s", "e", time.Hour, 4),
			lastEv("a", "s", 4),
			droppedEv("a", "s", -1), droppedEv("a", "s", 0), droppedEv("a", "s", -5),
			afterEv("a", "s", 1, "c", "d", "e"),
			afterEv("a", "s", 3, "e"),
			afterEv("a", "s", 4),
		},
	},
	{
		name: "a stream expires ttl after its last append",
		steps: []eventsStep{
			appendEv("a", "s", "x", 10*time.Minute, 0),
			advance(6 * time.Minute),
			appendEv("a", "s", "y", 10*time.Minute, 1),
			advance(6 * time.Minute),
			lastEv("a", "s", 1), afterEv("a", "s", -1, "x", "y"),
			advance(5 * time.Minute),
			lastEv("a", "s", -1), afterEv("a", "s", -1), droppedEv("a", "s", 0),
			appendEv("a", "s", "z", 10*time.Minute, 0),
			afterEv("a", "s", -1, "z"),
		},
	},
	{
		name: "each stream expires on its own, numbers kept",
		steps: []eventsStep{
			appendEv("a", "long", "a", 30*time.Minute, 0),
			appendEv("a", "long", "b", 30*time.Minute, 1),
			appendEv("a", "long", "c", 30*time.Minute, 2),
			appendEv("a", "long", "d", 30*time.Minute, 3),
			appendEv("a", "short", "x", 10*time.Minute, 0),
			advance(15 * time.Minute),
			lastEv("a", "short", -1),
			lastEv("a", "long", 3),
			droppedEv("a", "long", -1),
			afterEv("a", "long", 1, "c", "d"),
			appendEv("a", "long", "e", 30*time.Minute, 4),
		},
	},
	{
		name: "delete drops every stream of the session and only those",
		steps: []eventsStep{
			appendEv("a", "s1", "x", time.Hour, 0),
			appendEv("a", "", "y", time.Hour, 0),
			appendEv("b", "s1", "z", time.Hour, 0),
			deleteEv("a"),
			lastEv("a", "s1", -1), lastEv("a", "", -1), lastEv("b", "s1", 0),
			droppedEv("a", "s1", 0), afterEv("a", "s1", -1),
			afterEv("b", "s1", -1, "z"),
			appendEv("a", "s1", "w", time.Hour, 0),
			deleteEv("a"), deleteEv("a"),
		},
	},
}

// eventsSubject is a [sharedsession.Log] under test, fresh for each case,
// and how to move its clock.
type eventsSubject struct {
	events  sharedsession.Log
	advance func(t *testing.T, d time.Duration)
}

// TestSessionEventsAgree runs the semantics of [sharedsession.MemoryLog]
// against it and against the Redis log on one server and on a
// three-primary Cluster, so that they provably agree. On Redis time
// passes by shortening every key's TTL, which is all the time the log
// depends on.
func TestSessionEventsAgree(t *testing.T) {
	srv := redistest.Start(t)
	cluster := redistest.StartCluster(t, 3)
	deployments := []struct {
		name string
		new  func(t *testing.T, i int) eventsSubject
	}{
		{name: "memory", new: func(*testing.T, int) eventsSubject {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			return eventsSubject{
				events:  sharedsession.NewMemoryLog(func() time.Time { return now }, eventsKept),
				advance: func(_ *testing.T, d time.Duration) { now = now.Add(d) },
			}
		}},
		{name: "redis", new: func(t *testing.T, i int) eventsSubject {
			return redisSubject(srv.Client(t), fmt.Sprintf("t%d:", i))
		}},
		{name: "cluster", new: func(t *testing.T, i int) eventsSubject {
			return redisSubject(cluster.Client(t, ""), fmt.Sprintf("t%d:", i))
		}},
	}
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			for i, tc := range eventsCases {
				t.Run(tc.name, func(t *testing.T) {
					s := dep.new(t, i)
					for j, st := range tc.steps {
						runEventsStep(t, s, fmt.Sprintf("step %d (%s %s/%q)", j, st.op, st.session, st.stream), st)
					}
				})
			}
		})
	}
}

// redisSubject is the Redis log on rdb under prefix, keeping eventsKept.
func redisSubject(rdb redis.UniversalClient, prefix string) eventsSubject {
	return eventsSubject{
		events:  &Log{rdb: rdb, prefix: prefix, keep: eventsKept},
		advance: func(t *testing.T, d time.Duration) { shortenTTLs(t, rdb, prefix, d) },
	}
}

// shortenTTLs makes d pass for the keys under prefix: a key with less than
// d to live is deleted, the others live d less. A key without a TTL is
// left as it is, as it would be.
func shortenTTLs(t *testing.T, rdb redis.UniversalClient, prefix string, d time.Duration) {
	t.Helper()
	ctx := t.Context()
	for _, k := range redisKeys(t, rdb, prefix) {
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ttl < 0: // no TTL (-1), or gone (-2)
		case ttl <= d:
			err = rdb.Del(ctx, k).Err()
		default:
			err = rdb.PExpire(ctx, k, ttl-d).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// redisKeys returns the keys under prefix, on every primary of a Cluster.
func redisKeys(t *testing.T, rdb redis.UniversalClient, prefix string) []string {
	t.Helper()
	ctx := t.Context()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		keys, err := rdb.Keys(ctx, prefix+"*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return keys
	}
	var mu sync.Mutex
	var keys []string
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		ks, err := c.Keys(ctx, prefix+"*").Result()
		mu.Lock()
		keys = append(keys, ks...)
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// runEventsStep runs st on s and checks what it gives.
func runEventsStep(t *testing.T, s eventsSubject, where string, st eventsStep) {
	t.Helper()
	ctx := t.Context()
	key := sharedsession.Key("session " + st.session)
	switch st.op {
	case "append":
		var data [][]byte
		for _, d := range st.data {
			data = append(data, []byte(d))
		}
		n, err := s.events.Append(ctx, key, st.stream, st.ttl, data...)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if n != st.index {
			t.Fatalf("%s: Append = %d, want %d", where, n, st.index)
		}
	case "after":
		evs, err := s.events.After(ctx, key, st.stream, st.index)
		if !errors.Is(err, st.err) || st.err != nil && evs != nil {
			t.Fatalf("%s: After(%d) = %q, %v; want error %v", where, st.index, evs, err, st.err)
		}
		var got []string
		for _, e := range evs {
			got = append(got, string(e))
		}
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: After(%d) = %q, want %q", where, st.index, got, st.want)
		}
	case "last":
		n, err := s.events.Last(ctx, key, st.stream)
		if err != nil || n != st.index {
			t.Fatalf("%s: Last = %d, %v; want %d", where, n, err, st.index)
		}
	case "delete":
		if err := s.events.Delete(ctx, key); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	case "advance":
		s.advance(t, st.d)
	default:
		t.Fatalf("%s: no such step", where)
	}
}

// TestRedisSessionEventsLayout checks where the log keeps a session's
// events: every key under the prefix and the session's hash tag, so in one
// Cluster slot, and neither a key nor a value holding the raw session id.
func TestRedisSessionEventsLayout(t *testing.T) {
	srv := redistest.Start(t)
	cluster := redistest.StartCluster(t, 3)
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
	}{
		{name: "one server", rdb: srv.Client(t)},
		{name: "cluster", rdb: cluster.Client(t, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			const id = "sEsSiOnIdThAtMuStNoTlEaK"
			key := sharedsession.Key(id)
			e := NewLog(kit(tc.rdb), "test:")
			for _, stream := range []string{"", "", "s1"} {
				if _, err := e.Append(ctx, key, stream, time.Hour, []byte(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`)); err != nil {
					t.Fatal(err)
				}
			}
			base := "test:events:{" + key + "}:"
			keys := redisKeys(t, tc.rdb, "test:")
			var kinds []string
			for _, k := range keys {
				if !strings.HasPrefix(k, base) {
					t.Errorf("key %q is not under %q", k, base)
					continue
				}
				kinds = append(kinds, strings.SplitN(strings.TrimPrefix(k, base), ":", 2)[0])
				if strings.Contains(k, id) {
					t.Errorf("key %q holds the session id", k)
				}
				for _, v := range redisValues(t, tc.rdb, k) {
					if strings.Contains(v, id) {
						t.Errorf("key %q holds the session id: %q", k, v)
					}
				}
				if cc, ok := tc.rdb.(*redis.ClusterClient); ok {
					slot, err := cc.ClusterKeySlot(ctx, k).Result()
					if err != nil {
						t.Fatal(err)
					}
					if want := cc.ClusterKeySlot(ctx, base+"streams").Val(); slot != want {
						t.Errorf("key %q in slot %d, the session's in %d", k, slot, want)
					}
				}
				if ttl := tc.rdb.PTTL(ctx, k).Val(); ttl <= 0 {
					t.Errorf("key %q has TTL %v, want one", k, ttl)
				}
			}
			slices.Sort(kinds)
			if want := []string{"s", "s", "streams"}; !slices.Equal(kinds, want) {
				t.Errorf("keys %q: kinds %q, want %q", keys, kinds, want)
			}
			if err := e.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if keys := redisKeys(t, tc.rdb, "test:"); len(keys) != 0 {
				t.Errorf("keys after Delete %q, want none", keys)
			}
		})
	}
}

// redisValues returns what key holds, whatever its type.
func redisValues(t *testing.T, rdb redis.UniversalClient, key string) []string {
	t.Helper()
	ctx := t.Context()
	switch typ := rdb.Type(ctx, key).Val(); typ {
	case "string":
		return []string{rdb.Get(ctx, key).Val()}
	case "list":
		return rdb.LRange(ctx, key, 0, -1).Val()
	case "hash":
		var out []string
		for f, v := range rdb.HGetAll(ctx, key).Val() {
			out = append(out, f, v)
		}
		return out
	default:
		t.Fatalf("key %q is a %s", key, typ)
		return nil
	}
}

// TestRedisSessionEventsRetriedAppend: an Append that Redis ran but whose
// reply was lost, tried again with its token (as go-redis does), adds
// nothing and answers the same number; another Append in between makes
// the retry a new event, which is the price of remembering one token.
func TestRedisSessionEventsRetriedAppend(t *testing.T) {
	ctx := t.Context()
	e := NewLog(kit(redistest.Start(t).Client(t)), "test:")
	key := sharedsession.Key("s")
	for i, want := range []int{0, 0, 1, 1} {
		token := fmt.Sprintf("%016x", i/2+1)
		n, err := e.append(ctx, key, "", time.Hour, token, [][]byte{[]byte("x")})
		if err != nil || n != want {
			t.Fatalf("append %d with token %s = %d, %v; want %d", i, token, n, err, want)
		}
	}
	if evs, err := e.After(ctx, key, "", -1); err != nil || len(evs) != 2 {
		t.Fatalf("After = %q, %v; want two events", evs, err)
	}
}

// TestRedisSessionEventsForgetsExpiredStreams: the session's hash of
// streams drops a stream's field once its list has expired, when another
// stream begins, so that a long session does not grow it with every
// request it made.
func TestRedisSessionEventsForgetsExpiredStreams(t *testing.T) {
	ctx := t.Context()
	rdb := redistest.Start(t).Client(t)
	s := redisSubject(rdb, "test:")
	key := sharedsession.Key("s")
	hash := "test:events:{" + key + "}:streams"
	if _, err := s.events.Append(ctx, key, "", time.Hour, []byte("x")); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := s.events.Append(ctx, key, fmt.Sprint("req", i), time.Minute, []byte("x")); err != nil {
			t.Fatal(err)
		}
		if n := rdb.HLen(ctx, hash).Val(); n != 2 {
			t.Fatalf("after stream %d began: %d streams in the hash, want 2 (the standalone one and it)", i, n)
		}
		s.advance(t, 2*time.Minute)
	}
}

// TestRedisSessionEventsBus publishes from two replicas, each on its own
// client, and checks that every listener gets every message in order, on
// one server, Sentinel and Cluster; and that a listener whose subscription
// is closed stops listening.
func TestRedisSessionEventsBus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		clients func(t *testing.T) (a, b redis.UniversalClient)
	}{
		{name: "one server", clients: func(t *testing.T) (redis.UniversalClient, redis.UniversalClient) {
			srv := redistest.Start(t)
			return srv.Client(t), srv.Client(t)
		}},
		{name: "sentinel", clients: func(t *testing.T) (redis.UniversalClient, redis.UniversalClient) {
			d := redistest.StartSentinel(t)
			return d.Client(t, ""), d.Client(t, "")
		}},
		{name: "cluster", clients: func(t *testing.T) (redis.UniversalClient, redis.UniversalClient) {
			c := redistest.StartCluster(t, 3)
			return c.Client(t, ""), c.Client(t, "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, cb := tc.clients(t)
			a, b := NewBus(kit(ca), "test:"), NewBus(kit(cb), "test:")
			gotA, gotB := listenFor(t, a), listenFor(t, b)
			if n := subscribers(t, ca, a.channel); n != 2 {
				t.Fatalf("%d subscribers once both listen, want 2", n)
			}
			for _, p := range []struct {
				from *Bus
				msg  string
			}{{a, "1"}, {a, "2"}, {b, "3"}, {a, "4"}} {
				if err := p.from.Publish(t.Context(), []byte(p.msg)); err != nil {
					t.Fatal(err)
				}
			}
			want := []string{"1", "2", "3", "4"}
			gotA.wait(t, "a", want)
			gotB.wait(t, "b", want)

			if err := gotB.sub.Close(); err != nil {
				t.Fatal(err)
			}
			if err := a.Publish(t.Context(), []byte("5")); err != nil {
				t.Fatal(err)
			}
			gotA.wait(t, "a", append(want, "5"))
			if got := gotB.list(); len(got) != len(want) {
				t.Errorf("b got %q after its subscription was closed, want %q", got, want)
			}
			waitFor(t, "b's subscription to end", func() bool { return subscribers(t, ca, a.channel) == 1 })
		})
	}
}

// TestRedisSessionEventsListenOutlivesRedis checks that a listener gets
// what is published after its Redis restarted (one server) or failed over
// (Sentinel): go-redis subscribes again by itself, and the listener is
// told that it may have lost messages.
func TestRedisSessionEventsListenOutlivesRedis(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) (rdb redis.UniversalClient, fail func())
	}{
		{name: "one server restarted", start: func(t *testing.T) (redis.UniversalClient, func()) {
			srv := redistest.Start(t)
			return srv.Client(t), srv.Restart
		}},
		{name: "sentinel failover", start: func(t *testing.T) (redis.UniversalClient, func()) {
			d := redistest.StartSentinel(t)
			return d.Client(t, ""), func() { d.KillPrimary() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, fail := tc.start(t)
			e := NewBus(kit(rdb), "test:")
			got := listenFor(t, e)
			if err := e.Publish(t.Context(), []byte("before")); err != nil {
				t.Fatal(err)
			}
			got.wait(t, "the listener", []string{"before"})
			if n := got.lost(); n != 0 {
				t.Fatalf("told of %d gaps before any failure, want none", n)
			}
			fail()
			// Published while the listener has not subscribed again, a
			// message is lost: publish until one arrives.
			waitFor(t, "a message after the failure", func() bool {
				_ = e.Publish(t.Context(), []byte("after"))
				return slices.Contains(got.list(), "after")
			})
			if got.lost() == 0 {
				t.Error("the listener was not told that it may have lost messages")
			}
		})
	}
}

// received collects what a listener delivers.
type received struct {
	sub  sharedsession.Subscription
	mu   sync.Mutex
	msgs []string
	gaps int           // how many times it was told it lost messages
	more chan struct{} // signalled on each message
}

func (r *received) lost() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gaps
}

func (r *received) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// wait waits until r holds at least len(want) messages, and checks that
// they are want.
func (r *received) wait(t *testing.T, who string, want []string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got := r.list()
		if len(got) >= len(want) {
			if !slices.Equal(got, want) {
				t.Fatalf("%s got %q, want %q", who, got, want)
			}
			return
		}
		select {
		case <-r.more:
		case <-deadline:
			t.Fatalf("%s got %q within 10s, want %q", who, got, want)
		}
	}
}

// listenFor subscribes to e until the test ends, collecting what arrives.
func listenFor(t *testing.T, e *Bus) *received {
	t.Helper()
	r := &received{more: make(chan struct{}, 1)}
	sub, err := e.Subscribe(t.Context(), func(msg []byte) {
		r.mu.Lock()
		r.msgs = append(r.msgs, string(msg))
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
	}, func() {
		r.mu.Lock()
		r.gaps++
		r.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	r.sub = sub
	t.Cleanup(func() { sub.Close() })
	return r
}

// subscribers returns how many connections subscribe to channel, on every
// primary of a Cluster (each counts its own).
func subscribers(t *testing.T, rdb redis.UniversalClient, channel string) int64 {
	t.Helper()
	ctx := t.Context()
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel]
	}
	var mu sync.Mutex
	var n int64
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		m, err := c.PubSubNumSub(ctx, channel).Result()
		mu.Lock()
		n += m[channel]
		mu.Unlock()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond, a state of real processes, for up to 30 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30s", what)
		}
		time.Sleep(100 * time.Millisecond) // polling real processes
	}
}
