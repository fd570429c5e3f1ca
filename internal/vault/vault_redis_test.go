//go:build e2e

package vault

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/portcullis-mcp/portcullis/internal/kv"
	"github.com/portcullis-mcp/portcullis/internal/rediskit"
	"github.com/portcullis-mcp/portcullis/internal/redistest"
)

// TestVaultThroughSentinelFailover: what users connected is kept through
// a Redis Sentinel failover (the primary killed): every entry written
// before opens after it, through a new client, and the vault takes writes
// again.
func TestVaultThroughSentinelFailover(t *testing.T) {
	d := redistest.StartSentinel(t)
	open := func() *Vault {
		// Writes wait for the replica, as Portcullis's on Sentinel do
		// (redis.wait.replicas defaults to 1 there).
		kit := rediskit.New(d.Client(t, ""), rediskit.Durability{Replicas: 1, Timeout: 10 * time.Second})
		return newVault(t, kv.NewRedis(kit, "test:connect:"), 1)
	}
	ctx := context.Background()
	v := open()
	users := make([]Owner, 20)
	for i := range users {
		users[i] = Owner{Issuer: "https://idp.example", Subject: fmt.Sprintf("user-%d", i)}
		if err := v.Put(ctx, "github", users[i], entry(fmt.Sprintf("token-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("SIGKILL of the primary: promoted after %v", d.KillPrimary().Round(time.Millisecond))
	after := open()
	for i, u := range users {
		e, _, err := after.Get(ctx, "github", u)
		if err != nil || e.AccessToken != fmt.Sprintf("token-%d", i) {
			t.Fatalf("%s after the failover: %+v, %v", u.Subject, e, err)
		}
	}
	// A refresh after the failover is written to the new primary.
	_, old, err := after.Get(ctx, "github", users[0])
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := after.Swap(ctx, "github", users[0], old, entry("token-0-refreshed"))
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no refresh written within 30s after the failover: %v %v", ok, err)
		}
		time.Sleep(100 * time.Millisecond) // the client reconnecting to the new primary
	}
	if e, _, err := open().Get(ctx, "github", users[0]); err != nil || e.AccessToken != "token-0-refreshed" {
		t.Fatalf("the refresh: %+v, %v", e, err)
	}
}
