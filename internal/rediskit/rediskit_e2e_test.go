//go:build e2e

package rediskit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// replicaUp is the wait timeout of writes a replica that is up must
// acknowledge: long enough for a machine that other work keeps busy.
const replicaUp = 10 * time.Second

// testValues runs what every Values must do on kit, whose writes reach
// the replicas they wait for.
func testValues(t *testing.T, kit *rediskit.Client) {
	ctx := context.Background()
	v := kit.Values(fmt.Sprintf("test%d:", time.Now().UnixNano()))
	rdb := kit.Redis()

	if _, ok, err := v.Get(ctx, "absent"); ok || err != nil {
		t.Fatalf("Get of an absent value = %v, %v; want not found", ok, err)
	}
	if err := v.Set(ctx, "a", []byte("1"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := v.Get(ctx, "a"); !ok || err != nil || string(b) != "1" {
		t.Fatalf("Get = %q, %v, %v; want 1", b, ok, err)
	}
	if ttl := rdb.PTTL(ctx, v.Key("a")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the value's time to live is %v, want at most a minute", ttl)
	}
	if b, ok, err := v.GetEx(ctx, "a", time.Hour); !ok || err != nil || string(b) != "1" {
		t.Fatalf("GetEx = %q, %v, %v; want 1", b, ok, err)
	}
	if ttl := rdb.PTTL(ctx, v.Key("a")).Val(); ttl <= 59*time.Minute {
		t.Fatalf("after GetEx for an hour the time to live is %v", ttl)
	}

	// SetNX: one winner.
	if ok, err := v.SetNX(ctx, "claim", []byte("mine"), time.Minute); !ok || err != nil {
		t.Fatalf("SetNX of an absent value = %v, %v", ok, err)
	}
	for _, value := range []string{"mine", "theirs"} {
		if ok, err := v.SetNX(ctx, "claim", []byte(value), time.Minute); ok || err != nil {
			t.Fatalf("SetNX of a held value = %v, %v; want lost", ok, err)
		}
	}
	if ttl := rdb.PTTL(ctx, v.Key("claim")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("the claim's time to live is %v, want at most a minute", ttl)
	}

	// CompareAndSwap: from the value held only; a retry succeeds.
	if ok, err := v.CompareAndSwap(ctx, "claim", []byte("theirs"), []byte("x"), time.Minute); ok || err != nil {
		t.Fatalf("CompareAndSwap from a value not held = %v, %v; want refused", ok, err)
	}
	for i := range 2 {
		if ok, err := v.CompareAndSwap(ctx, "claim", []byte("mine"), []byte("next"), time.Hour); !ok || err != nil {
			t.Fatalf("CompareAndSwap %d = %v, %v; want swapped", i+1, ok, err)
		}
	}
	if b, _, _ := v.Get(ctx, "claim"); string(b) != "next" {
		t.Fatalf("after the swap the value is %q", b)
	}
	if ttl := rdb.PTTL(ctx, v.Key("claim")).Val(); ttl <= 59*time.Minute {
		t.Fatalf("after a swap for an hour the time to live is %v", ttl)
	}
	if ok, err := v.CompareAndDelete(ctx, "claim", []byte("mine")); ok || err != nil {
		t.Fatalf("CompareAndDelete of a value not held = %v, %v", ok, err)
	}
	if ok, err := v.CompareAndDelete(ctx, "claim", []byte("next")); !ok || err != nil {
		t.Fatalf("CompareAndDelete = %v, %v", ok, err)
	}

	// GetDel: taken once.
	if err := v.Set(ctx, "once", []byte("code"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if b, ok, err := v.GetDel(ctx, "once"); !ok || err != nil || string(b) != "code" {
		t.Fatalf("GetDel = %q, %v, %v", b, ok, err)
	}
	if _, ok, err := v.GetDel(ctx, "once"); ok || err != nil {
		t.Fatalf("GetDel again = %v, %v; want not found", ok, err)
	}

	// Del: several at once, absent ones no error. Names spread over
	// slots on Cluster.
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("del%d", i))
		if err := v.Set(ctx, names[i], []byte("x"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Del(ctx, append(names, "never-set")...); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, ok, err := v.Get(ctx, n); ok || err != nil {
			t.Fatalf("%s after Del: %v, %v", n, ok, err)
		}
	}
}

func TestValues(t *testing.T) {
	srv := redistest.Start(t)
	testValues(t, rediskit.New(srv.Client(t), rediskit.Durability{}))
}

func TestValuesCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	testValues(t, rediskit.New(c.Client(t, ""), rediskit.Durability{}))
}

// TestValuesWaitForTheReplica: with a replica to wait for, each write is
// on the replica when it returns; with the replica gone, each write
// fails within the timeout as ErrNotReplicated, and the conditional ones
// are taken back on the primary, so that a retry meets what the replica
// held.
func TestValuesWaitForTheReplica(t *testing.T) {
	primary, replica := redistest.StartWithReplica(t)
	// While the replica is up, a write waits until it has the write, for as
	// long as a busy machine makes that take (WAIT answers as soon as it
	// does); once it is down, for the short timeout whose end fails it.
	kit := rediskit.New(primary.Client(t), rediskit.Durability{Replicas: 1, Timeout: replicaUp})
	testValues(t, kit)

	ctx := context.Background()
	v := kit.Values("wait:")
	rc := replica.Client(t)
	for i := range 20 {
		name := fmt.Sprint("k", i)
		if err := v.Set(ctx, name, []byte(name), time.Minute); err != nil {
			t.Fatal(err)
		}
		// Read at once from the replica itself: the write returned only
		// once the replica had it.
		if got := rc.Get(ctx, v.Key(name)).Val(); got != name {
			t.Fatalf("the replica holds %q under %s right after the write, want %q", got, name, name)
		}
	}
	if err := v.Set(ctx, "taken", []byte("code"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := v.Set(ctx, "current", []byte("old"), time.Minute); err != nil {
		t.Fatal(err)
	}

	replica.Stop()
	const timeout = 200 * time.Millisecond
	v = rediskit.New(primary.Client(t), rediskit.Durability{Replicas: 1, Timeout: timeout}).Values("wait:")
	pc := primary.Client(t)
	for _, tt := range []struct {
		name  string
		write func() error
		check func() string // what is wrong on the primary afterwards
	}{
		{name: "Set", write: func() error { return v.Set(ctx, "new", []byte("1"), time.Minute) }},
		{name: "SetNX is taken back", write: func() error { _, err := v.SetNX(ctx, "claim", []byte("n1"), time.Minute); return err },
			check: func() string {
				if n := pc.Exists(ctx, v.Key("claim")).Val(); n != 0 {
					return "the claim is still held"
				}
				return ""
			}},
		{name: "CompareAndSwap is swapped back", write: func() error {
			_, err := v.CompareAndSwap(ctx, "current", []byte("old"), []byte("new"), time.Minute)
			return err
		}, check: func() string {
			if got := pc.Get(ctx, v.Key("current")).Val(); got != "old" {
				return fmt.Sprintf("the value is %q, want old", got)
			}
			return ""
		}},
		{name: "GetDel is undone", write: func() error { _, _, err := v.GetDel(ctx, "taken"); return err },
			check: func() string {
				if got := pc.Get(ctx, v.Key("taken")).Val(); got != "code" {
					return fmt.Sprintf("the value is %q, want code", got)
				}
				if ttl := pc.PTTL(ctx, v.Key("taken")).Val(); ttl <= 0 || ttl > time.Minute {
					return fmt.Sprintf("it was put back with a time to live of %v", ttl)
				}
				return ""
			}},
		{name: "Del", write: func() error { return v.Del(ctx, "k1") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := tt.write()
			if took := time.Since(start); took > timeout+time.Second {
				t.Errorf("the write took %v with a timeout of %v", took, timeout)
			}
			if !errors.Is(err, rediskit.ErrNotReplicated) || !errors.Is(err, rediskit.ErrUnavailable) {
				t.Fatalf("a write with no replica = %v, want ErrNotReplicated", err)
			}
			if tt.check != nil {
				if problem := tt.check(); problem != "" {
					t.Fatal(problem)
				}
			}
		})
	}
}

// TestValuesThroughSentinelFailovers: writes under load through a
// graceful SENTINEL FAILOVER and then a SIGKILL of the primary: every
// write a writer was told of is on both data servers afterwards.
// (Without the wait for the replica, the old primary of the graceful
// failover takes writes for a while after the replica is promoted, and
// they are lost when it becomes a replica.)
func TestValuesThroughSentinelFailovers(t *testing.T) {
	d := redistest.StartSentinel(t)
	kit := rediskit.New(d.Client(t, ""), rediskit.Durability{Replicas: 1, Timeout: 250 * time.Millisecond})
	v := kit.Values("ha:")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu             sync.Mutex
		acked          []string
		written, fails atomic.Int64
		wg             sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				name := fmt.Sprintf("w%d-%d", w, i)
				err := v.Set(ctx, name, []byte(name), time.Hour)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					if !errors.Is(err, rediskit.ErrUnavailable) {
						t.Errorf("a write failed with %v, want an ErrUnavailable", err)
					}
					fails.Add(1)
					time.Sleep(10 * time.Millisecond) // pacing the load while Redis switches
					continue
				}
				written.Add(1)
				mu.Lock()
				acked = append(acked, name)
				mu.Unlock()
			}
		})
	}
	awaitWrites := func(n int64) {
		t.Helper()
		target := written.Load() + n
		deadline := time.Now().Add(30 * time.Second)
		for written.Load() < target {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d writes within 30s (%d failed)", n, fails.Load())
			}
			time.Sleep(10 * time.Millisecond) // polling the load
		}
	}
	awaitWrites(200)
	t.Logf("graceful failover: promoted after %v", d.Failover().Round(time.Millisecond))
	awaitWrites(200)
	t.Logf("SIGKILL of the primary: promoted after %v", d.KillPrimary().Round(time.Millisecond))
	awaitWrites(200)
	cancel()
	wg.Wait()

	primary, replica := d.Roles()
	if a, err := d.PrimaryAddr(context.Background()); err != nil || a != primary.Addr {
		t.Fatalf("the sentinels name %s (%v), want %s", a, err, primary.Addr)
	}
	d.WaitReplicated(context.Background(), "")
	t.Logf("%d writes acknowledged, %d failed (try again)", len(acked), fails.Load())
	for _, s := range []*redistest.Server{primary, replica} {
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr, DisableIdentity: true})
		var lost []string
		for _, name := range acked {
			if got := rdb.Get(context.Background(), v.Key(name)).Val(); got != name {
				lost = append(lost, name)
			}
		}
		rdb.Close()
		if len(lost) > 0 {
			t.Errorf("%s: %d of %d acknowledged writes lost, such as %q", s.Addr, len(lost), len(acked), lost[:min(5, len(lost))])
		}
	}
}

