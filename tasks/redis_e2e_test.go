//go:build e2e

package tasks_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/redistest"
	"github.com/portcullis-mcp/portcullis/tasks"
	"github.com/portcullis-mcp/portcullis/tasks/storetest"
)

var prefixes atomic.Int64

// newPrefix returns a key prefix no other store of the test run uses, so
// that stores on one server start empty.
func newPrefix() string { return fmt.Sprintf("test%d:", prefixes.Add(1)) }

func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t)
	client := srv.Client(t)
	storetest.Run(t, func(t *testing.T) tasks.Store {
		s := tasks.NewRedisStore(client, newPrefix(), nil)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

func liveTask(id, owner string, now time.Time) *tasks.Task {
	return &tasks.Task{
		ID: id, Owner: owner, Tool: "slow", Status: tasks.StatusWorking,
		Created: now, Updated: now, Expires: now.Add(time.Hour),
		PollInterval: time.Second, Worker: "w1", Lease: now.Add(time.Minute),
	}
}

// Two replicas, each with its own client, share tasks through one Redis.
func TestRedisStoreTwoReplicas(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	prefix := newPrefix()
	a := tasks.NewRedisStore(srv.Client(t), prefix, nil)
	b := tasks.NewRedisStore(srv.Client(t), prefix, nil)
	defer a.Close()
	defer b.Close()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	heard, err := b.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	caps := tasks.Caps{PerOwner: 1}
	if err := a.Create(ctx, liveTask("t1", "alice", now), caps); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "t1"); err != nil || got.Owner != "alice" {
		t.Fatalf("Get on the other replica = %+v, %v", got, err)
	}
	if err := b.Create(ctx, liveTask("t2", "alice", now), caps); !errors.Is(err, tasks.ErrOwnerCap) {
		t.Fatalf("the cap is not shared: Create on the other replica = %v, want ErrOwnerCap", err)
	}
	if _, err := a.Update(ctx, "t1", func(t *tasks.Task) error { t.StatusMessage = "halfway"; return nil }); err != nil {
		t.Fatal(err)
	}
	// Subscribe returned once Redis confirmed it: the change is heard.
	select {
	case id := <-heard:
		if id != "t1" {
			t.Fatalf("heard %q, want t1", id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the other replica heard of no change in 5s")
	}
	if got, _ := b.Get(ctx, "t1"); got.StatusMessage != "halfway" {
		t.Fatalf("the other replica reads %q", got.StatusMessage)
	}
}

// What the store leaves in Redis: the task with its expiry, the live sets
// with hashed owners, and nothing once a task ends but the task itself.
func TestRedisStoreKeys(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client := srv.Client(t)
	prefix := newPrefix()
	s := tasks.NewRedisStore(client, prefix, nil)
	defer s.Close()

	const owner = "https://issuer.example|alice@example.com"
	now := time.Now().Truncate(time.Millisecond)
	tk := liveTask("t1", owner, now)
	if err := s.Create(ctx, tk, tasks.Caps{}); err != nil {
		t.Fatal(err)
	}
	keys, err := client.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 3 {
		t.Fatalf("keys = %q, want the task, the live set and the owner's set", keys)
	}
	var ownerKey string
	for _, k := range keys {
		if strings.Contains(k, "alice") || strings.Contains(k, "issuer") {
			t.Errorf("key %q carries the owner", k)
		}
		if strings.HasPrefix(k, prefix+"owner:") {
			ownerKey = k
		}
	}
	if len(ownerKey) != len(prefix+"owner:")+32 {
		t.Fatalf("owner key %q, want %sowner: and 32 hex digits", ownerKey, prefix)
	}
	if at, err := client.PExpireTime(ctx, prefix+"task:t1").Result(); err != nil || at != time.Duration(tk.Expires.UnixMilli())*time.Millisecond {
		t.Fatalf("task key expires at %v (%v), want %v", at, err, tk.Expires.UnixMilli())
	}
	for _, k := range []string{prefix + "live", ownerKey} {
		if ttl, err := client.PTTL(ctx, k).Result(); err != nil || ttl <= 0 {
			t.Errorf("%s has TTL %v (%v), want one: the sets must go away with their tasks", k, ttl, err)
		}
	}
	if score, err := client.ZScore(ctx, prefix+"live", "t1").Result(); err != nil || int64(score) != tk.Lease.UnixMilli() {
		t.Fatalf("live score %v (%v), want the lease %d", score, err, tk.Lease.UnixMilli())
	}

	// A renewed lease moves the score; a later Expires moves the key's expiry.
	lease, expires := now.Add(2*time.Minute), now.Add(2*time.Hour)
	if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.Lease, t.Expires = lease, expires; return nil }); err != nil {
		t.Fatal(err)
	}
	if score, _ := client.ZScore(ctx, prefix+"live", "t1").Result(); int64(score) != lease.UnixMilli() {
		t.Fatalf("live score after renewal %v, want %d", score, lease.UnixMilli())
	}
	if at, _ := client.PExpireTime(ctx, prefix+"task:t1").Result(); at != time.Duration(expires.UnixMilli())*time.Millisecond {
		t.Fatalf("task key expires at %v after the update, want %v", at, expires.UnixMilli())
	}
	// An update that leaves Expires keeps the key's expiry.
	if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.StatusMessage = "x"; return nil }); err != nil {
		t.Fatal(err)
	}
	if at, _ := client.PExpireTime(ctx, prefix+"task:t1").Result(); at != time.Duration(expires.UnixMilli())*time.Millisecond {
		t.Fatalf("task key expires at %v after an update of the message, want %v", at, expires.UnixMilli())
	}

	// Ending the task takes it out of both sets (which then disappear).
	if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.Status = tasks.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	keys, _ = client.Keys(ctx, prefix+"*").Result()
	if len(keys) != 1 || keys[0] != prefix+"task:t1" {
		t.Fatalf("keys after the task ended = %q, want only the task", keys)
	}
	// A later write of the ended task does not bring it back to life.
	if _, err := s.Update(ctx, "t1", func(t *tasks.Task) error { t.Lease = now.Add(time.Hour); return nil }); err != nil {
		t.Fatal(err)
	}
	if n, _ := client.Exists(ctx, prefix+"live").Result(); n != 0 {
		t.Fatal("an update of an ended task put it back in the live set")
	}
}

