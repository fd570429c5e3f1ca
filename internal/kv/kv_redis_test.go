//go:build e2e

package kv

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestRedisKV runs the KV contract against a real redis-server.
func TestRedisKV(t *testing.T) {
	srv := redistest.Start(t)
	testKV(t, NewRedis(rediskit.New(srv.Client(t), rediskit.Durability{}), "test:as:"), time.Sleep)
}

// TestRedisKVWaitsForTheReplica runs the KV contract with each write
// waiting for a replica, and shows what the replica holds.
func TestRedisKVWaitsForTheReplica(t *testing.T) {
	primary, replica := redistest.StartWithReplica(t)
	kv := NewRedis(rediskit.New(primary.Client(t), rediskit.Durability{Replicas: 1, Timeout: 10 * time.Second}), "test:as:") // as long as a busy machine needs: WAIT answers once the replica has the write
	testKV(t, kv, time.Sleep)
	if err := kv.Set(context.Background(), "grant", []byte("kept"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := replica.Client(t).Get(context.Background(), "test:as:grant").Val(); got != "kept" {
		t.Fatalf("the replica holds %q right after the write, want kept", got)
	}
}

// TestRedisKVCluster runs the KV contract against a three-primary Redis
// Cluster: its keys spread over slots, so no operation may touch two keys
// at once (a DEL of several would be refused with CROSSSLOT).
func TestRedisKVCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3)
	testKV(t, NewRedis(rediskit.New(c.Client(t, ""), rediskit.Durability{}), "test:as:"), time.Sleep)
}

// TestRedisKVSentinelFailover: what the authorization server keeps
// (grants, refresh families, consents, registrations: values with a TTL)
// survives a failover of the primary, and writes work on the new one.
func TestRedisKVSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t)
	kv := NewRedis(rediskit.New(d.Client(t, ""), rediskit.Durability{}), "test:as:")
	ctx := context.Background()
	for i := range 200 {
		if err := kv.Set(ctx, fmt.Sprintf("grant:%d", i), []byte(fmt.Sprint(i)), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	d.WaitReplicated(ctx, "")
	t.Logf("promoted %v after the kill", d.KillPrimary().Round(time.Millisecond))
	waitWritable(t, func() error { return kv.Set(ctx, "after", []byte("1"), time.Hour) })
	for i := range 200 {
		if v, err := kv.Get(ctx, fmt.Sprintf("grant:%d", i)); err != nil || string(v) != fmt.Sprint(i) {
			t.Fatalf("grant:%d after the failover = %q, %v", i, v, err)
		}
	}
	if ok, err := kv.SetNX(ctx, "grant:0", []byte("again"), time.Hour); err != nil || ok {
		t.Fatalf("SetNX of a key kept through the failover = %v, %v; want refused", ok, err)
	}
}

// waitWritable retries write until it succeeds, for at most 15 s: the
// time for the client to learn the new primary.
func waitWritable(t *testing.T, write func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := write()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded within 15s of the failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond) // waiting on real processes
	}
}