// TestValuesClusterWaitOnTheKeysPrimary: on Cluster a write waits on the
// primary of its key's slot: a key of the primary with a replica is
// kept, one of a primary without is not.
func TestValuesClusterWaitOnTheKeysPrimary(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	c.AddReplica(t, 0)
	cc := c.Client(t, "")
	// A write the replica acknowledges returns when it does; one no
	// replica can acknowledge fails at the end of the short timeout.
	v := rediskit.New(cc, rediskit.Durability{Replicas: 1, Timeout: replicaUp}).Values("cl:")
	short := rediskit.New(cc, rediskit.Durability{Replicas: 1, Timeout: 200 * time.Millisecond}).Values("cl:")
	ctx := context.Background()
	// Names whose keys are on the first primary, and on another.
	var withReplica, without string
	for i := 0; withReplica == "" || without == ""; i++ {
		name := fmt.Sprint("n", i)
		node, err := cc.MasterForKey(ctx, v.Key(name))
		if err != nil {
			t.Fatal(err)
		}
		if node.Options().Addr == c.Nodes[0].Addr {
			withReplica = name
		} else {
			without = name
		}
	}
	if err := v.Set(ctx, withReplica, []byte("1"), time.Minute); err != nil {
		t.Fatalf("a write on the primary with a replica: %v", err)
	}
	if err := short.Set(ctx, without, []byte("1"), time.Minute); !errors.Is(err, rediskit.ErrNotReplicated) {
		t.Fatalf("a write on a primary without a replica = %v, want ErrNotReplicated", err)
	}
	if err := short.Del(ctx, withReplica, without); !errors.Is(err, rediskit.ErrNotReplicated) {
		t.Fatalf("Del of keys of both primaries = %v, want ErrNotReplicated", err)
	}
}