// A live task that Redis expired (its replica died and nobody marked it
// failed before its Expires) does not count against the caps, and Stale
// drops it.
func TestRedisStoreExpiredLiveTasksStopCounting(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client := srv.Client(t)
	prefix := newPrefix()
	s := tasks.NewRedisStore(client, prefix, nil)
	defer s.Close()

	now := time.Now()
	short := liveTask("short", "alice", now)
	short.Expires = now.Add(200 * time.Millisecond)
	short.Lease = now.Add(-time.Second) // stale as well
	caps := tasks.Caps{PerOwner: 1, Total: 1}
	if err := s.Create(ctx, short, caps); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, liveTask("other", "bob", now), caps); !errors.Is(err, tasks.ErrTotalCap) {
		t.Fatalf("while short lives: %v, want ErrTotalCap", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for client.Exists(ctx, prefix+"task:short").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatal("Redis did not expire the task within 5s")
		}
		time.Sleep(20 * time.Millisecond) // waiting on Redis's clock
	}
	// Its ID is still in the sets; the caps must see through it.
	if err := s.Create(ctx, liveTask("a2", "alice", time.Now()), caps); err != nil {
		t.Fatalf("after the only live task expired: %v", err)
	}
	ids, err := s.Stale(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != "a2" {
		t.Fatalf("Stale = %q, want [a2] (not the expired task)", ids)
	}
	if members := client.ZRange(ctx, prefix+"live", 0, -1).Val(); len(members) != 1 || members[0] != "a2" {
		t.Fatalf("live set = %q, want [a2]", members)
	}
}

// Update retries when another writer gets in between, but not forever.
func TestRedisStoreUpdateGivesUpUnderConstantConflict(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client := srv.Client(t)
	other := srv.Client(t)
	prefix := newPrefix()
	s := tasks.NewRedisStore(client, prefix, nil)
	defer s.Close()
	if err := s.Create(ctx, liveTask("t1", "alice", time.Now()), tasks.Caps{}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	_, err := s.Update(ctx, "t1", func(t *tasks.Task) error {
		calls++
		// Another writer touches the task every time.
		return other.Do(ctx, "APPEND", prefix+"task:t1", " ").Err()
	})
	if err == nil || errors.Is(err, tasks.ErrNotFound) || errors.Is(err, tasks.ErrUnavailable) {
		t.Fatalf("Update under constant conflict = %v, want a conflict error", err)
	}
	if calls < 2 || calls > 100 {
		t.Fatalf("fn called %d times, want a bounded number of retries", calls)
	}
	t.Logf("gave up after %d attempts: %v", calls, err)
}

// Redis going away makes every method fail fast with ErrUnavailable,
// never ErrNotFound; Redis coming back (empty: persistence is off) makes
// the same store work again, its subscriptions included.
func TestRedisStoreOutage(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	client := srv.Client(t)
	s := tasks.NewRedisStore(client, newPrefix(), nil)
	defer s.Close()

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	heard, err := s.Subscribe(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, liveTask("before", "alice", time.Now()), tasks.Caps{}); err != nil {
		t.Fatal(err)
	}

	srv.Stop()

	ops := []struct {
		name string
		call func(context.Context) error
	}{
		{"Create", func(ctx context.Context) error {
			return s.Create(ctx, liveTask("during", "alice", time.Now()), tasks.Caps{PerOwner: 5, Total: 5})
		}},
		{"Get", func(ctx context.Context) error { _, err := s.Get(ctx, "before"); return err }},
		{"Update", func(ctx context.Context) error {
			_, err := s.Update(ctx, "before", func(t *tasks.Task) error { t.StatusMessage = "x"; return nil })
			return err
		}},
		{"Stale", func(ctx context.Context) error { _, err := s.Stale(ctx, time.Now()); return err }},
		{"Subscribe", func(ctx context.Context) error {
			sub, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := s.Subscribe(sub)
			return err
		}},
		{"Ping", s.Ping},
	}
	for _, op := range ops {
		start := time.Now()
		err := op.call(ctx)
		took := time.Since(start)
		switch {
		case err == nil:
			t.Errorf("%s with Redis stopped succeeded", op.name)
		case errors.Is(err, tasks.ErrNotFound):
			t.Errorf("%s with Redis stopped = %v: ErrNotFound for an outage", op.name, err)
		case !errors.Is(err, tasks.ErrUnavailable):
			t.Errorf("%s with Redis stopped = %v, want ErrUnavailable", op.name, err)
		}
		if took > 3*time.Second {
			t.Errorf("%s with Redis stopped took %v", op.name, took)
		}
	}

	srv.Restart()

	// The pool drops its dead connections as it meets them: poll Ping.
	deadline := time.Now().Add(10 * time.Second)
	for s.Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the store cannot reach the restarted Redis: %v", s.Ping(ctx))
		}
		time.Sleep(50 * time.Millisecond) // waiting on a real process
	}
	if _, err := s.Get(ctx, "before"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("Get of a task the restart lost = %v, want ErrNotFound", err)
	}
	if err := s.Create(ctx, liveTask("after", "alice", time.Now()), tasks.Caps{PerOwner: 1}); err != nil {
		t.Fatalf("Create after the restart: %v", err)
	}
	// The subscription made before the outage resubscribes by itself.
	deadline = time.Now().Add(20 * time.Second)
	for {
		if _, err := s.Update(ctx, "after", func(t *tasks.Task) error { t.StatusMessage = "again"; return nil }); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-heard:
			if id != "after" {
				t.Fatalf("heard %q, want after", id)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the subscription made before the outage heard nothing within 20s of the restart")
		}
	}
}