// TestRunScript: a script's reply, also when Redis has forgotten it
// (EVAL after NOSCRIPT) and with a nil reply, waited for.
func TestRunScript(t *testing.T) {
	primary, _ := redistest.StartWithReplica(t)
	kit := rediskit.New(primary.Client(t), rediskit.Durability{Replicas: 1, Timeout: replicaUp})
	ctx := context.Background()
	incr := redis.NewScript(`return redis.call('INCR', KEYS[1])`)
	none := redis.NewScript(`redis.call('SET', KEYS[1], 'x'); return false`)
	for i := range 3 {
		if i == 2 {
			kit.Redis().ScriptFlush(ctx)
		}
		cmd, err := kit.RunScript(ctx, "count", incr, []string{"script:n"})
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := cmd.Int(); n != i+1 {
			t.Fatalf("the script's reply %d = %d", i+1, n)
		}
	}
	cmd, err := kit.RunScript(ctx, "none", none, []string{"script:x"})
	if err != nil || !errors.Is(cmd.Err(), redis.Nil) {
		t.Fatalf("a script answering nil: %v, %v", cmd.Err(), err)
	}
	bad := redis.NewScript(`return redis.call('NOSUCHCOMMAND')`)
	if _, err := kit.RunScript(ctx, "bad", bad, []string{"script:y"}); !errors.Is(err, rediskit.ErrUnavailable) || !strings.Contains(err.Error(), "bad: ") {
		t.Fatalf("a failing script = %v, want an ErrUnavailable naming it", err)
	}
}