// A Redis that hangs (accepts connections, answers nothing) makes every
// method fail within the client's timeouts with ErrUnavailable; once it
// answers again, so does the store.
func TestRedisStoreHungServer(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := tasks.NewRedisStore(srv.Client(t), newPrefix(), nil)
	defer s.Close()
	if err := s.Create(ctx, liveTask("t1", "alice", time.Now()), tasks.Caps{}); err != nil {
		t.Fatal(err)
	}

	srv.Pause()
	for name, call := range map[string]func() error{
		"Get":    func() error { _, err := s.Get(ctx, "t1"); return err },
		"Update": func() error { _, err := s.Update(ctx, "t1", func(*tasks.Task) error { return nil }); return err },
		"Create": func() error { return s.Create(ctx, liveTask("t2", "alice", time.Now()), tasks.Caps{PerOwner: 3}) },
		"Stale":  func() error { _, err := s.Stale(ctx, time.Now()); return err },
		"Subscribe": func() error {
			sub, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := s.Subscribe(sub)
			return err
		},
		"Ping": func() error { return s.Ping(ctx) },
	} {
		start := time.Now()
		err := call()
		// 500ms timeouts, two attempts: about 1–2s.
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("%s against a hung Redis took %v", name, took)
		}
		if !errors.Is(err, tasks.ErrUnavailable) || errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("%s against a hung Redis = %v, want ErrUnavailable", name, err)
		}
	}
	srv.Resume()

	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := s.Get(ctx, "t1")
		if err == nil && got.ID == "t1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get after Redis answered again: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // waiting on a real process
	}
}

// A create whose reply was lost is retried by go-redis: the same task
// again succeeds, another task under the same ID does not.
func TestRedisStoreCreateRetryIsIdempotent(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s := tasks.NewRedisStore(srv.Client(t), newPrefix(), nil)
	defer s.Close()
	tk := liveTask("t1", "alice", time.Now())
	caps := tasks.Caps{PerOwner: 1}
	for i := range 2 {
		if err := s.Create(ctx, tk, caps); err != nil {
			t.Fatalf("create %d of the same task: %v", i+1, err)
		}
	}
	other := tk.Clone()
	other.Owner = "mallory"
	if err := s.Create(ctx, other, tasks.Caps{}); err == nil || errors.Is(err, tasks.ErrUnavailable) {
		t.Fatalf("another task under a taken ID: %v, want refused", err)
	}
	if ids, _ := s.Stale(ctx, time.Now().Add(time.Hour)); len(ids) != 1 {
		t.Fatalf("live tasks %q, want one", ids)
	}
}

// TestRedisStoreCluster runs the store's contract on a three-primary
// Redis Cluster with the key layout the server uses there (a hash tag of
// the store's own, redisconn.Options.GroupPrefix): the scripts and
// transactions touch a task, the live set and the owner's set together,
// which Cluster allows only within one slot. Without the tag Create is
// refused (CROSSSLOT), which is why the layout exists.
func TestRedisStoreCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t, "")
	storetest.Run(t, func(t *testing.T) tasks.Store {
		s := tasks.NewRedisStore(client, fmt.Sprintf("test%d:{tasks}:", prefixes.Add(1)), nil)
		t.Cleanup(func() { s.Close() })
		return s
	})

	t.Run("without a hash tag", func(t *testing.T) {
		s := tasks.NewRedisStore(client, newPrefix(), nil)
		defer s.Close()
		now := time.Now()
		err := s.Create(context.Background(), liveTask("untagged", "alice", now), tasks.Caps{})
		if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
			t.Fatalf("Create without a hash tag on Cluster = %v, want CROSSSLOT", err)
		}
	})
}

// TestRedisStoreSentinelFailover: tasks written before a failover of the
// primary are there after it, and can be updated on the new primary.
func TestRedisStoreSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t)
	s := tasks.NewRedisStore(d.Client(t, ""), newPrefix(), nil)
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	for i := range 50 {
		if err := s.Create(ctx, liveTask(fmt.Sprintf("t%d", i), "alice", now), tasks.Caps{}); err != nil {
			t.Fatal(err)
		}
	}
	d.WaitReplicated(ctx, "")
	t.Logf("promoted %v after the kill", d.KillPrimary().Round(time.Millisecond))
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := s.Update(ctx, "t0", func(t *tasks.Task) error { t.Status = tasks.StatusCompleted; return nil })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no update reached the new primary within 15s: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // waiting on real processes
	}
	for i := range 50 {
		got, err := s.Get(ctx, fmt.Sprintf("t%d", i))
		if err != nil {
			t.Fatalf("t%d after the failover: %v", i, err)
		}
		if want := map[bool]tasks.Status{true: tasks.StatusCompleted, false: tasks.StatusWorking}[i == 0]; got.Status != want {
			t.Errorf("t%d: %s, want %s", i, got.Status, want)
		}
	}
}

// TestRedisStoreWaitsForReplicas: with WaitForReplicas, a task created or
// updated is on the replica when the call returns; with no replica to
// acknowledge, Create and Update fail as unavailable, and the task a
// failed Create saved is taken back (not there, not counted as live).
func TestRedisStoreWaitsForReplicas(t *testing.T) {
	ctx := context.Background()
	primary, replica := redistest.StartWithReplica(t)
	prefix := newPrefix()
	// While the replica is up, a write waits until it has the write, for
	// as long as a busy machine makes that take (WAIT answers as soon as
	// it does); once it is down, writes wait the short timeout that fails
	// them.
	s := tasks.NewRedisStore(primary.Client(t), prefix, nil, tasks.WaitForReplicas(1, 10*time.Second))
	defer s.Close()
	onReplica := tasks.NewRedisStore(replica.Client(t), prefix, nil)
	defer onReplica.Close()
	now := time.Now()
	if err := s.Create(ctx, liveTask("kept", "alice", now), tasks.Caps{}); err != nil {
		t.Fatal(err)
	}
	if got, err := onReplica.Get(ctx, "kept"); err != nil || got.Status != tasks.StatusWorking {
		t.Fatalf("the replica right after Create: %v, %v", got, err)
	}
	if _, err := s.Update(ctx, "kept", func(t *tasks.Task) error { t.Status = tasks.StatusCompleted; return nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := onReplica.Get(ctx, "kept"); err != nil || got.Status != tasks.StatusCompleted {
		t.Fatalf("the replica right after Update: %v, %v", got, err)
	}

	replica.Stop()
	s = tasks.NewRedisStore(primary.Client(t), prefix, nil, tasks.WaitForReplicas(1, 200*time.Millisecond))
	defer s.Close()
	if err := s.Create(ctx, liveTask("unkept", "alice", now), tasks.Caps{PerOwner: 1}); !errors.Is(err, tasks.ErrUnavailable) {
		t.Fatalf("Create with no replica = %v, want ErrUnavailable", err)
	}
	if _, err := s.Get(ctx, "unkept"); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("a task whose Create failed: %v, want not found (taken back)", err)
	}
	if ids, err := s.Stale(ctx, now.Add(time.Hour)); err != nil || len(ids) != 0 {
		t.Fatalf("live tasks after a failed Create: %q, %v; want none", ids, err)
	}
	if _, err := s.Update(ctx, "kept", func(t *tasks.Task) error { t.StatusMessage = "x"; return nil }); !errors.Is(err, tasks.ErrUnavailable) {
		t.Fatalf("Update with no replica = %v, want ErrUnavailable", err)
	}
}

// TestRedisStoreClusterWaitsForReplicas runs the store's contract on a
// Cluster whose primary of the store's slot has a replica, each write
// waiting for it: Create's script and Update's transaction wait on the
// connection of that primary.
func TestRedisStoreClusterWaitsForReplicas(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	client := c.Client(t, "")
	node, err := client.MasterForKey(context.Background(), "x{tasks}")
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range c.Nodes {
		if n.Addr == node.Options().Addr {
			c.AddReplica(t, i)
		}
	}
	storetest.Run(t, func(t *testing.T) tasks.Store {
		s := tasks.NewRedisStore(client, fmt.Sprintf("test%d:{tasks}:", prefixes.Add(1)), nil, tasks.WaitForReplicas(1, 10*time.Second)) // WAIT answers once the replica has the write
		t.Cleanup(func() { s.Close() })
		return s
	})
}