// TestSubscribe: once Subscribe returns, what is published reaches the
// subscription; a Redis that does not answer fails it within the
// client's dial and read timeouts.
func TestSubscribe(t *testing.T) {
	srv := redistest.Start(t)
	kit := rediskit.New(srv.Client(t), rediskit.Durability{})
	ctx := context.Background()
	ps, err := kit.Subscribe(ctx, "ch1", "ch2")
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	for _, ch := range []string{"ch1", "ch2"} {
		if n := srv.Client(t).Publish(ctx, ch, "hello "+ch).Val(); n != 1 {
			t.Fatalf("PUBLISH %s reached %d subscribers, want 1", ch, n)
		}
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil || msg.Channel != ch || msg.Payload != "hello "+ch {
			t.Fatalf("received %+v, %v", msg, err)
		}
	}

	srv.Pause()
	defer srv.Resume()
	start := time.Now()
	_, err = kit.Subscribe(ctx, "ch3")
	took := time.Since(start)
	if !errors.Is(err, rediskit.ErrUnavailable) {
		t.Fatalf("Subscribe to a Redis that does not answer = %v, want ErrUnavailable", err)
	}
	if limit := rediskit.SubscribeTimeout(kit.Redis()) + 500*time.Millisecond; took > limit {
		t.Fatalf("Subscribe took %v to fail, want at most %v", took, limit)
	}
}
